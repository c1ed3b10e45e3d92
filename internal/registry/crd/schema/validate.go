package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/operation"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeschema "k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	openapierrors "k8s.io/kube-openapi/pkg/validation/errors"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"

	"github.com/kplane-dev/kplane/internal/registry/crd/correlate"
)

// Schema is one CRD version's schema, compiled for its objects. It is
// immutable and safe for concurrent use.
type Schema struct {
	root    *node
	props   *apiextensionsv1.JSONSchemaProps // as the CRD gives it: ratcheting pairs values along it
	openapi *spec.Schema
	accept  *acceptor // answers "valid" for most objects without kube-openapi
	status  *Schema   // the root's status property, for ValidateStatus; nil if it has none
}

// New compiles s. It fails only on a schema ValidateCRD refuses (items
// given as a list of schemas, an unparsable default or enum, a bad
// $ref); a schema that passed ValidateCRD always compiles.
func New(s *apiextensionsv1.JSONSchemaProps) (*Schema, error) {
	if s == nil {
		s = &apiextensionsv1.JSONSchemaProps{}
	}
	out, err := compileSchema(s)
	if err != nil {
		return nil, err
	}
	if p, ok := s.Properties["status"]; ok {
		if out.status, err = compileSchema(&p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func compileSchema(s *apiextensionsv1.JSONSchemaProps) (*Schema, error) {
	root, err := compile(s)
	if err != nil {
		return nil, err
	}
	o, err := toOpenAPI(s)
	if err != nil {
		return nil, err
	}
	return &Schema{root: root, props: s, openapi: o, accept: newAcceptor(o)}, nil
}

// Validate checks obj against the schema as kube-apiserver's custom
// resource strategy does (registry/customresource/strategy.go Validate and
// ValidateUpdate, without CEL and without the checks the registry makes:
// typeMeta, the root's metadata and scale):
//
//  1. the OpenAPI keywords, by kube-openapi's validator, with upstream's
//     translation to field errors (apiserver/validation/validation.go);
//  2. embedded resources: apiVersion and kind required, metadata valid
//     (schema/objectmeta/validation.go);
//  3. x-kubernetes-list-type set and map uniqueness
//     (schema/listtype/validation.go).
//
// On an update (old non-nil) it ratchets as upstream does with the
// CRDValidationRatcheting feature (on by default since 1.30): an OpenAPI
// error in a value that is unchanged from old (correlated by field name,
// and by key in a list-type=map) is dropped; and the list-type checks
// run only if old passes them.
func (s *Schema) Validate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	var errs field.ErrorList
	// A value the acceptor passes has no OpenAPI error (and ratcheting
	// only ever removes errors); any other value goes to kube-openapi,
	// which reports the errors or finds it valid after all.
	if !s.accept.accept(obj) {
		var res *validate.Result
		if old == nil {
			res = validate.NewSchemaValidator(s.openapi, nil, "", strfmt.Default).Validate(obj)
		} else {
			res = newRatchet(s.openapi, "", correlate.New(obj, old, s.props)).Validate(obj)
		}
		errs = append(errs, resultToFieldErrors(nil, res)...)
	}
	errs = append(errs, validateEmbedded(ctx, nil, obj, s.root)...)
	if old == nil || len(validateLists(nil, s.root, old)) == 0 {
		errs = append(errs, validateLists(nil, s.root, obj)...)
	}
	return errs
}

// ValidateStatus checks an update through /status as upstream's status
// strategy does (registry/customresource/status_strategy.go): the
// OpenAPI keywords on the status alone, by the status property's schema,
// so that a message names the path from the status ("ready in body must
// be of type boolean") while the error's field is from the root
// ("status.ready"), ratcheting against old's status; then the list
// types of the whole object, if old passes them. A schema without a
// status property checks no status; embedded resources are not checked.
func (s *Schema) ValidateStatus(ctx context.Context, obj, old map[string]any) field.ErrorList {
	var errs field.ErrorList
	if st, ok := obj["status"]; ok && s.status != nil && !s.status.accept.accept(st) {
		res := newRatchet(s.status.openapi, "", correlate.New(st, old["status"], s.status.props)).Validate(st)
		errs = resultToFieldErrors(field.NewPath("status"), res)
	}
	if len(validateLists(nil, s.root, old)) == 0 {
		errs = append(errs, validateLists(nil, s.root, obj)...)
	}
	return errs
}

// resultToFieldErrors translates kube-openapi's errors to field errors as
// upstream's kubeOpenAPIResultToFieldErrors does: required, enum,
// too-long, max items and max properties, and type errors get their own
// field error types; everything else is Invalid with the library's
// message ("spec.replicas in body should be less than or equal to 10").
func resultToFieldErrors(fldPath *field.Path, res *validate.Result) field.ErrorList {
	if res == nil || res.IsValid() {
		return nil
	}
	var errs field.ErrorList
	for _, err := range res.Errors {
		v, ok := err.(*openapierrors.Validation)
		if !ok {
			errs = append(errs, field.Invalid(fldPath, "", err.Error()))
			continue
		}
		p := fldPath
		if v.Name != "" && v.Name != "." {
			p = p.Child(strings.TrimPrefix(v.Name, "."))
		}
		value := v.Value
		if value == nil {
			value = ""
		}
		switch v.Code() {
		case openapierrors.RequiredFailCode:
			errs = append(errs, field.Required(p, ""))
		case openapierrors.EnumFailCode:
			values := []string{}
			for _, a := range v.Values {
				if s, ok := a.(string); ok {
					values = append(values, s)
				} else {
					b, _ := json.Marshal(a)
					values = append(values, string(b))
				}
			}
			errs = append(errs, field.NotSupported(p, v.Value, values))
		case openapierrors.TooLongFailCode:
			errs = append(errs, field.TooLong(p, "", int(asInt64(v.Valid))))
		case openapierrors.MaxItemsFailCode, openapierrors.TooManyPropertiesCode:
			errs = append(errs, field.TooMany(p, int(asInt64(v.Value)), int(asInt64(v.Valid))))
		case openapierrors.InvalidTypeCode:
			errs = append(errs, field.TypeInvalid(p, value, v.Error()))
		default:
			errs = append(errs, field.Invalid(p, value, v.Error()))
		}
	}
	return errs
}

func asInt64(x any) int64 {
	if i, ok := x.(int64); ok {
		return i
	}
	return -1
}

// validateEmbedded checks every embedded resource below the root, as
// upstream's objectmeta.Validate with isResourceRoot false: apiVersion
// and kind are required strings of the right shape, and metadata is
// valid ObjectMeta (a missing name is allowed; path-segment names).
func validateEmbedded(ctx context.Context, pth *field.Path, x any, s *node) field.ErrorList {
	if s == nil || !s.hasEmbedded {
		return nil
	}
	var errs field.ErrorList
	switch x := x.(type) {
	case map[string]any:
		if s.embedded {
			errs = append(errs, validateEmbeddedResource(ctx, pth, x)...)
		}
		s.eachField(x, func(k string, v any, c *node, isProp bool) {
			if !c.hasEmbedded {
				return
			}
			if isProp {
				errs = append(errs, validateEmbedded(ctx, pth.Child(k), v, c)...)
			} else {
				errs = append(errs, validateEmbedded(ctx, pth.Key(k), v, c)...)
			}
		})
	case []any:
		for i, v := range x {
			errs = append(errs, validateEmbedded(ctx, pth.Index(i), v, s.items)...)
		}
	}
	return errs
}

func validateEmbeddedResource(ctx context.Context, pth *field.Path, x map[string]any) field.ErrorList {
	var errs field.ErrorList
	if _, found := x["apiVersion"]; !found {
		errs = append(errs, field.Required(pth.Child("apiVersion"), ""))
	}
	if _, found := x["kind"]; !found {
		errs = append(errs, field.Required(pth.Child("kind"), ""))
	}
	if v, found := x["apiVersion"]; found {
		if av, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), v, "must be a string"))
		} else if av == "" {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), av, "must not be empty"))
		} else if _, err := runtimeschema.ParseGroupVersion(av); err != nil {
			errs = append(errs, field.Invalid(pth.Child("apiVersion"), av, err.Error()))
		}
	}
	if v, found := x["kind"]; found {
		if k, ok := v.(string); !ok {
			errs = append(errs, field.Invalid(pth.Child("kind"), v, "must be a string"))
		} else if k == "" {
			errs = append(errs, field.Invalid(pth.Child("kind"), k, "must not be empty"))
		} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(k)); len(msgs) > 0 {
			errs = append(errs, field.Invalid(pth.Child("kind"), k, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
		}
	}
	if v, found := x["metadata"]; found {
		meta := &metav1.ObjectMeta{}
		raw, err := utiljson.Marshal(v)
		if err == nil {
			err = utiljson.Unmarshal(raw, meta)
		}
		if err != nil {
			errs = append(errs, field.Invalid(pth.Child("metadata"), v, err.Error()))
		} else {
			if meta.Name == "" {
				meta.Name = "fakename" // upstream: a name is not required here
			}
			errs = append(errs, apivalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, meta, nil, meta.Namespace != "", pathSegmentName, pth.Child("metadata"), true)...)
		}
	}
	return errs
}

