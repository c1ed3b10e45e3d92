package cel

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry/crd/correlate"
)

// Validate evaluates the rules on obj. old is the stored object on update,
// nil on create; rules that use oldSelf run only where an old value exists,
// unless they set optionalOldSelf.
//
// On update, failures ratchet as kube-apiserver's do with the
// CRDValidationRatcheting feature (GA, on by default): a rule that does not
// use oldSelf and fails on a value unchanged from old is not reported. A
// value is unchanged if it correlates with an old value (object fields by
// name, map values by key, items of x-kubernetes-list-type=map lists by
// their keys) that is deeply equal to it; a value that does not correlate
// (an item of an atomic or set list, a field that is new) is judged by its
// nearest correlated ancestor. Rules using oldSelf, optionalOldSelf
// included, are never ratcheted. Upstream turns a ratcheted failure into a
// warning; kplane drops it.
//
// The rules for one object share a cost budget (kube-apiserver's
// RuntimeCELCostBudget), and each evaluation has its own limit
// (PerCallLimit). Running out of either stops validation with an error, so
// the object is refused. Errors are at paths relative to the object root
// ("spec.replicas"), as kube-apiserver reports them.
func (v *Validator) Validate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	if v == nil || v.root == nil || obj == nil {
		return nil
	}
	var o any
	var rc ratchet
	if old != nil {
		o = old
		rc.cur = correlate.New(obj, old, v.root.schema)
	}
	budget := int64(runtimeCostBudget)
	return v.root.validate(ctx, nil, obj, o, rc, &budget)
}

// validate checks the node's rules on obj and then its children. *budget is
// the cost left; it goes negative when validation must stop. rc places obj
// for ratcheting.
func (n *node) validate(ctx context.Context, p *field.Path, obj, old any, rc ratchet, budget *int64) field.ErrorList {
	if n == nil || obj == nil {
		// Rules do not see null values: a rule on a nullable field only checks
		// non-null values.
		return nil
	}
	errs := n.evaluate(ctx, p, obj, old, rc, budget)
	if *budget < 0 {
		return errs
	}
	switch x := obj.(type) {
	case map[string]any:
		oldMap, _ := old.(map[string]any)
		for _, k := range sortedKeys(x) {
			child := n.values
			cp := p.Key(k)
			if n.props != nil {
				if c, ok := n.props[k]; ok {
					child, cp = c, p.Child(k)
				} else {
					child = nil
				}
			}
			if child == nil {
				continue
			}
			var oldV any
			if oldMap != nil {
				oldV = oldMap[k]
			}
			errs = append(errs, child.validate(ctx, cp, x[k], oldV, rc.key(k), budget)...)
			if *budget < 0 {
				return errs
			}
		}
	case []any:
		if n.items == nil {
			return errs
		}
		olds := correlate.OldItems(n.schema, old)
		for i, e := range x {
			errs = append(errs, n.items.validate(ctx, p.Index(i), e, olds.Get(e), rc.index(i), budget)...)
			if *budget < 0 {
				return errs
			}
		}
	}
	return errs
}

// evaluate runs the node's own rules.
func (n *node) evaluate(ctx context.Context, p *field.Path, obj, old any, rc ratchet, budget *int64) field.ErrorList {
	if len(n.rules) == 0 {
		return nil
	}
	var errs field.ErrorList
	typ := n.schema.Type
	if *budget <= 0 {
		*budget = -1
		return field.ErrorList{field.Invalid(p, typ, "validation failed due to running out of cost budget, no further validation rules will be run")}
	}
	self := toVal(obj, n.typ)
	var oldSelf ref.Val
	if old != nil {
		oldSelf = toVal(old, n.typ)
	}
	for _, r := range n.rules {
		if r.prog == nil {
			continue // empty rule
		}
		if r.usesOldSelf && old == nil && !r.optional {
			// A transition rule has nothing to compare against.
			continue
		}
		act := map[string]any{"self": self}
		switch {
		case r.optional && oldSelf != nil:
			act["oldSelf"] = types.OptionalOf(oldSelf)
		case r.optional:
			act["oldSelf"] = types.OptionalNone
		case oldSelf != nil:
			act["oldSelf"] = oldSelf
		}
		res, det, err := r.prog.ContextEval(ctx, act)
		if det == nil || det.ActualCost() == nil {
			*budget = -1
			return append(errs, field.Invalid(p, typ, fmt.Sprintf("runtime cost could not be calculated for validation rule: %v, no further validation rules will be run", ruleErrorString(r.src))))
		}
		cost := *det.ActualCost()
		if cost > math.MaxInt64 || int64(cost) > *budget {
			*budget = -1
			return append(errs, field.Invalid(p, typ, "validation failed due to running out of cost budget, no further validation rules will be run"))
		}
		*budget -= int64(cost)
		if err != nil {
			msg := err.Error()
			switch {
			case strings.HasPrefix(msg, "no such overload"):
				// Only reachable through dyn values (int-or-string): the
				// checker catches the rest.
				errs = append(errs, field.Invalid(p, typ, fmt.Sprintf("'%v': call arguments did not match a supported operator, function or macro signature for rule: %v", err, ruleErrorString(r.src))))
			case strings.HasPrefix(msg, "operation cancelled: actual cost limit exceeded"):
				*budget = -1
				return append(errs, field.Invalid(p, typ, fmt.Sprintf("'%v': no further validation rules will be run due to call cost exceeds limit for rule: %v", err, ruleErrorString(r.src))))
			default:
				// no such key, index out of bounds, overflow, division by zero...
				errs = append(errs, field.Invalid(p, typ, fmt.Sprintf("%v evaluating rule: %v", err, ruleErrorString(r.src))))
			}
			continue
		}
		if res == types.True {
			continue
		}
		fp := p
		if r.fieldPath != "" {
			fp = p.Child(r.fieldPath)
		}
		// A failure of a rule that does not look at oldSelf, on a value
		// unchanged since the stored object, is let through (upstream's
		// addErr in validateExpressions).
		report := func(e *field.Error) {
			if r.usesOldSelf || !rc.unchanged() {
				errs = append(errs, e)
			}
		}
		detail := ""
		if r.msg != nil {
			m, fatal, merr := evalMessage(ctx, r, act, budget)
			switch {
			case fatal:
				report(field.Invalid(fp, typ, merr))
				return errs
			case merr == "":
				detail = m
			}
		}
		if detail == "" {
			detail = ruleMessageOrDefault(r.src)
		}
		var value any = obj
		if typ == "object" || typ == "array" {
			value = field.OmitValueType{}
		}
		report(errorForReason(fp, value, detail, r.src.Reason))
	}
	return errs
}

