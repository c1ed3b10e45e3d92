package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
	"github.com/kplane-dev/kplane/internal/storage"
)

// The two policy resources.
var (
	policyResource  = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "validatingadmissionpolicies"}
	bindingResource = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "validatingadmissionpolicybindings"}
)

// policy is a ValidatingAdmissionPolicy or a MutatingAdmissionPolicy
// with the bindings that name it, parsed and compiled.
type policy struct {
	name, resourceVersion string
	// reinvoke: a MutatingAdmissionPolicy's reinvocationPolicy is
	// IfNeeded.
	reinvoke       bool
	failurePolicy  admissionregistrationv1.FailurePolicyType
	paramKind      *admissionregistrationv1.ParamKind
	constraints    criteria
	constraintsErr error
	compiled       *cel.Policy
	bindings       []*binding
}

// binding is a ValidatingAdmissionPolicyBinding (with its actions) or a
// MutatingAdmissionPolicyBinding.
type binding struct {
	name      string
	resources *criteria // nil: every request the policy matches
	paramRef  *admissionregistrationv1.ParamRef
	actions   []admissionregistrationv1.ValidationAction
}

// policyKind is a kind of admission policy, with its binding kind.
type policyKind struct {
	policies, bindings schema.GroupResource
	// parse reads a policy.
	parse func(obj *unstructured.Unstructured) (*policy, error)
	// bind reads a binding: the name of its policy, and itself.
	bind func(obj *unstructured.Unstructured) (string, *binding, error)
}

var validatingPolicies = policyKind{
	policies: policyResource, bindings: bindingResource,
	parse: func(obj *unstructured.Unstructured) (*policy, error) {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p); err != nil {
			return nil, err
		}
		return parsePolicy(&p), nil
	},
	bind: func(obj *unstructured.Unstructured) (string, *binding, error) {
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
			return "", nil, err
		}
		return b.Spec.PolicyName, newBinding(b.Name, b.Spec.ParamRef, b.Spec.MatchResources, b.Spec.ValidationActions), nil
	},
}

func newBinding(name string, ref *admissionregistrationv1.ParamRef, m *admissionregistrationv1.MatchResources, actions []admissionregistrationv1.ValidationAction) *binding {
	b := &binding{name: name, paramRef: ref, actions: actions}
	if m != nil {
		c := parseCriteria(m)
		b.resources = &c
	}
	return b
}

// loadPolicies reads the policies of kind and their bindings: policies
// by name, each with its bindings by name (upstream's order is its
// informers' map order; a fixed one makes the first refusal the same
// every time). A policy no binding names, and a binding naming no
// policy, do nothing. The policies compiled are kept in compiled, by
// uid.
func (w *Webhooks) loadPolicies(ctx context.Context, kind policyKind, compiled map[types.UID]*policy) ([]*policy, error) {
	read := func(gr schema.GroupResource) ([]unstructured.Unstructured, error) {
		res, ok := w.Registry.Get(gr)
		if !ok {
			return nil, nil
		}
		list, err := res.ListFromStore(ctx, "v1", "")
		if err != nil {
			return nil, err
		}
		items := list.Items
		sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
		return items, nil
	}
	bindingObjs, err := read(kind.bindings)
	if err != nil || len(bindingObjs) == 0 {
		return nil, err
	}
	policyObjs, err := read(kind.policies)
	if err != nil {
		return nil, err
	}
	byName := map[string]*policy{}
	var out []*policy
	// A policy is compiled again only when it changed (about a
	// millisecond each): the last reading's are kept by uid and
	// resourceVersion.
	for i := range policyObjs {
		obj := &policyObjs[i]
		pol := w.compiledPolicies[obj.GetUID()]
		if pol == nil || pol.resourceVersion != obj.GetResourceVersion() {
			if pol, err = kind.parse(obj); err != nil {
				return nil, fmt.Errorf("%s %s: %w", kind.policies, obj.GetName(), err)
			}
			pol.resourceVersion = obj.GetResourceVersion()
		}
		compiled[obj.GetUID()] = pol
		bound := *pol // this reading's bindings are its own
		pol = &bound
		byName[pol.name] = pol
		out = append(out, pol)
	}
	for i := range bindingObjs {
		name, b, err := kind.bind(&bindingObjs[i])
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", kind.bindings, bindingObjs[i].GetName(), err)
		}
		if pol := byName[name]; pol != nil {
			pol.bindings = append(pol.bindings, b)
		}
	}
	bound := out[:0]
	for _, p := range out {
		if len(p.bindings) > 0 {
			bound = append(bound, p)
		}
	}
	return bound, nil
}

func parsePolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) *policy {
	pol := newPolicy(p.Name, p.Spec.FailurePolicy, p.Spec.ParamKind, p.Spec.MatchConstraints)
	spec := policySpec(p.Spec.ParamKind, p.Spec.MatchConditions, p.Spec.Variables)
	for _, v := range p.Spec.Validations {
		val := cel.Validation{Expression: v.Expression, Message: v.Message, MessageExpression: v.MessageExpression}
		if v.Reason != nil {
			val.Reason = string(*v.Reason)
		}
		spec.Validations = append(spec.Validations, val)
	}
	for _, a := range p.Spec.AuditAnnotations {
		spec.AuditAnnotations = append(spec.AuditAnnotations, cel.AuditAnnotation{Key: a.Key, ValueExpression: a.ValueExpression})
	}
	pol.compiled = cel.CompilePolicy(spec)
	return pol
}

// newPolicy is a policy of either kind with its common fields read.
func newPolicy(name string, fp *admissionregistrationv1.FailurePolicyType, pk *admissionregistrationv1.ParamKind, m *admissionregistrationv1.MatchResources) *policy {
	pol := &policy{name: name, failurePolicy: admissionregistrationv1.Fail, paramKind: pk}
	if fp != nil {
		pol.failurePolicy = *fp
	}
	if m != nil {
		pol.constraints = parseCriteria(m)
	} else {
		// Refused when written; one stored otherwise is upstream's
		// configuration error.
		pol.constraintsErr = errors.New("policy contained no match constraints, a required field")
	}
	return pol
}

// policySpec is the spec to compile of a policy of either kind, with its
// common expressions.
func policySpec(pk *admissionregistrationv1.ParamKind, conditions []admissionregistrationv1.MatchCondition, variables []admissionregistrationv1.Variable) cel.PolicySpec {
	spec := cel.PolicySpec{HasParams: pk != nil}
	for _, m := range conditions {
		spec.MatchConditions = append(spec.MatchConditions, cel.NamedExpression{Name: m.Name, Expression: m.Expression})
	}
	for _, v := range variables {
		spec.Variables = append(spec.Variables, cel.NamedExpression{Name: v.Name, Expression: v.Expression})
	}
	return spec
}

// denial is a refusal decided by a policy (and binding: nil for the
// policy's own configuration errors).
type denial struct {
	policy  *policy
	binding *binding
	message string
	reason  metav1.StatusReason
}

// validatePolicies runs the policies over a, as kube-apiserver's
// ValidatingAdmissionPolicy plugin does, and returns the first refusal.
func (w *Webhooks) validatePolicies(ctx context.Context, a *registry.AdmissionAttributes, policies []*policy) error {
	var denials []denial
	configError := func(p *policy, b *binding, err error) {
		switch p.failurePolicy {
		case admissionregistrationv1.Ignore:
		case admissionregistrationv1.Fail:
			denials = append(denials, denial{policy: p, binding: b, message: configMessage(b, err)})
		default:
			denials = append(denials, denial{policy: p, binding: b, message: fmt.Sprintf("unrecognized failure policy: '%v'", p.failurePolicy)})
		}
	}
	calls := w.policyCalls(ctx, a, policies, configError)
	inputs, err := w.newInputs(ctx, a, calls)
	if err != nil {
		return err
	}
	audit := &policyAudit{}
	for _, c := range calls {
		shown, err := inputs.of(ctx, c.inv)
		if err != nil {
			configError(c.policy, c.binding, fmt.Errorf("failed to convert object version: %w", err))
			continue
		}
		for _, param := range c.params {
			in := *shown
			in.Params = param
			denials = append(denials, w.evaluate(ctx, c.policy, c.binding, &in, a.Operation, audit)...)
		}
	}
	audit.publish(ctx)
	if len(denials) == 0 {
		return nil
	}
	return policyRefusal(a, denials[0])
}