func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}

// validateLists checks x-kubernetes-list-type set and map lists for
// duplicates, as upstream's listtype.ValidateListSetsAndMaps: each repeat
// after the first is a "Duplicate value" at its index, with the value (a
// set) or the key fields (a map) as the value.
func validateLists(pth *field.Path, s *node, obj map[string]any) field.ErrorList {
	if s == nil || obj == nil || !s.hasSetOrMap {
		return nil
	}
	var errs field.ErrorList
	s.eachField(obj, func(k string, v any, c *node, isProp bool) {
		if !c.hasSetOrMap {
			return
		}
		if isProp {
			errs = append(errs, validateListsIn(pth.Child(k), c, v)...)
		} else {
			errs = append(errs, validateListsIn(pth.Key(k), c, v)...)
		}
	})
	return errs
}

func validateListsIn(pth *field.Path, s *node, x any) field.ErrorList {
	if s == nil || !s.hasSetOrMap {
		return nil
	}
	switch x := x.(type) {
	case map[string]any:
		return validateLists(pth, s, x)
	case []any:
		var errs field.ErrorList
		switch s.listType {
		case "set":
			for _, i := range duplicates(x) {
				errs = append(errs, field.Duplicate(pth.Index(i), x[i]))
			}
		case "map":
			errs = append(errs, validateListMap(pth, s, x)...)
		}
		if s.items != nil {
			for i, v := range x {
				errs = append(errs, validateListsIn(pth.Index(i), s.items, v)...)
			}
		}
		return errs
	}
	return nil
}

