package webhook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// The two mutating policy resources.
var (
	mutatingPolicyResource  = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "mutatingadmissionpolicies"}
	mutatingBindingResource = schema.GroupResource{Group: admissionregistrationv1.GroupName, Resource: "mutatingadmissionpolicybindings"}
)

var mutatingPolicies = policyKind{
	policies: mutatingPolicyResource, bindings: mutatingBindingResource,
	parse: func(obj *unstructured.Unstructured) (*policy, error) {
		var p admissionregistrationv1.MutatingAdmissionPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &p); err != nil {
			return nil, err
		}
		pol := newPolicy(p.Name, p.Spec.FailurePolicy, p.Spec.ParamKind, p.Spec.MatchConstraints)
		pol.reinvoke = p.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy
		spec := policySpec(p.Spec.ParamKind, p.Spec.MatchConditions, p.Spec.Variables)
		for _, m := range p.Spec.Mutations {
			switch {
			case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
				spec.Mutations = append(spec.Mutations, cel.Mutation{PatchType: cel.ApplyConfiguration, Expression: m.ApplyConfiguration.Expression})
			case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
				spec.Mutations = append(spec.Mutations, cel.Mutation{PatchType: cel.JSONPatch, Expression: m.JSONPatch.Expression})
			}
		}
		pol.compiled = cel.CompilePolicy(spec)
		return pol, nil
	},
	bind: func(obj *unstructured.Unstructured) (string, *binding, error) {
		var b admissionregistrationv1.MutatingAdmissionPolicyBinding
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &b); err != nil {
			return "", nil, err
		}
		return b.Spec.PolicyName, newBinding(b.Name, b.Spec.ParamRef, b.Spec.MatchResources, nil), nil
	},
}

// mutationError is a policy's error for a request: a configuration
// error, or a mutation that failed (reason Invalid).
type mutationError struct {
	policy  *policy
	binding *binding
	message string
	reason  metav1.StatusReason
}

func (e mutationError) String() string {
	if e.binding != nil {
		return fmt.Sprintf("policy '%s' with binding '%s' denied request: %s", e.policy.name, e.binding.name, e.message)
	}
	return fmt.Sprintf("policy %q denied request: %s", e.policy.name, e.message)
}

// invocationKey is a policy invoked for a binding and a parameter, as
// reinvocation tells them apart.
type invocationKey struct{ policy, binding, paramNamespace, paramName string }

// mutatePolicies runs the mutating admission policies over a, as
// kube-apiserver's MutatingAdmissionPolicy plugin does: each policy
// invocation in turn (policy by name, binding by name, then parameter),
// each of its mutations in order over the object the ones before left.
// A mutation that fails counts against its policy's failurePolicy and
// the others still run; when all have run, the failures under Fail
// refuse the request together, the first one's message leading.
func (w *Webhooks) mutatePolicies(ctx context.Context, a *registry.AdmissionAttributes, policies []*policy, rc *reinvocation) error {
	st := &rc.policies
	if rc.reinvoking && st.outputChanged(a.Object) {
		// Webhooks changed the object after the policies last ran.
		st.reinvokePrevious()
	}
	defer func() { st.last = a.Object }()

	var errs []mutationError
	configError := func(p *policy, b *binding, err error) {
		errs = append(errs, mutationError{policy: p, binding: b, message: configMessage(b, err)})
	}
	calls := w.policyCalls(ctx, a, policies, configError)
	inputs, err := w.newInputs(ctx, a, calls)
	if err != nil {
		return err
	}
	// Upstream marks the object it mutates dirty when any mutation
	// applies, changed or not, per version shown; if the last policy
	// run's is, every reinvocable policy invoked runs again.
	dirty := map[schema.GroupVersionKind]bool{}
	var last *invocation
	for _, c := range calls {
		p, b := c.policy, c.binding
		shown, err := inputs.of(ctx, c.inv)
		if err != nil {
			configError(p, nil, fmt.Errorf("failed to convert object version: %w", err))
			continue
		}
		for _, param := range c.params {
			key := invocationKey{policy: p.name, binding: b.name}
			if param != nil {
				u := unstructured.Unstructured{Object: param}
				key.paramNamespace, key.paramName = u.GetNamespace(), u.GetName()
			}
			in := *shown
			in.Params = param
			if err := w.showObject(ctx, c.inv, a, &in); err != nil {
				configError(p, nil, fmt.Errorf("failed to convert object version: %w", err))
				continue
			}
			if ok, err := w.policyMatches(ctx, p, &in, a.Operation); err != nil {
				errs = append(errs, mutationError{policy: p, binding: b, message: err.Error(), reason: metav1.StatusReasonInvalid})
				continue
			} else if !ok {
				continue
			}
			if rc.reinvoking && !st.again[key] {
				continue
			}
			before := a.Object
			if p.compiled.Mutations() > 0 {
				last = c.inv
			}
			for i := 0; i < p.compiled.Mutations() && a.Object != nil; i++ {
				start := time.Now()
				err := w.mutateOne(ctx, p, i, c.inv, a, &in)
				took := time.Since(start)
				w.mutationMetrics.observe(p.name, b.name, mutationErrorType(err), took)
				var status apierrors.APIStatus
				if errors.As(err, &status) {
					return err
				}
				if err != nil {
					errs = append(errs, mutationError{policy: p, binding: b, message: err.Error(), reason: metav1.StatusReasonInvalid})
				} else {
					dirty[c.inv.kind] = true
				}
			}
			if !apiequality.Semantic.DeepEqual(before, a.Object) {
				st.reinvokePrevious()
				rc.should = true
			}
			if p.reinvoke {
				st.add(key)
			}
		}
	}
	if last != nil && a.Object != nil && dirty[last.kind] {
		st.reinvokePrevious()
		rc.should = true
	}
	var refusing []mutationError
	for _, e := range errs {
		if e.policy.failurePolicy != admissionregistrationv1.Ignore {
			refusing = append(refusing, e)
		}
	}
	if len(refusing) == 0 {
		return nil
	}
	refusal := apierrors.NewForbidden(a.Kind.GroupResource(), refusedName(a), errors.New("admission request denied by policy"))
	refusal.ErrStatus.Message = refusing[0].String()
	if refusing[0].reason != "" {
		refusal.ErrStatus.Reason = refusing[0].reason
	}
	for _, e := range refusing {
		refusal.ErrStatus.Details.Causes = append(refusal.ErrStatus.Details.Causes, metav1.StatusCause{Message: e.String()})
	}
	return refusal
}

