package cel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/traits"
)

// The mutations of a MutatingAdmissionPolicy, evaluated as
// kube-apiserver's plugin evaluates them (policy/mutating/patch): each
// mutation on its own, with variables evaluated afresh over the object
// as the mutations before it left it, and within a budget of its own.
// What a mutation gives is a patch; the caller applies it, as only the
// caller knows the resource's schema.

// PatchType is how a mutation patches: upstream's patchType values.
type PatchType string

const (
	ApplyConfiguration PatchType = "ApplyConfiguration"
	JSONPatch          PatchType = "JSONPatch"
)

// Mutation is one of a policy's mutations: its patch type and its
// expression.
type Mutation struct {
	PatchType  PatchType
	Expression string
}

type compiledMutation struct {
	compiled
	patchType PatchType
}

// Patch is what a mutation gave.
type Patch struct {
	// Apply is an apply configuration's object, to merge into the object
	// by the resource's schema (ApplyConfiguration).
	Apply map[string]any
	// JSONPatch is a JSON Patch document (JSONPatch).
	JSONPatch []byte
}

// Mutations is how many mutations the policy has.
func (p *Policy) Mutations() int { return len(p.mutations) }

// Mutate evaluates mutation i over in. The errors are upstream's: a
// mutation that does not compile, one whose evaluation fails or runs out
// of budget, and an apply configuration whose Object types do not follow
// their fields (Object.spec{} set as metadata).
func (p *Policy) Mutate(ctx context.Context, i int, in *PolicyInput) (Patch, error) {
	m := &p.mutations[i]
	if m.err != nil {
		return Patch{}, m.err
	}
	a := p.activation(ctx, in)
	budget := int64(policyCostBudget)
	out, err := eval(ctx, &m.compiled, a, &budget)
	if err != nil {
		return Patch{}, err
	}
	if m.patchType == ApplyConfiguration {
		obj, ok := out.(*objectVal)
		if !ok {
			return Patch{}, fmt.Errorf("unsupported return type from ApplyConfiguration expression: %v", out.Type())
		}
		if err := obj.checkTypeNames(); err != nil {
			return Patch{}, fmt.Errorf("type mismatch: %w", err)
		}
		apply, err := obj.native()
		if err != nil {
			return Patch{}, fmt.Errorf("invalid return type: %w", err)
		}
		return Patch{Apply: apply}, nil
	}
	list, ok := out.(traits.Lister)
	if !ok {
		return Patch{}, errors.New("type mismatch: JSONPatchType.expression should evaluate to array")
	}
	ops := []map[string]json.RawMessage{}
	for it := list.Iterator(); it.HasNext() == types.True; {
		v := it.Next()
		op, ok := v.(*jsonPatchVal)
		if !ok {
			return Patch{}, fmt.Errorf("type mismatch: JSONPatchType.expression should evaluate to array of JSONPatch, got element of %v", v.Type())
		}
		doc, err := op.operation()
		if err != nil {
			return Patch{}, err
		}
		ops = append(ops, doc)
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return Patch{}, err
	}
	return Patch{JSONPatch: data}, nil
}