// duplicates returns the index of the second occurrence of each value
// that occurs more than once. Objects and lists compare by their JSON.
func duplicates(list []any) []int {
	if len(list) <= 1 {
		return nil
	}
	seen := make(map[string]int, len(list))
	var dup []int
	for i, x := range list {
		var key string
		switch x := x.(type) {
		case map[string]any, []any:
			b, _ := json.Marshal(x)
			key = "c" + string(b)
		case string:
			key = "sstring:" + x // what the Sprintf below makes of it
		default:
			key = fmt.Sprintf("s%T:%v", x, x)
		}
		seen[key]++
		if seen[key] == 2 {
			dup = append(dup, i)
		}
	}
	return dup
}

func validateListMap(pth *field.Path, s *node, list []any) field.ErrorList {
	for i, x := range list {
		if _, ok := x.(map[string]any); x != nil && !ok {
			return field.ErrorList{field.Invalid(pth.Index(i), x, "must be an object for an array of list-type map")}
		}
	}
	if len(list) <= 1 {
		return nil
	}
	if !scalarKeysRepeat(list, s.listKeys) {
		return nil
	}
	keys := make([]any, len(list))
	for i, x := range list {
		key := map[string]any{}
		if m, ok := x.(map[string]any); ok {
			for _, k := range s.listKeys {
				if v, ok := m[k]; ok {
					key[k] = v
				}
			}
		}
		keys[i] = key
	}
	var errs field.ErrorList
	for _, i := range duplicates(keys) {
		errs = append(errs, field.Duplicate(pth.Index(i), keys[i]))
	}
	return errs
}