// showObject sets in's objects to a's as inv shows them.
func (w *Webhooks) showObject(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes, in *cel.PolicyInput) error {
	obj, old, err := w.shownBoth(ctx, inv, a)
	if err != nil {
		return err
	}
	in.Object, in.OldObject = objectMap(obj), objectMap(old)
	return nil
}

// mutateOne evaluates p's mutation i over a as inv shows it (in, its
// objects set to a's now), applies the patch, and makes the result
// a.Object. The result is decoded and defaulted as a request body is (an
// object that no longer fits its type is an internal error, as
// upstream's).
func (w *Webhooks) mutateOne(ctx context.Context, p *policy, i int, inv *invocation, a *registry.AdmissionAttributes, in *cel.PolicyInput) error {
	if err := w.showObject(ctx, inv, a, in); err != nil {
		return err
	}
	patch, err := p.compiled.Mutate(ctx, i, in)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: in.Object}
	kind := a.Kind
	if inv.equivalent != nil {
		kind = inv.equivalent
	}
	var data []byte
	if patch.Apply != nil {
		next, err := applyConfiguration(typeConverter(kind, a), obj, patch.Apply)
		if err != nil {
			return fmt.Errorf("error applying patch: %w", err)
		}
		if data, err = next.MarshalJSON(); err != nil {
			return apierrors.NewInternalError(err)
		}
	} else {
		ops, err := jsonpatch.DecodePatch(patch.JSONPatch)
		if err != nil {
			return fmt.Errorf("JSON Patch: %w", err)
		}
		doc, err := obj.MarshalJSON()
		if err != nil {
			return apierrors.NewInternalError(err)
		}
		if data, err = ops.Apply(doc); errors.Is(err, jsonpatch.ErrTestFailed) {
			return nil // a failed test leaves the object as it was
		} else if err != nil {
			return fmt.Errorf("JSON Patch: %w", err)
		}
	}
	next := &unstructured.Unstructured{}
	if a.ObjectKind.Empty() {
		if next, _, err = registry.Decode(kind, data); err != nil {
			return apierrors.NewInternalError(err)
		}
	} else if err := next.UnmarshalJSON(data); err != nil {
		return apierrors.NewInternalError(err)
	}
	if inv.equivalent != nil {
		if next, err = w.shown(ctx, a.Kind, a.Version, next); err != nil {
			return err
		}
	}
	a.Object = next
	return nil
}

var deducedTypes = managedfields.NewDeducedTypeConverter()

// typeConverter is the schema an apply configuration is merged by: the
// kind's, or (a kind without one, a subresource's object) one deduced
// from the objects.
func typeConverter(k *registry.Kind, a *registry.AdmissionAttributes) managedfields.TypeConverter {
	if k.TypeConverter == nil || !a.ObjectKind.Empty() {
		return deducedTypes
	}
	return k.TypeConverter
}