// policyAudit collects what the policies of one request give its audit
// event, as upstream's dispatcher does: each policy's auditAnnotations
// (POLICY/KEY, distinct values of its bindings joined by ", "), and the
// validations that failed under the Audit action.
type policyAudit struct {
	policies    []string                       // in the order first annotated
	annotations map[string]map[string][]string // policy → key → values
	keys        map[string][]string            // policy → keys in order
	failures    []validationFailure
}

// validationFailure is one element of the
// validation.policy.admission.k8s.io/validation_failure annotation.
type validationFailure struct {
	Message           string                                     `json:"message"`
	Policy            string                                     `json:"policy"`
	Binding           string                                     `json:"binding"`
	ExpressionIndex   int                                        `json:"expressionIndex"`
	ValidationActions []admissionregistrationv1.ValidationAction `json:"validationActions"`
}

// Upstream's bounds: an annotation's value, and the failures listed.
const (
	maxAuditAnnotationValue = 10 << 10
	maxValidationFailures   = 50
)

func (pa *policyAudit) annotate(policy, key, value string) {
	if len(value) > maxAuditAnnotationValue {
		value = value[:maxAuditAnnotationValue]
	}
	if pa.annotations == nil {
		pa.annotations, pa.keys = map[string]map[string][]string{}, map[string][]string{}
	}
	byKey := pa.annotations[policy]
	if byKey == nil {
		byKey = map[string][]string{}
		pa.annotations[policy] = byKey
		pa.policies = append(pa.policies, policy)
	}
	if !slices.Contains(byKey[key], value) {
		if byKey[key] == nil {
			pa.keys[policy] = append(pa.keys[policy], key)
		}
		byKey[key] = append(byKey[key], value)
	}
}

// publish adds what was collected to the request's audit event.
func (pa *policyAudit) publish(ctx context.Context) {
	for _, p := range pa.policies {
		for _, k := range pa.keys[p] {
			registry.AddAuditAnnotation(ctx, p+"/"+k, strings.Join(pa.annotations[p][k], ", "))
		}
	}
	if len(pa.failures) == 0 {
		return
	}
	failures := pa.failures
	if len(failures) > maxValidationFailures {
		failures = failures[:maxValidationFailures]
	}
	if data, err := json.Marshal(failures); err == nil {
		registry.AddAuditAnnotation(ctx, "validation.policy.admission.k8s.io/validation_failure", string(data))
	}
}

// configMessage is a configuration error as upstream words it: the
// policy's, or (b not nil) the binding's.
func configMessage(b *binding, err error) string {
	what := "policy"
	if b != nil {
		what = "binding"
	}
	return fmt.Sprintf("failed to configure %s: %v", what, err)
}

// policyCall is a policy to run over a request, for one of its bindings,
// with the parameters the binding gives.
type policyCall struct {
	policy  *policy
	binding *binding
	// inv is how the request is shown to the policy: its resource, or an
	// equivalent one the policy's rules name.
	inv    *invocation
	params []map[string]any
}