// scalarKeysRepeat is false when the items of a list-type=map list,
// all objects, surely have distinct keys: every key field is absent, a
// string or an int64 (so JSON equality, which duplicates uses, is equality
// of type and value) and no two items have the same ones. Otherwise it
// is true, and the caller looks closer.
func scalarKeysRepeat(list []any, keys []string) bool {
	seen := make(map[string]struct{}, len(list))
	var b []byte
	for _, x := range list {
		m, _ := x.(map[string]any)
		b = b[:0]
		for _, k := range keys {
			switch v := m[k].(type) {
			case nil:
				if _, ok := m[k]; ok {
					return true // null: JSON equality's business
				}
				b = append(b, 'a') // absent
			case string:
				b = append(b, 's')
				b = strconv.AppendInt(b, int64(len(v)), 10)
				b = append(b, ':')
				b = append(b, v...)
			case int64:
				b = append(b, 'i')
				b = strconv.AppendInt(b, v, 10)
				b = append(b, ';')
			default:
				return true
			}
		}
		if _, ok := seen[string(b)]; ok {
			return true
		}
		seen[string(b)] = struct{}{}
	}
	return false
}

// ratchet validates a value that has a correlated old value, as
// upstream's ratchetingValueValidator (apiserver/validation/
// ratcheting.go): it validates the value, its children through ratchets
// of their own where they correlate, and turns its errors into warnings
// when the value is unchanged.
type ratchet struct {
	schema *spec.Schema
	path   string
	corr   *correlate.Pair
}

func newRatchet(s *spec.Schema, path string, c *correlate.Pair) *ratchet {
	return &ratchet{schema: s, path: path, corr: c}
}

func (r *ratchet) option() validate.Option {
	return func(o *validate.SchemaValidatorOptions) {
		o.NewValidatorForField = r.forField
		o.NewValidatorForIndex = r.forIndex
	}
}

// Validate validates the correlated new value (which is x).
func (r *ratchet) Validate(x any) *validate.Result {
	res := validate.NewSchemaValidator(r.schema, nil, r.path, strfmt.Default, r.option()).Validate(r.corr.Value())
	if res.IsValid() {
		return res
	}
	if r.corr.Unchanged() {
		out := &validate.Result{}
		out.MergeAsWarnings(res)
		return out
	}
	return res
}

// forField and forIndex give a child the ratchet of its pair, if it has
// one. kube-openapi calls them from the schema's own tree only (it
// validates allOf, anyOf and oneOf branches without these hooks), so s is
// the CRD schema's own child, the one the pair followed.
func (r *ratchet) forField(fieldName string, s *spec.Schema, root any, path string, formats strfmt.Registry, opts ...validate.Option) validate.ValueValidator {
	c := r.corr.Key(fieldName)
	if c == nil || (r.path == "" && (fieldName == "kind" || fieldName == "apiVersion")) {
		return validate.NewSchemaValidator(s, root, path, formats, opts...)
	}
	return newRatchet(s, path, c)
}

func (r *ratchet) forIndex(i int, s *spec.Schema, root any, path string, formats strfmt.Registry, opts ...validate.Option) validate.ValueValidator {
	c := r.corr.Index(i)
	if c == nil {
		return validate.NewSchemaValidator(s, root, path, formats, opts...)
	}
	return newRatchet(s, path, c)
}

func (r *ratchet) SetPath(path string)                        { r.path = path }
func (r *ratchet) Applies(source any, kind reflect.Kind) bool { return true }
