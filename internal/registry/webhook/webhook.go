package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// The two configuration resources.
var (
	mutatingResource   = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "mutatingwebhookconfigurations"}
	validatingResource = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "validatingwebhookconfigurations"}
)

// Webhooks is the registry's admission by webhooks.
type Webhooks struct {
	Registry *registry.Registry
	Logger   *slog.Logger // nil discards
	// Authorizer answers the authorizer checks of admission policies'
	// expressions; nil allows every one (--authorization-mode
	// AlwaysAllow).
	Authorizer registry.Authorizer
	// MutatingAuth and ValidatingAuth are how mutating and validating
	// webhooks are called (--admission-control-config-file's
	// kubeconfigs); nil calls them anonymously.
	MutatingAuth, ValidatingAuth *WebhookAuth
	// StaticReloadInterval is how often WatchStatic reads the static
	// manifest directories without a change seen (0: a minute).
	StaticReloadInterval time.Duration
	// APIServerID names this server in the static manifest metrics
	// (their apiserver_id_hash).
	APIServerID string

	hooks  atomic.Pointer[hookSets]
	reload sync.Mutex // one reload at a time
	// apiSet is the last reading of the API's configurations, staticSet
	// that of the files' (both held under reload); static are the
	// directories read (LoadStatic).
	apiSet, staticSet hookSet
	static            []*staticSource
	// compiledPolicies are the last reading's policies by uid, their
	// bindings left out (held under reload).
	compiledPolicies map[types.UID]*policy
	clients          clientCache
	metrics          admissionMetrics
	policyMetrics    policyMetrics
	mutationMetrics  mutationMetrics
	conditionMetrics conditionMetrics
	manifestMetrics  manifestMetrics
}

// hookSets are the configurations in force for each kind of write.
type hookSets struct {
	// all are the files' then the API's: for writes of every kind but
	// the admission configurations.
	all hookSet
	// webhookConfigs are the files' and the API's policies: for writes of
	// webhook configurations (upstream exempts them from the API's
	// webhooks, not from its policies).
	webhookConfigs hookSet
	// policyConfigs are the files' only: for writes of admission
	// policies and their bindings.
	policyConfigs hookSet
}

// publish makes the last readings of the API and of the files the
// configurations in force. Call it under reload.
func (w *Webhooks) publish() {
	s, a := &w.staticSet, &w.apiSet
	sets := &hookSets{
		all: hookSet{
			mutating:         slices.Concat(s.mutating, a.mutating),
			validating:       slices.Concat(s.validating, a.validating),
			policies:         slices.Concat(s.policies, a.policies),
			mutatingPolicies: slices.Concat(s.mutatingPolicies, a.mutatingPolicies),
		},
		webhookConfigs: hookSet{
			mutating:         s.mutating,
			validating:       s.validating,
			policies:         slices.Concat(s.policies, a.policies),
			mutatingPolicies: slices.Concat(s.mutatingPolicies, a.mutatingPolicies),
		},
		policyConfigs: *s,
	}
	w.hooks.Store(sets)
	w.clients.keep(&sets.all, w.auth)
}

// setFor is the configurations in force for writes of gr (nil before
// the first reading).
func (w *Webhooks) setFor(gr schema.GroupResource) *hookSet {
	sets := w.hooks.Load()
	switch {
	case sets == nil:
		return nil
	case gr == mutatingResource || gr == validatingResource:
		return &sets.webhookConfigs
	case gr == policyResource || gr == bindingResource || gr == mutatingPolicyResource || gr == mutatingBindingResource:
		return &sets.policyConfigs
	}
	return &sets.all
}

// empty reports whether s holds nothing.
func (s *hookSet) empty() bool {
	return s == nil || len(s.mutating)+len(s.validating)+len(s.policies)+len(s.mutatingPolicies) == 0
}

// hookSet is one reading of every configuration.
type hookSet struct {
	mutating, validating []*hook
	// policies are the ValidatingAdmissionPolicies some binding names,
	// mutatingPolicies the MutatingAdmissionPolicies.
	policies, mutatingPolicies []*policy
}

// hook is one webhook of a configuration, parsed.
type hook struct {
	config string // its configuration's name
	name   string
	// mutating: of a MutatingWebhookConfiguration; reinvoke: its
	// reinvocationPolicy is IfNeeded.
	mutating, reinvoke bool

	// match are its rules (no resourceNames, no exclusions), matchPolicy
	// and selectors, matched as a policy's matchConstraints are.
	match          criteria
	failurePolicy  admissionregistrationv1.FailurePolicyType
	sideEffects    *admissionregistrationv1.SideEffectClass
	timeoutSeconds int32
	reviewVersions []string
	clientConfig   admissionregistrationv1.WebhookClientConfig
	// conditions are the matchConditions, compiled; conditionsErr a
	// compile error, which fails every request the webhook would judge.
	conditions    []*cel.MatchCondition
	conditionsErr error
}