// evalMessage evaluates a rule's messageExpression. A failure that is not
// fatal (an evaluation error, an empty or multi-line message) falls back to
// the rule's message, as kube-apiserver does; running out of budget is fatal.
func evalMessage(ctx context.Context, r rule, act map[string]any, budget *int64) (msg string, fatal bool, errMsg string) {
	res, det, err := r.msg.ContextEval(ctx, act)
	if det == nil || det.ActualCost() == nil {
		*budget = -1
		return "", true, fmt.Sprintf("runtime cost could not be calculated for messageExpression: %q", r.src.MessageExpression)
	}
	cost := *det.ActualCost()
	if cost > math.MaxInt64 || int64(cost) > *budget {
		*budget = -1
		return "", true, "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run"
	}
	if err != nil {
		if strings.HasPrefix(err.Error(), "operation cancelled: actual cost limit exceeded") {
			*budget = -1
			return "", true, fmt.Sprintf("no further validation rules will be run due to call cost exceeds limit for messageExpression: %q", r.src.MessageExpression)
		}
		*budget -= int64(cost)
		return "", false, "messageExpression evaluation failed due to: " + err.Error()
	}
	*budget -= int64(cost)
	s, ok := res.Value().(string)
	if !ok {
		return "", false, "messageExpression failed to convert to string"
	}
	s = strings.TrimSpace(s)
	switch {
	case len(s) > maxMessageExpressionSize:
		return "", false, fmt.Sprintf("messageExpression beyond allowable length of %d", maxMessageExpressionSize)
	case strings.Contains(s, "\n"):
		return "", false, "messageExpression should not contain line breaks"
	case s == "":
		return "", false, "messageExpression should evaluate to a non-empty string"
	}
	return s, false, ""
}

func ruleMessageOrDefault(r apiextensionsv1.ValidationRule) string {
	if r.Message == "" {
		return "failed rule: " + ruleErrorString(r)
	}
	return strings.TrimSpace(r.Message)
}

func ruleErrorString(r apiextensionsv1.ValidationRule) string {
	if r.Message != "" {
		return strings.TrimSpace(r.Message)
	}
	return strings.TrimSpace(r.Rule)
}

// errorForReason builds the error a failed rule reports, by its reason
// (fieldErrorForReason in kube-apiserver).
func errorForReason(p *field.Path, value any, detail string, reason *apiextensionsv1.FieldValueErrorReason) *field.Error {
	if reason == nil {
		return field.Invalid(p, value, detail)
	}
	switch *reason {
	case apiextensionsv1.FieldValueForbidden:
		return field.Forbidden(p, detail)
	case apiextensionsv1.FieldValueRequired:
		return field.Required(p, detail)
	case apiextensionsv1.FieldValueDuplicate:
		return field.Duplicate(p, value)
	default:
		return field.Invalid(p, value, detail)
	}
}

// ratchet places a node of the new object for validation ratcheting, as
// upstream's ratchetingOptions: cur is its correlation with the old object,
// nil where it has none; parent is then the nearest ancestor that has one.
// The zero ratchet (a create) ratchets nothing.
type ratchet struct {
	cur, parent *correlate.Pair
}

// unchanged reports whether failures at the node are let through: the node,
// or if it does not correlate its nearest correlated ancestor, is equal to
// its old value.
func (r ratchet) unchanged() bool {
	if r.cur != nil {
		return r.cur.Unchanged()
	}
	return r.parent.Unchanged()
}

// key is the ratchet of field k of an object (or key k of a map).
func (r ratchet) key(k string) ratchet {
	if r.cur == nil {
		return r
	}
	if r.parent == nil && (k == "apiVersion" || k == "kind") {
		// The root's apiVersion and kind are those of the request's version
		// in both objects; upstream never ratchets them or below.
		return ratchet{}
	}
	return ratchet{cur: r.cur.Key(k), parent: r.cur}
}

// index is the ratchet of item i of a list.
func (r ratchet) index(i int) ratchet {
	if r.cur == nil {
		return r
	}
	return ratchet{cur: r.cur.Index(i), parent: r.cur}
}
