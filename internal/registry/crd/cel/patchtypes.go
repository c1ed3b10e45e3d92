package cel

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/types/known/structpb"
)

// The types a MutatingAdmissionPolicy's mutations build their patches
// from, as kube-apiserver's mutation type resolver declares them
// (apiserver/pkg/cel/mutation):
//
//   - Object, and every name under it (Object.spec, Object.spec.template,
//     ...), is an object with any fields, each dyn: an apply
//     configuration is `Object{spec: Object.spec{replicas: 3}}`;
//   - JSONPatch is one JSON Patch operation: op, path and from strings,
//     and a value of any type.
//
// Nothing checks the fields against the resource's schema when the
// expression is compiled; the patch is checked when it is applied.

const (
	objectTypeName    = "Object"
	jsonPatchTypeName = "JSONPatch"
)

var (
	patchObjectType = types.NewObjectType(objectTypeName)
	jsonPatchType   = types.NewObjectType(jsonPatchTypeName)
)

// patchType is the type name names among the patch types, if it does.
func patchType(name string) (*types.Type, bool) {
	switch {
	case name == jsonPatchTypeName:
		return jsonPatchType, true
	case name == objectTypeName:
		return patchObjectType, true
	case strings.HasPrefix(name, objectTypeName+"."):
		return types.NewObjectType(name), true
	}
	return nil, false
}

// jsonPatchFields are JSONPatch's fields and their types.
var jsonPatchFields = map[string]*types.Type{
	"op": types.StringType, "from": types.StringType, "path": types.StringType, "value": types.DynType,
}

func patchFieldNames(name string) []string {
	if name == jsonPatchTypeName {
		return []string{"op", "from", "path", "value"}
	}
	return nil // an Object's fields are not known: any is allowed
}

func patchFieldType(name, field string) *types.FieldType {
	if name == jsonPatchTypeName {
		// A field JSONPatch does not have is declared without a type, as
		// upstream's; creating one fails when it is evaluated.
		return &types.FieldType{Type: jsonPatchFields[field]}
	}
	return &types.FieldType{
		Type: types.DynType,
		IsSet: func(target any) bool {
			m, ok := target.(map[string]any)
			if ok {
				_, ok = m[field]
			}
			return ok
		},
		GetFrom: func(target any) (any, error) {
			if m, ok := target.(map[string]any); ok {
				return m[field], nil
			}
			return nil, fmt.Errorf("cannot get field %q", field)
		},
	}
}

// newPatchValue creates a value of a patch type from its fields.
func newPatchValue(t *types.Type, fields map[string]ref.Val) ref.Val {
	if t != jsonPatchType {
		return &objectVal{typ: t, fields: fields}
	}
	op := &jsonPatchVal{}
	for name, v := range fields {
		var s *string
		switch name {
		case "op":
			s = &op.Op
		case "path":
			s = &op.Path
		case "from":
			s = &op.From
		case "value":
			op.Val = v
			continue
		default:
			return types.NewErr("unexpected JSONPatchType field: %s", name)
		}
		str, ok := v.Value().(string)
		if !ok {
			return types.NewErr("unexpected type %T for JSONPatchType '%s' field", v.Value(), name)
		}
		*s = str
	}
	return op
}

// objectVal is a value of Object or a type under it: its fields as set.
type objectVal struct {
	typ    *types.Type
	fields map[string]ref.Val
}

var (
	_ ref.Val       = (*objectVal)(nil)
	_ traits.Zeroer = (*objectVal)(nil)
)

// native is the object as JSON decodes one: maps, lists and scalars.
func (v *objectVal) native() (map[string]any, error) {
	out := make(map[string]any, len(v.fields))
	for k, f := range v.fields {
		n, err := nativeField(f)
		if err != nil {
			return nil, fmt.Errorf("fail to convert field %q: %w", k, err)
		}
		out[k] = n
	}
	return out, nil
}

// nativeField is a field's value as JSON decodes one.
func nativeField(v ref.Val) (any, error) {
	switch f := v.(type) {
	case *objectVal:
		return f.native()
	case traits.Lister:
		var out []any
		for it := f.Iterator(); it.HasNext() == types.True; {
			n, err := nativeField(it.Next())
			if err != nil {
				return nil, err
			}
			out = append(out, n)
		}
		return out, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := f.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			key, ok := k.Value().(string)
			if !ok {
				return nil, fmt.Errorf("map key %q is of type %T, not string", k, k)
			}
			n, err := nativeField(f.Get(k))
			if err != nil {
				return nil, err
			}
			out[key] = n
		}
		return out, nil
	}
	return v.Value(), nil
}

func (v *objectVal) ConvertToNative(t reflect.Type) (any, error) {
	m, err := v.native()
	if err != nil {
		return nil, err
	}
	switch t {
	case reflect.TypeFor[map[string]any]():
		return m, nil
	case reflect.TypeFor[*structpb.Struct]():
		return structpb.NewStruct(m)
	case reflect.TypeFor[*structpb.Value]():
		return structpb.NewValue(m)
	}
	return nil, fmt.Errorf("unable to convert to %v", t)
}

func (v *objectVal) ConvertToType(t ref.Type) ref.Val {
	if t.TypeName() == v.typ.TypeName() {
		return v
	}
	if t == types.TypeType {
		return types.NewTypeTypeWithParam(v.typ)
	}
	return types.NewErr("unsupported conversion into %v", t)
}

