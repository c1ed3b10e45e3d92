package cel

import (
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// baseEnv is the CEL environment every rule is compiled in, before `self` and
// the CRD's types are added. It has the language options and libraries of
// kube-apiserver's base environment (k8s.io/apiserver/pkg/cel/environment,
// base.go) as of the 1.36 compatibility version that 1.37 uses for new
// expressions. The Kubernetes libraries are in kubernetesLibraries.
var baseEnv = sync.OnceValues(func() (*cel.Env, error) {
	opts := []cel.EnvOption{
		cel.HomogeneousAggregateLiterals(),
		cel.EagerlyValidateDeclarations(true),
		cel.DefaultUTCTimeZone(true),
		// has() is free, as it was before cel-go v0.17.7; Kubernetes keeps
		// that so that existing CRDs keep their estimated cost.
		cel.CostEstimatorOptions(checker.PresenceTestHasCost(false)),
		cel.CrossTypeNumericComparisons(true),
		cel.OptionalTypes(),
		cel.ASTValidators(
			cel.ValidateDurationLiterals(),
			cel.ValidateTimestampLiterals(),
			cel.ValidateRegexLiterals(),
			cel.ValidateHomogeneousAggregateLiterals(),
		),
		ext.Strings(ext.StringsVersion(2)),
		ext.Sets(),
		ext.TwoVarComprehensions(),
		ext.Lists(ext.ListsVersion(3)),
	}
	opts = append(opts, kubernetesLibraries()...)
	return cel.NewEnv(opts...)
})

// programOptions are the evaluation settings of every rule: kube-apiserver's
// per-call cost limit, cost tracking with the library prices, and checks for
// cancellation inside comprehensions.
func programOptions(est *estimator) []cel.ProgramOption {
	return []cel.ProgramOption{
		cel.EvalOptions(cel.OptOptimize, cel.OptTrackCost),
		cel.CostTrackerOptions(interpreter.PresenceTestHasCost(false)),
		cel.CostLimit(perCallLimit),
		cel.CostTracking(est),
		cel.InterruptCheckFrequency(checkFrequency),
	}
}