// policyCalls are the policies to run over a and how, as upstream's
// policy dispatcher finds them: each policy whose matchConstraints match,
// for each binding whose matchResources match and that finds parameters.
// Configuration errors (a selector that does not parse, a paramKind not
// served, parameters not found under Deny) go to configError, and leave
// the policy or binding out.
func (w *Webhooks) policyCalls(ctx context.Context, a *registry.AdmissionAttributes, policies []*policy, configError func(*policy, *binding, error)) []policyCall {
	var calls []policyCall
	for _, p := range policies {
		if p.constraintsErr != nil {
			configError(p, nil, p.constraintsErr)
			continue
		}
		inv, err := w.matchCriteria(ctx, &p.constraints, a)
		if err != nil {
			configError(p, nil, err)
			continue
		}
		if inv == nil {
			continue
		}
		var paramKind schema.GroupVersionKind
		var paramRes *registry.Resource
		if p.paramKind != nil {
			gv, err := schema.ParseGroupVersion(p.paramKind.APIVersion)
			if err != nil {
				continue // upstream leaves such a policy out
			}
			paramKind = gv.WithKind(p.paramKind.Kind)
			if paramRes, _ = w.Registry.ForKind(paramKind); paramRes == nil {
				configError(p, nil, fmt.Errorf("failed to find resource referenced by paramKind: '%v'", paramKind))
				continue
			}
		}
		for _, b := range p.bindings {
			if b.resources != nil {
				match, err := w.matchCriteria(ctx, b.resources, a)
				if err != nil {
					configError(p, b, err)
					continue
				}
				if match == nil {
					continue
				}
			}
			params, err := w.params(ctx, paramRes, paramKind.Version, b.paramRef, a)
			if err != nil {
				configError(p, b, err)
				continue
			}
			if len(params) > 0 {
				calls = append(calls, policyCall{policy: p, binding: b, inv: inv, params: params})
			}
		}
	}
	return calls
}

// inputs makes what the expressions of policy calls see of a request,
// but the parameters: once per way the request is shown (its resource,
// or an equivalent one), with its namespace read once.
type inputs struct {
	w         *Webhooks
	a         *registry.AdmissionAttributes
	namespace map[string]any
	made      map[string]*cel.PolicyInput
}

// newInputs reads a's namespace if some call will need it.
func (w *Webhooks) newInputs(ctx context.Context, a *registry.AdmissionAttributes, calls []policyCall) (inputs, error) {
	in := inputs{w: w, a: a}
	if len(calls) > 0 {
		var err error
		if in.namespace, err = w.namespaceObject(ctx, a); err != nil {
			return inputs{}, err
		}
	}
	return in, nil
}

// of is what expressions see of the request shown as inv; the caller
// copies it before setting parameters or objects.
func (in *inputs) of(ctx context.Context, inv *invocation) (*cel.PolicyInput, error) {
	shownAs := inv.resource.String() + " " + inv.kind.String()
	if made := in.made[shownAs]; made != nil {
		return made, nil
	}
	made, err := in.w.policyInput(ctx, inv, in.a, in.namespace)
	if err != nil {
		return nil, err
	}
	if in.made == nil {
		in.made = map[string]*cel.PolicyInput{}
	}
	in.made[shownAs] = made
	return made, nil
}