// Install hooks kinds' webhook configurations so that a write or delete
// of one reloads the configurations before the client's answer.
func (w *Webhooks) Install(kinds []*registry.Kind) []*registry.Kind {
	for _, k := range kinds {
		switch k.GroupResource() {
		case mutatingResource, validatingResource, policyResource, bindingResource, mutatingPolicyResource, mutatingBindingResource:
			k.Written = func(ctx context.Context, _ *unstructured.Unstructured) { w.reloadLogged(ctx) }
			k.Deleted = k.Written
		}
	}
	return kinds
}

func (w *Webhooks) reloadLogged(ctx context.Context) {
	if err := w.Load(ctx); err != nil && w.Logger != nil {
		w.Logger.Error("reading the admission webhook configurations", "err", err)
	}
}

// Load reads every configuration and makes them the ones in force.
func (w *Webhooks) Load(ctx context.Context) error {
	w.reload.Lock()
	defer w.reload.Unlock()
	set := &hookSet{}
	for _, gr := range []schema.GroupResource{mutatingResource, validatingResource} {
		res, ok := w.Registry.Get(gr)
		if !ok {
			continue
		}
		list, err := res.ListFromStore(ctx, "v1", "")
		if err != nil {
			return err
		}
		items := list.Items
		sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
		for i := range items {
			hooks, err := parse(gr, &items[i])
			if err != nil {
				return fmt.Errorf("%s %s: %w", gr, items[i].GetName(), err)
			}
			if gr == mutatingResource {
				set.mutating = append(set.mutating, hooks...)
			} else {
				set.validating = append(set.validating, hooks...)
			}
		}
	}
	compiled := map[types.UID]*policy{}
	policies, err := w.loadPolicies(ctx, validatingPolicies, compiled)
	if err != nil {
		return err
	}
	set.policies = policies
	if set.mutatingPolicies, err = w.loadPolicies(ctx, mutatingPolicies, compiled); err != nil {
		return err
	}
	w.compiledPolicies = compiled
	w.apiSet = *set
	w.publish()
	return nil
}

// parse reads the webhooks of one configuration of resource gr.
func parse(gr schema.GroupResource, obj *unstructured.Unstructured) ([]*hook, error) {
	// A validating webhook has a mutating one's fields but
	// reinvocationPolicy: both kinds read as mutating.
	var c admissionregistrationv1.MutatingWebhookConfiguration
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &c); err != nil {
		return nil, err
	}
	var out []*hook
	for _, wh := range c.Webhooks {
		h := &hook{
			config:         c.Name,
			name:           wh.Name,
			mutating:       gr == mutatingResource,
			reinvoke:       wh.ReinvocationPolicy != nil && *wh.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy,
			failurePolicy:  admissionregistrationv1.Fail,
			sideEffects:    wh.SideEffects,
			timeoutSeconds: 10,
			reviewVersions: wh.AdmissionReviewVersions,
			clientConfig:   wh.ClientConfig,
		}
		// v1's defaults where a field is unset (stored objects have
		// them set).
		h.match = parseCriteria(&admissionregistrationv1.MatchResources{
			NamespaceSelector: wh.NamespaceSelector, ObjectSelector: wh.ObjectSelector, MatchPolicy: wh.MatchPolicy,
		})
		h.match.allWithoutRules = false // a webhook without rules is never called, as upstream's
		for _, r := range wh.Rules {
			h.match.rules = append(h.match.rules, admissionregistrationv1.NamedRuleWithOperations{RuleWithOperations: r})
		}
		if wh.FailurePolicy != nil {
			h.failurePolicy = *wh.FailurePolicy
		}
		if wh.TimeoutSeconds != nil {
			h.timeoutSeconds = *wh.TimeoutSeconds
		}
		h.compile(wh.MatchConditions)
		out = append(out, h)
	}
	return out, nil
}