// applyConfiguration merges apply, an apply configuration, into obj by
// the schema tc knows, as upstream's mutating policies do: as a
// server-side apply would, but without field ownership. An apply
// configuration may not set an atomic list, map or struct: it would
// replace what it does not name.
func applyConfiguration(tc managedfields.TypeConverter, obj *unstructured.Unstructured, apply map[string]any) (*unstructured.Unstructured, error) {
	patch := &unstructured.Unstructured{Object: apply}
	patch.SetGroupVersionKind(obj.GroupVersionKind())
	patchTyped, err := tc.ObjectToTyped(patch)
	if err != nil {
		return nil, fmt.Errorf("failed to convert patch object to typed object: %w", err)
	}
	if atomics := findAtomics(nil, patchTyped.Schema(), patchTyped.TypeRef(), patchTyped.AsValue()); len(atomics) > 0 {
		return nil, fmt.Errorf("invalid ApplyConfiguration: may not mutate atomic arrays, maps or structs: %v", strings.Join(atomics, ", "))
	}
	live, err := tc.ObjectToTyped(obj, typed.AllowDuplicates)
	if err != nil {
		return nil, fmt.Errorf("failed to convert original object to typed object: %w", err)
	}
	merged, err := live.Merge(patchTyped)
	if err != nil {
		return nil, fmt.Errorf("failed to merge patch: %w", err)
	}
	out, err := tc.TypedToObject(merged)
	if err != nil {
		return nil, fmt.Errorf("failed to convert typed object to object: %w", err)
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
		if err != nil {
			return nil, err
		}
		u = &unstructured.Unstructured{Object: m}
	}
	return u, nil
}

// findAtomics are the paths of the atomic lists, maps and structs v sets,
// in upstream's notation (.spec.ports[0]).
func findAtomics(path []fieldpath.PathElement, s *smdschema.Schema, tr smdschema.TypeRef, v value.Value) []string {
	a, ok := s.Resolve(tr)
	if !ok {
		return nil
	}
	var out []string
	at := func() string {
		var b strings.Builder
		for _, p := range path {
			b.WriteString(p.String())
		}
		return b.String()
	}
	if v.IsMap() && a.Map != nil {
		if a.Map.ElementRelationship == smdschema.Atomic {
			out = append(out, at())
		}
		v.AsMap().Iterate(func(key string, val value.Value) bool {
			if f, ok := a.Map.FindField(key); ok {
				out = append(out, findAtomics(append(path[:len(path):len(path)], fieldpath.PathElement{FieldName: &key}), s, f.Type, val)...)
			}
			return true
		})
	}
	if v.IsList() && a.List != nil {
		if a.List.ElementRelationship == smdschema.Atomic {
			out = append(out, at())
		}
		l := v.AsList()
		for i := 0; i < l.Length(); i++ {
			out = append(out, findAtomics(append(path[:len(path):len(path)], fieldpath.PathElement{Index: &i}), s, a.List.ElementType, l.At(i))...)
		}
	}
	return out
}

// refusedName is the name a refusal of a names: the request's, the
// object's, its generateName, or "Unknown".
func refusedName(a *registry.AdmissionAttributes) string {
	if a.Name != "" {
		return a.Name
	}
	if a.Object != nil {
		if n := a.Object.GetName(); n != "" {
			return n
		}
		if g := a.Object.GetGenerateName(); g != "" {
			return g
		}
	}
	return "Unknown"
}

// mutationErrorType is upstream's error type of a mutation's outcome in
// the metrics, read off its message.
func mutationErrorType(err error) string {
	switch {
	case err == nil:
		return "no_error"
	case strings.HasPrefix(err.Error(), "compilation"):
		return "compile_error"
	case strings.HasPrefix(err.Error(), "validation failed due to running out of cost budget"):
		return "out_of_budget"
	}
	return "invalid_error"
}

// reinvocation is what one request's mutating admission keeps between
// its two passes, as upstream's reinvocation context: after a first
// pass over the policies then the webhooks, a second one runs if any
// changed the object, and in it only what was invoked with
// reinvocationPolicy IfNeeded and saw the object changed after it. (For
// policies upstream counts any mutation that applied as a change: a
// reinvocable policy whose mutations apply runs twice.)
type reinvocation struct {
	reinvoking bool // the second pass
	should     bool // some policy or webhook changed the object
	policies   reinvokeState[invocationKey]
	webhooks   reinvokeState[*hook]
}

// reinvokeState is one plugin's: the object it last returned, what it
// invoked (reinvocable) since the object last changed, and what it is
// to invoke again.
type reinvokeState[K comparable] struct {
	last     *unstructured.Unstructured
	previous map[K]bool
	again    map[K]bool
}

// reinvokePrevious marks what was invoked so far for reinvocation.
func (s *reinvokeState[K]) reinvokePrevious() {
	if s.again == nil {
		s.again = map[K]bool{}
	}
	for k := range s.previous {
		s.again[k] = true
	}
	clear(s.previous)
}

func (s *reinvokeState[K]) add(k K) {
	if s.previous == nil {
		s.previous = map[K]bool{}
	}
	s.previous[k] = true
}

func (s *reinvokeState[K]) outputChanged(obj *unstructured.Unstructured) bool {
	return !apiequality.Semantic.DeepEqual(s.last, obj)
}