// evaluate runs p's expressions with b's params in for b. Each validation
// that failed (false, or not evaluated under failurePolicy Fail, as a
// matchCondition or the whole evaluation may be) goes through b's
// actions: Deny makes it a refusal, Warn a warning, Audit an entry of
// the validation_failure audit annotation (pa). Each auditAnnotation's
// value goes to pa; one whose expression fails refuses under Fail,
// whatever the actions, as upstream's.
func (w *Webhooks) evaluate(ctx context.Context, p *policy, b *binding, in *cel.PolicyInput, op registry.Operation, pa *policyAudit) []denial {
	decisions, annotations, err := w.decide(ctx, p, in, op)
	if err != nil {
		decisions = []cel.Decision{{Error: true, Message: err.Error()}}
	}
	var out []denial
	for _, d := range decisions {
		if d.Error && p.failurePolicy == admissionregistrationv1.Ignore {
			w.policyMetrics.observe(p.name, b.name, d.Message, "allow", d.Elapsed)
			continue
		}
		for _, action := range b.actions {
			switch action {
			case admissionregistrationv1.Deny:
				out = append(out, denial{policy: p, binding: b, message: d.Message, reason: metav1.StatusReason(d.Reason)})
			case admissionregistrationv1.Warn:
				registry.AddWarning(ctx, fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", p.name, b.name, d.Message))
			case admissionregistrationv1.Audit:
				pa.failures = append(pa.failures, validationFailure{Message: d.Message, Policy: p.name, Binding: b.name,
					ExpressionIndex: d.Index, ValidationActions: b.actions})
			}
			w.policyMetrics.observe(p.name, b.name, d.Message, strings.ToLower(string(action)), d.Elapsed)
		}
	}
	for _, an := range annotations {
		switch {
		case an.Err == nil:
			pa.annotate(p.name, an.Key, an.Value)
		case p.failurePolicy != admissionregistrationv1.Ignore:
			out = append(out, denial{policy: p, binding: b, message: an.Err.Error()})
			w.policyMetrics.observe(p.name, b.name, an.Err.Error(), "deny", an.Elapsed)
		}
	}
	return out
}

// decide evaluates p's matchConditions, then its validations and audit
// annotations.
func (w *Webhooks) decide(ctx context.Context, p *policy, in *cel.PolicyInput, op registry.Operation) ([]cel.Decision, []cel.AnnotationResult, error) {
	ok, err := w.policyMatches(ctx, p, in, op)
	if err != nil || !ok {
		return nil, nil, err
	}
	return p.compiled.Validate(ctx, in)
}

// policyMatches evaluates p's matchConditions over in, counted in the
// matchCondition metrics as upstream counts a policy's, of either kind.
func (w *Webhooks) policyMatches(ctx context.Context, p *policy, in *cel.PolicyInput, op registry.Operation) (bool, error) {
	start := time.Now()
	ok, failed, err := p.compiled.Match(ctx, in)
	if p.compiled.Conditions() > 0 {
		w.conditionMetrics.observe(p.name, "policy", "validate", op, ok, failed, time.Since(start))
	}
	return ok, err
}

// policyRefusal is d as upstream words it: a Forbidden of the request's
// resource and name, with the validation's reason (Invalid by default)
// and its code, the message repeated as a cause.
func policyRefusal(a *registry.AdmissionAttributes, d denial) error {
	var message string
	if d.binding != nil {
		message = fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", d.policy.name, d.binding.name, d.message)
	} else {
		message = fmt.Sprintf("ValidatingAdmissionPolicy '%s' denied request: %s", d.policy.name, d.message)
	}
	err := apierrors.NewForbidden(a.Kind.GroupResource(), refusedName(a), errors.New(message))
	reason := d.reason
	if reason == "" {
		reason = metav1.StatusReasonInvalid
	}
	err.ErrStatus.Reason = reason
	err.ErrStatus.Code = reasonCode(reason)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Message: message})
	return err
}

func reasonCode(r metav1.StatusReason) int32 {
	switch r {
	case metav1.StatusReasonForbidden:
		return 403
	case metav1.StatusReasonUnauthorized:
		return 401
	case metav1.StatusReasonRequestEntityTooLarge:
		return 413
	}
	return 422
}

// params returns the parameter objects ref gives for a, read from res
// in version v: one nil when the policy has no paramKind (res nil) or the
// binding no paramRef; none when none are found and the binding allows
// that; upstream's errors otherwise.
func (w *Webhooks) params(ctx context.Context, res *registry.Resource, v string, ref *admissionregistrationv1.ParamRef, a *registry.AdmissionAttributes) ([]map[string]any, error) {
	if res == nil || ref == nil {
		return []map[string]any{nil}, nil
	}
	ns := ""
	if res.Kind().Namespaced {
		ns = requestNamespace(a)
		if ref.Namespace != "" {
			ns = ref.Namespace
		} else if ns == "" {
			return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
		}
	} else if ref.Namespace != "" {
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	var found []map[string]any
	switch {
	case ref.Name != "":
		// A consistent read: a parameter changed by a write that has
		// returned applies to the next request (upstream's informer
		// may lag behind it).
		obj, err := res.Get(ctx, v, ns, ref.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			found = append(found, paramObject(obj))
		case apierrors.IsNotFound(err):
		default:
			return nil, err
		}
	case ref.Selector != nil:
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		list, err := res.List(ctx, v, ns, registry.ListOptions{ListOptions: storage.ListOptions{
			Predicate: storage.Predicate{Label: sel},
		}})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			found = append(found, paramObject(&list.Items[i]))
		}
	default:
		return nil, errors.New("one of name or selector must be provided")
	}
	if len(found) == 0 && ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionregistrationv1.DenyAction {
		return nil, errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")
	}
	return found, nil
}