// compile compiles the matchConditions.
func (h *hook) compile(conditions []admissionregistrationv1.MatchCondition) {
	for _, c := range conditions {
		mc, err := cel.CompileMatchCondition(c.Name, strings.TrimSpace(c.Expression))
		if err != nil {
			h.conditionsErr = fmt.Errorf("matchCondition %s: %w", c.Name, err)
			return
		}
		h.conditions = append(h.conditions, mc)
	}
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// Active reports whether any webhook or bound policy is configured.
func (w *Webhooks) Active() bool {
	sets := w.hooks.Load()
	return sets != nil && !sets.all.empty()
}

// Admits reports whether any webhook or bound policy applies to writes
// of k.
func (w *Webhooks) Admits(k *registry.Kind) bool { return !w.setFor(k.GroupResource()).empty() }

// Mutate runs the mutating admission policies, then calls the mutating
// webhooks that match a, one after another: upstream's order. If any of
// them changed the object, they run once more, as upstream's
// reinvocation runs them: only what has reinvocationPolicy IfNeeded and
// saw the object changed after it.
func (w *Webhooks) Mutate(ctx context.Context, a *registry.AdmissionAttributes) error {
	set := w.setFor(a.Kind.GroupResource())
	if set == nil || len(set.mutating)+len(set.mutatingPolicies) == 0 {
		return nil
	}
	rc := &reinvocation{}
	for {
		if len(set.mutatingPolicies) > 0 {
			if err := w.mutatePolicies(ctx, a, set.mutatingPolicies, rc); err != nil {
				return err
			}
		}
		if err := w.mutate(ctx, a, set.mutating, rc); err != nil {
			return err
		}
		if rc.reinvoking || !rc.should {
			return nil
		}
		rc.reinvoking = true
	}
}

// Validate runs the validating admission policies over a, then calls
// the validating webhooks that match it, at once: upstream's order.
func (w *Webhooks) Validate(ctx context.Context, a *registry.AdmissionAttributes) error {
	set := w.setFor(a.Kind.GroupResource())
	if set == nil {
		return nil
	}
	if len(set.policies) > 0 {
		if err := w.validatePolicies(ctx, a, set.policies); err != nil {
			return err
		}
	}
	if len(set.validating) == 0 {
		return nil
	}
	var calls []*invocation
	for _, h := range set.validating {
		inv, err := w.match(ctx, h, a)
		if err != nil {
			return err
		}
		if inv != nil {
			calls = append(calls, inv)
		}
	}
	if len(calls) == 0 {
		return nil
	}
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, inv := range calls {
		wg.Go(func() {
			_, errs[i] = w.callMeasured(ctx, inv, a)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// mutate calls the mutating hooks that match a in turn, each with the
// object the ones before left (when reinvoking, only those rc says).
func (w *Webhooks) mutate(ctx context.Context, a *registry.AdmissionAttributes, hooks []*hook, rc *reinvocation) error {
	st := &rc.webhooks
	if rc.reinvoking && st.outputChanged(a.Object) {
		// Policies changed the object after the webhooks last ran.
		st.reinvokePrevious()
	}
	defer func() { st.last = a.Object }()
	for _, h := range hooks {
		inv, err := w.match(ctx, h, a)
		if err != nil {
			return err
		}
		if inv == nil || (rc.reinvoking && !st.again[h]) {
			continue
		}
		changed, err := w.callMeasured(ctx, inv, a)
		if changed {
			st.reinvokePrevious()
			rc.should = true
		}
		if h.reinvoke {
			st.add(h)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// callMeasured is call, counted in the metrics, with its error as the
// request's (outcome).
func (w *Webhooks) callMeasured(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes) (bool, error) {
	start := time.Now()
	changed, err := w.call(ctx, inv, a)
	took := time.Since(start)
	w.metrics.observe(inv.hook, string(a.Operation), took, err)
	registry.TrackWebhook(ctx, inv.hook.mutating, took)
	return changed, w.outcome(inv.hook, err)
}

// outcome turns a call's error into the request's: a failed call is
// ignored under failurePolicy Ignore, an internal error otherwise; a
// refusal stands.
func (w *Webhooks) outcome(h *hook, err error) error {
	var failed *callError
	if !errors.As(err, &failed) {
		return err
	}
	if h.failurePolicy == admissionregistrationv1.Ignore {
		if w.Logger != nil {
			w.Logger.Warn("failed calling webhook, failing open", "webhook", h.name, "err", failed)
		}
		return nil
	}
	return apierrors.NewInternalError(failed)
}

// auth is how h is called: the mutating or the validating webhooks'
// kubeconfig.
func (w *Webhooks) auth(h *hook) *WebhookAuth {
	if h.mutating {
		return w.MutatingAuth
	}
	return w.ValidatingAuth
}

var _ registry.Admission = (*Webhooks)(nil)

// httpClients keeps a client per distinct trust and server name, shared
// by the webhooks that have the same.
type clientCache struct {
	mu      sync.Mutex
	clients map[clientKey]*http.Client
}

type clientKey struct {
	caBundle   string
	serverName string
	creds      *Credentials
}