func (v *objectVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(*objectVal)
	return types.Bool(ok && o.typ.TypeName() == v.typ.TypeName() && reflect.DeepEqual(v.fields, o.fields))
}

func (v *objectVal) Type() ref.Type { return v.typ }

func (v *objectVal) Value() any {
	m, err := v.native()
	if err != nil {
		return types.WrapErr(err)
	}
	return m
}

func (v *objectVal) IsZeroValue() bool { return len(v.fields) == 0 }

// checkTypeNames reports the objects in v whose type is not named after
// their place: Object.spec{...} must be the value of spec, not of
// metadata. Upstream checks this when a patch is applied, as its type
// checking of Object initializers does not.
func (v *objectVal) checkTypeNames() error {
	var errs []string
	var walk func(ref.Val, string)
	walk = func(f ref.Val, path string) {
		if o, ok := f.(*objectVal); ok {
			if o.typ.TypeName() != path {
				errs = append(errs, fmt.Sprintf("unexpected type name %q, expected %q, which matches field name path from root Object type", o.typ.TypeName(), path))
			}
			keys := make([]string, 0, len(o.fields))
			for k := range o.fields {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				walk(o.fields[k], path+"."+k)
			}
			return
		}
		switch c := f.(type) {
		case traits.Lister:
			for it := c.Iterator(); it.HasNext() == types.True; {
				walk(it.Next(), path)
			}
		case traits.Mapper:
			for it := c.Iterator(); it.HasNext() == types.True; {
				walk(c.Get(it.Next()), path)
			}
		}
	}
	walk(v, v.typ.TypeName())
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "\n"))
}

// jsonPatchVal is one JSON Patch operation.
type jsonPatchVal struct {
	Op, From, Path string
	Val            ref.Val // nil: none
}

var _ ref.Val = (*jsonPatchVal)(nil)

func (p *jsonPatchVal) ConvertToNative(t reflect.Type) (any, error) {
	if t == reflect.TypeFor[*jsonPatchVal]() {
		return p, nil
	}
	return nil, fmt.Errorf("cannot convert to native type: %v", t)
}

func (p *jsonPatchVal) ConvertToType(t ref.Type) ref.Val {
	switch {
	case t.TypeName() == jsonPatchTypeName:
		return p
	case t == types.TypeType:
		return types.NewTypeTypeWithParam(jsonPatchType)
	}
	return types.NewErr("unsupported type: %s", t.TypeName())
}

func (p *jsonPatchVal) Equal(other ref.Val) ref.Val {
	o, ok := other.(*jsonPatchVal)
	if !ok || p.Op != o.Op || p.From != o.From || p.Path != o.Path || (p.Val == nil) != (o.Val == nil) {
		return types.False
	}
	if p.Val == nil {
		return types.True
	}
	return p.Val.Equal(o.Val)
}

func (p *jsonPatchVal) Get(index ref.Val) ref.Val {
	switch index.Value() {
	case "op":
		return types.String(p.Op)
	case "path":
		return types.String(p.Path)
	case "from":
		return types.String(p.From)
	case "value":
		if p.Val != nil {
			return p.Val
		}
	}
	return types.NewErr("unsupported indexer: %s", index)
}

func (p *jsonPatchVal) IsSet(field ref.Val) ref.Val {
	switch field.Value() {
	case "op":
		return types.Bool(p.Op != "")
	case "path":
		return types.Bool(p.Path != "")
	case "from":
		return types.Bool(p.From != "")
	case "value":
		return types.Bool(p.Val != nil)
	}
	return types.NewErr("unsupported field: %s", field)
}

func (p *jsonPatchVal) Type() ref.Type { return jsonPatchType }
func (p *jsonPatchVal) Value() any     { return p }

// operation is p as a JSON Patch operation document's member. A value
// is converted as CEL converts a value to JSON (protobuf's Value).
func (p *jsonPatchVal) operation() (map[string]json.RawMessage, error) {
	op := map[string]json.RawMessage{}
	str := func(s string) json.RawMessage { b, _ := json.Marshal(s); return b }
	op["op"] = str(p.Op)
	op["path"] = str(p.Path)
	if p.From != "" {
		op["from"] = str(p.From)
	}
	if p.Val != nil {
		if o, ok := p.Val.(*objectVal); ok {
			if err := o.checkTypeNames(); err != nil {
				return nil, fmt.Errorf("type mismatch: %w", err)
			}
		}
		v, err := p.Val.ConvertToNative(reflect.TypeFor[*structpb.Value]())
		if err != nil {
			return nil, fmt.Errorf("JSONPath valueExpression evaluated to a type that could not marshal to JSON: %w", err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("JSONPath valueExpression evaluated to a type that could not marshal to JSON: %w", err)
		}
		op["value"] = b
	}
	return op, nil
}

// jsonPatchLibrary is jsonpatch.escapeKey, which escapes a key for a
// JSON Pointer ("/" to "~1", "~" to "~0").
func jsonPatchLibrary() cel.EnvOption {
	return cel.Function("jsonpatch.escapeKey",
		cel.Overload("string_jsonpatch_escapeKey_string", []*cel.Type{cel.StringType}, cel.StringType,
			cel.UnaryBinding(func(v ref.Val) ref.Val {
				s, ok := v.(types.String)
				if !ok {
					return types.MaybeNoSuchOverloadErr(v)
				}
				return types.String(pointerEscaper.Replace(string(s)))
			})))
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