// paramObject is a parameter as expressions see it: as read, with its
// apiVersion and kind.
func paramObject(obj *unstructured.Unstructured) map[string]any { return obj.Object }

// namespaceObject is a's namespace as expressions see it: its metadata
// (only the fields upstream keeps), spec and status; nil for
// cluster-scoped requests and for Namespaces themselves.
func (w *Webhooks) namespaceObject(ctx context.Context, a *registry.AdmissionAttributes) (map[string]any, error) {
	if a.Namespace == "" || (a.Kind.Group == "" && a.Kind.Resource == "namespaces") {
		return nil, nil
	}
	res, ok := w.Registry.Get(schema.GroupResource{Resource: "namespaces"})
	if !ok {
		return nil, apierrors.NewInternalError(errNoNamespaces)
	}
	ns, err := res.Get(ctx, "v1", "", a.Namespace, metav1.GetOptions{ResourceVersion: "0"})
	if apierrors.IsNotFound(err) {
		ns, err = res.Get(ctx, "v1", "", a.Namespace, metav1.GetOptions{})
	}
	if err != nil {
		return nil, err
	}
	meta := map[string]any{}
	src, _ := ns.Object["metadata"].(map[string]any)
	for _, k := range []string{"name", "generateName", "namespace", "uid", "resourceVersion", "generation",
		"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "finalizers"} {
		if v, ok := src[k]; ok {
			meta[k] = v
		}
	}
	if _, ok := meta["creationTimestamp"]; !ok {
		meta["creationTimestamp"] = nil
	}
	out := map[string]any{"metadata": meta, "spec": map[string]any{}, "status": map[string]any{}}
	for _, k := range []string{"spec", "status"} {
		if v, ok := ns.Object[k]; ok {
			out[k] = v
		}
	}
	return out, nil
}

// policyInput is what a policy's expressions see of a, shown as inv.
func (w *Webhooks) policyInput(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes, namespace map[string]any) (*cel.PolicyInput, error) {
	obj, old, err := w.shownBoth(ctx, inv, a)
	if err != nil {
		return nil, err
	}
	request, err := requestMap(ctx, inv, a)
	if err != nil {
		return nil, err
	}
	u, _ := registry.UserFrom(ctx)
	in := &cel.PolicyInput{
		Object: objectMap(obj), OldObject: objectMap(old), Request: request, Namespace: namespace,
		User: cel.AuthzUser{Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra},
		RequestResource: cel.RequestResource{
			Group: a.Kind.Group, Resource: a.Kind.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
		},
	}
	if w.Authorizer != nil {
		in.Authorize = w.authorize
	}
	return in, nil
}

// authorize answers an expression's authorizer check by w.Authorizer.
func (w *Webhooks) authorize(ctx context.Context, c cel.AuthzCheck) (bool, string, error) {
	d, reason, err := w.Authorizer.Authorize(ctx, registry.Attributes{
		User:            registry.User{Name: c.User.Name, UID: c.User.UID, Groups: c.User.Groups, Extra: c.User.Extra},
		Verb:            c.Verb,
		ResourceRequest: c.ResourceRequest,
		Namespace:       c.Namespace, APIGroup: c.Group, APIVersion: "*", Resource: c.Resource, Subresource: c.Subresource, Name: c.Name,
		Path: c.Path,
	})
	return d == registry.Allow, reason, err
}
