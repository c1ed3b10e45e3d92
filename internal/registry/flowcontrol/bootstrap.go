package flowcontrol

import (
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kplane-dev/kplane/internal/registry/core"
)

// The configuration kube-apiserver v1.37 makes at its first start, and
// keeps: two mandatory priority levels and flow schemas (exempt, for
// system:masters; catch-all, for whatever nothing else takes), and the
// suggested ones, which sort kube-apiserver's own clients (nodes,
// controllers, leader election, service accounts) from everyone else. Each
// carries the annotation apf.kubernetes.io/autoupdate-spec "true": the
// server puts the spec back when it changes, unless a user set it to
// "false" on a suggested one.

// The mandatory objects' names.
const (
	exemptName   = flowcontrolv1.PriorityLevelConfigurationNameExempt
	catchAllName = flowcontrolv1.PriorityLevelConfigurationNameCatchAll
)

func ptr32(v int32) *int32 { return &v }

// queuing is a Limited level that queues, with its seats' shares, the
// share it lends, and its queues.
func queuing(name string, shares, lendable, queues, hand int32) *flowcontrolv1.PriorityLevelConfiguration {
	return level1(name, flowcontrolv1.PriorityLevelConfigurationSpec{
		Type: flowcontrolv1.PriorityLevelEnablementLimited,
		Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
			NominalConcurrencyShares: ptr32(shares), LendablePercent: ptr32(lendable),
			LimitResponse: flowcontrolv1.LimitResponse{
				Type:    flowcontrolv1.LimitResponseTypeQueue,
				Queuing: &flowcontrolv1.QueuingConfiguration{Queues: queues, HandSize: hand, QueueLengthLimit: 50},
			},
		},
	})
}

func level1(name string, spec flowcontrolv1.PriorityLevelConfigurationSpec) *flowcontrolv1.PriorityLevelConfiguration {
	return &flowcontrolv1.PriorityLevelConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "PriorityLevelConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}},
		Spec:       spec,
	}
}

// mandatoryLevels are the priority levels the server always has, those
// validation holds fixed (catch-all, exempt).
func mandatoryLevels() []*flowcontrolv1.PriorityLevelConfiguration {
	levels := core.MandatoryPriorityLevelConfigurations()
	for _, pl := range levels {
		pl.TypeMeta = metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "PriorityLevelConfiguration"}
	}
	return levels
}

// suggestedLevels are the priority levels made at the first start.
func suggestedLevels() []*flowcontrolv1.PriorityLevelConfiguration {
	return []*flowcontrolv1.PriorityLevelConfiguration{
		queuing("system", 30, 33, 64, 6),
		queuing("node-high", 40, 25, 64, 6),
		queuing("leader-election", 10, 0, 16, 4),
		queuing("workload-high", 40, 50, 128, 6),
		queuing("workload-low", 100, 90, 128, 6),
		queuing("global-default", 20, 50, 128, 6),
	}
}

// Subjects and rules of the flow schemas.
func groups(names ...string) []flowcontrolv1.Subject {
	var out []flowcontrolv1.Subject
	for _, n := range names {
		out = append(out, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: n}})
	}
	return out
}

func users(names ...string) []flowcontrolv1.Subject {
	var out []flowcontrolv1.Subject
	for _, n := range names {
		out = append(out, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: n}})
	}
	return out
}

// kubeSystemAccounts names every service account of kube-system.
func kubeSystemAccounts() []flowcontrolv1.Subject {
	return []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
		ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: metav1.NamespaceSystem, Name: flowcontrolv1.NameAll}}}
}

// everything is a rule set that covers every request of subjects.
func everything(subjects []flowcontrolv1.Subject) flowcontrolv1.PolicyRulesWithSubjects {
	all := []string{"*"}
	return flowcontrolv1.PolicyRulesWithSubjects{
		Subjects:         subjects,
		ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: all, APIGroups: all, Resources: all, Namespaces: all, ClusterScope: true}},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: all, NonResourceURLs: all}},
	}
}

// leases is a rule for the Leases of every namespace.
func leases(verbs ...string) flowcontrolv1.ResourcePolicyRule {
	return flowcontrolv1.ResourcePolicyRule{Verbs: verbs, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Namespaces: []string{"*"}}
}

func flowSchema(name, level string, precedence int32, by flowcontrolv1.FlowDistinguisherMethodType, rules flowcontrolv1.PolicyRulesWithSubjects) *flowcontrolv1.FlowSchema {
	fs := &flowcontrolv1.FlowSchema{
		TypeMeta:   metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "FlowSchema"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{flowcontrolv1.AutoUpdateAnnotationKey: "true"}},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence:         precedence,
			Rules:                      []flowcontrolv1.PolicyRulesWithSubjects{rules},
		},
	}
	if by != "" {
		fs.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: by}
	}
	return fs
}

const (
	byUser      = flowcontrolv1.FlowDistinguisherMethodByUserType
	byNamespace = flowcontrolv1.FlowDistinguisherMethodByNamespaceType
)

// mandatorySchemas are the flow schemas the server always has, those
// validation holds fixed (exempt, catch-all).
func mandatorySchemas() []*flowcontrolv1.FlowSchema {
	schemas := core.MandatoryFlowSchemas()
	for _, fs := range schemas {
		fs.TypeMeta = metav1.TypeMeta{APIVersion: flowcontrolv1.SchemeGroupVersion.String(), Kind: "FlowSchema"}
	}
	return schemas
}

// suggestedSchemas are the flow schemas made at the first start.
func suggestedSchemas() []*flowcontrolv1.FlowSchema {
	nodeHigh := flowcontrolv1.PolicyRulesWithSubjects{
		Subjects: groups("system:nodes"),
		ResourceRules: []flowcontrolv1.ResourcePolicyRule{
			{Verbs: []string{"*"}, APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Namespaces: []string{"*"}, ClusterScope: true},
			leases("*"),
		},
	}
	return []*flowcontrolv1.FlowSchema{
		flowSchema("system-nodes", "system", 500, byUser, everything(groups("system:nodes"))),
		flowSchema("system-node-high", "node-high", 400, byUser, nodeHigh),
		flowSchema("probes", exemptName, 2, "", flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:         groups("system:unauthenticated", "system:authenticated"),
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz", "/livez"}}},
		}),
		flowSchema("system-leader-election", "leader-election", 100, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      append(users("system:kube-controller-manager", "system:kube-scheduler"), kubeSystemAccounts()...),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{leases("get", "create", "update")},
		}),
		flowSchema("kube-controller-manager", "workload-high", 800, byNamespace, everything(users("system:kube-controller-manager"))),
		flowSchema("kube-scheduler", "workload-high", 800, byNamespace, everything(users("system:kube-scheduler"))),
		flowSchema("kube-system-service-accounts", "workload-high", 900, byNamespace, everything(kubeSystemAccounts())),
		flowSchema("service-accounts", "workload-low", 9000, byUser, everything(groups("system:serviceaccounts"))),
		flowSchema("global-default", "global-default", 9900, byUser, everything(groups("system:unauthenticated", "system:authenticated"))),
	}
}
