package crd

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
	"github.com/kplane-dev/kplane/internal/registry/crd/schema"
)

// Group is the API group of CustomResourceDefinition.
const Group = "apiextensions.k8s.io"

// cleanupFinalizer keeps a deleted CRD until its objects are gone.
const cleanupFinalizer = "customresourcecleanup.apiextensions.k8s.io"

// Kind is the CustomResourceDefinition kind.
func Kind() *registry.Kind {
	return &registry.Kind{
		Group: Group, Versions: []string{"v1"}, Kind: "CustomResourceDefinition", ListKind: "CustomResourceDefinitionList",
		Resource: "customresourcedefinitions", Singular: "customresourcedefinition", UpstreamStorageVersion: "v1beta1",
		ShortNames: []string{"crd", "crds"}, Categories: []string{"api-extensions"},
		Status: true, Generation: true,
		Typed:            func() runtime.Object { return &apiextensionsv1.CustomResourceDefinition{} },
		Default:          setDefaults,
		PrepareForCreate: prepareForCreate,
		PrepareForUpdate: prepareForUpdate,
		Validate:         validate,
		ValidateUpdate:   validateUpdate,
		PrepareForDelete: func(obj *unstructured.Unstructured) {
			fins := obj.GetFinalizers()
			if !sets.New(fins...).Has(cleanupFinalizer) {
				obj.SetFinalizers(append(fins, cleanupFinalizer))
			}
		},
		MarkDeleting: markDeleting,
		Columns:      crdColumns,
	}
}

// markDeleting records a CRD's first deletion as upstream's CRD storage
// does: a Terminating condition, until the controller starts deleting its
// objects.
func markDeleting(obj *unstructured.Unstructured) {
	crd, err := decode(obj)
	if err != nil {
		return
	}
	setCondition(&crd.Status, apiextensionsv1.Terminating, apiextensionsv1.ConditionTrue, "InstanceDeletionPending",
		"CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon")
	if st, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&crd.Status); err == nil {
		obj.Object["status"] = st
	}
}

// decode reads a stored CRD.
func decode(obj *unstructured.Unstructured) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := json.Unmarshal(data, crd); err != nil {
		return nil, err
	}
	return crd, nil
}

// resourceKind is the registry Kind serving crd's resource.
func resourceKind(crd *apiextensionsv1.CustomResourceDefinition) *registry.Kind {
	// The kind's schemas and type converter are built from crd when first
	// used, so they keep it: a copy of their own.
	crd = crd.DeepCopy()
	s := crd.Spec
	k := &registry.Kind{
		Group: s.Group, Kind: s.Names.Kind, ListKind: s.Names.ListKind, Resource: s.Names.Plural,
		Singular: s.Names.Singular, ShortNames: s.Names.ShortNames, Categories: s.Names.Categories,
		Namespaced: s.Scope == apiextensionsv1.NamespaceScoped, Generation: true,
		// ValidateName nil: a DNS subdomain, as custom resource names are.
	}
	if k.ListKind == "" {
		k.ListKind = k.Kind + "List"
	}
	if k.Singular == "" {
		k.Singular = strings.ToLower(k.Kind)
	}
	var storageVersion *apiextensionsv1.CustomResourceDefinitionVersion
	for i := range s.Versions {
		v := &s.Versions[i]
		if v.Storage {
			storageVersion = v
		}
	}
	if storageVersion != nil && storageVersion.Served {
		k.Versions = append(k.Versions, storageVersion.Name)
	} else if storageVersion != nil {
		// Stored but not served: the registry needs the storage version
		// first; Served filters the rest.
		k.Versions = append(k.Versions, storageVersion.Name)
	}
	for _, v := range s.Versions {
		if v.Served && (storageVersion == nil || v.Name != storageVersion.Name) {
			k.Versions = append(k.Versions, v.Name)
		}
	}
	openAPI := map[string]func() *spec.Schema{}
	for _, v := range s.Versions {
		if v.Served && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			if k.Schemas == nil {
				k.Schemas = make(map[string]registry.Schema)
			}
			p := v.Schema.OpenAPIV3Schema
			// Converted when the documents are first built, as the
			// schema is compiled on first use (newVersionSchema).
			openAPI[v.Name] = sync.OnceValue(func() *spec.Schema { return openAPISchema(p) })
			k.Schemas[v.Name] = newVersionSchema(p, v.Subresources)
		}
	}
	if len(openAPI) > 0 {
		k.OpenAPI = func(v string) *spec.Schema {
			if f := openAPI[v]; f != nil {
				return f()
			}
			return nil
		}
	}
	if c := s.Conversion; c != nil && c.Strategy == apiextensionsv1.WebhookConverter && c.Webhook != nil {
		k.ConversionWebhook = c.Webhook
	}
	k.VersionWarnings = deprecationWarnings(&s)
	k.Warnings = finalizerWarnings
	k.TypeConverter = typeConverter(crd, k.Schemas)
	k.Fields, k.VersionFields = selectableFields(crd)
	if storageVersion != nil {
		// Each version has its own subresources: the storage version's
		// are the kind's, the others' where they differ (a version's
		// /scale paths too: its objects have its shape, as a conversion
		// webhook's versions differ in more than apiVersion).
		k.Status, k.Scale = versionStatus(storageVersion), versionScale(storageVersion)
		for i := range s.Versions {
			v := &s.Versions[i]
			if v == storageVersion || !v.Served {
				continue
			}
			if st := versionStatus(v); st != k.Status {
				if k.VersionStatus == nil {
					k.VersionStatus = map[string]bool{}
				}
				k.VersionStatus[v.Name] = st
			}
			if sp := versionScale(v); !sameScale(sp, k.Scale) {
				if k.VersionScale == nil {
					k.VersionScale = map[string]*registry.ScalePaths{}
				}
				k.VersionScale[v.Name] = sp
			}
		}
		if k.Scale != nil || len(k.VersionScale) > 0 {
			k.ScaleColumns = scaleColumns
		}
		k.Columns = versionColumns(storageVersion)
		for i := range s.Versions {
			v := &s.Versions[i]
			if v.Served && v != storageVersion && !equality.Semantic.DeepEqual(v.AdditionalPrinterColumns, storageVersion.AdditionalPrinterColumns) {
				if k.VersionColumns == nil {
					k.VersionColumns = map[string][]registry.Column{}
				}
				k.VersionColumns[v.Name] = versionColumns(v)
			}
		}
	}
	return k
}

// versionStatus reports whether version v has a /status subresource.
func versionStatus(v *apiextensionsv1.CustomResourceDefinitionVersion) bool {
	return v.Subresources != nil && v.Subresources.Status != nil
}

// versionScale is version v's /scale paths, nil without one.
func versionScale(v *apiextensionsv1.CustomResourceDefinitionVersion) *registry.ScalePaths {
	if v.Subresources == nil || v.Subresources.Scale == nil {
		return nil
	}
	return scalePaths(v.Subresources.Scale)
}

// sameScale reports whether a and b are the same /scale, or both none.
func sameScale(a, b *registry.ScalePaths) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// scalePaths are the paths of a version's /scale.
func scalePaths(s *apiextensionsv1.CustomResourceSubresourceScale) *registry.ScalePaths {
	sp := &registry.ScalePaths{SpecReplicas: s.SpecReplicasPath, StatusReplicas: s.StatusReplicasPath}
	if s.LabelSelectorPath != nil {
		sp.LabelSelector = *s.LabelSelectorPath
	}
	return sp
}

// versionSchema enforces one version's schema: pruning, defaults, the
// OpenAPI validations and the CEL rules. It is compiled on first use,
// not when the CRD is served: the compiled forms cost ~400 KB for a CRD
// of forty fields and a rule (the CEL environment and program most of
// it), and of the hundreds of CRDs a large install brings most never
// have an object. Until then the version holds only its schema, shared
// with the CRD the kind was made from.
type versionSchema struct {
	compiled func() compiledSchema // sync.OnceValue
	defaults bool                  // the schema has a default somewhere
	scale    *apiextensionsv1.CustomResourceSubresourceScale
	id       uint64 // this compilation's number, for FactKey
}

// compiledSchema is a version's schema compiled. A nil Schema: it did not
// compile (the CRD's validation compiles it too and refuses such a
// schema, so only a CRD stored under other rules can get here), and the
// version is served as one without a schema.
type compiledSchema struct {
	*schema.Schema
	rules *cel.Validator
}

// schemaIDs numbers compiled schemas.
var schemaIDs atomic.Uint64

// FactKey identifies the schema in what the registry keeps with stored
// records, without keeping the schema alive.
func (v *versionSchema) FactKey() any { return v.id }

// HasDefaults reports whether reads need defaulting at all.
func (v *versionSchema) HasDefaults() bool { return v.defaults }

// hasDefault reports a default anywhere in p.
func hasDefault(p *apiextensionsv1.JSONSchemaProps) bool {
	if p == nil {
		return false
	}
	if p.Default != nil {
		return true
	}
	for _, c := range p.Properties {
		if hasDefault(&c) {
			return true
		}
	}
	if p.Items != nil && (hasDefault(p.Items.Schema) || slices.ContainsFunc(p.Items.JSONSchemas, func(c apiextensionsv1.JSONSchemaProps) bool { return hasDefault(&c) })) {
		return true
	}
	return p.AdditionalProperties != nil && hasDefault(p.AdditionalProperties.Schema)
}

// newVersionSchema is the schema p of a version with subresources sub,
// compiled on first use. p must not change afterwards.
func newVersionSchema(p *apiextensionsv1.JSONSchemaProps, sub *apiextensionsv1.CustomResourceSubresources) *versionSchema {
	vs := &versionSchema{defaults: hasDefault(p), id: schemaIDs.Add(1)}
	vs.compiled = sync.OnceValue(func() compiledSchema {
		s, err := schema.New(p)
		if err != nil {
			return compiledSchema{}
		}
		rules, errs := cel.Compile(p, field.NewPath("openAPIV3Schema"))
		if len(errs) > 0 {
			return compiledSchema{}
		}
		return compiledSchema{Schema: s, rules: rules}
	})
	if sub != nil {
		vs.scale = sub.Scale
	}
	return vs
}

// Prune removes the fields the schema does not know (schema.Schema.Prune).
func (v *versionSchema) Prune(obj map[string]any) []string {
	if c := v.compiled(); c.Schema != nil {
		return c.Prune(obj)
	}
	return nil
}

// Default sets the schema's defaults (schema.Schema.Default).
func (v *versionSchema) Default(obj map[string]any) {
	if c := v.compiled(); c.Schema != nil {
		c.Default(obj)
	}
}

// NeedsDefaults reports whether Default would change obj.
func (v *versionSchema) NeedsDefaults(obj map[string]any) bool {
	if !v.defaults {
		return false
	}
	c := v.compiled()
	return c.Schema != nil && c.NeedsDefaults(obj)
}

// CheckEmbedded checks obj's embedded resources (schema.Schema.CheckEmbedded).
func (v *versionSchema) CheckEmbedded(obj map[string]any) error {
	if c := v.compiled(); c.Schema != nil {
		return c.CheckEmbedded(obj)
	}
	return nil
}

// Validate checks the schema and the scale paths, then the CEL rules, as
// upstream's custom resource strategy does. The rules run only if the
// other checks found no error of a blocking type (upstream's
// hasBlockingErr: a value of the wrong type, missing, unsupported, too
// long or too many); otherwise one error says they were skipped, since
// rules on such values would fail in confusing ways.
func (v *versionSchema) Validate(ctx context.Context, obj, old map[string]any) field.ErrorList {
	return v.validate(ctx, obj, old, false)
}

// ValidateStatus is Validate for an update through /status, as
// upstream's status strategy: the schema's status checks
// (schema.Schema.ValidateStatus) and the status replicas path only, then
// the CEL rules on the whole object.
func (v *versionSchema) ValidateStatus(ctx context.Context, obj, old map[string]any) field.ErrorList {
	return v.validate(ctx, obj, old, true)
}

func (v *versionSchema) validate(ctx context.Context, obj, old map[string]any, statusOnly bool) field.ErrorList {
	c := v.compiled()
	if c.Schema == nil {
		return nil
	}
	var errs field.ErrorList
	if statusOnly {
		errs = c.Schema.ValidateStatus(ctx, obj, old)
	} else {
		errs = c.Schema.Validate(ctx, obj, old)
		if v.scale != nil {
			errs = append(errs, validateReplicas(obj, v.scale.SpecReplicasPath)...)
		}
	}
	if v.scale != nil {
		errs = append(errs, validateReplicas(obj, v.scale.StatusReplicasPath)...)
	}
	if c.rules == nil {
		return errs
	}
	if blocking(errs) {
		return append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
	}
	return append(errs, c.rules.Validate(ctx, obj, old)...)
}

// blocking reports an error that keeps the CEL rules from running.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// validateReplicas checks the replicas at a scale path as upstream's
// custom resource validation does, with the path as the CRD names it.
func validateReplicas(obj map[string]any, path string) field.ErrorList {
	if path == "" {
		return nil
	}
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, strings.Split(strings.TrimPrefix(path, "."), ".")...)
	if !ok {
		return nil
	}
	fp := field.NewPath(path)
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case float64:
		if x != float64(int64(x)) {
			return field.ErrorList{field.Invalid(fp, x, "should be an integer")}
		}
		n = int64(x)
	default:
		return field.ErrorList{field.Invalid(fp, v, "should be an integer")}
	}
	switch {
	case n < 0:
		return field.ErrorList{field.Invalid(fp, n, "should be a non-negative integer")}
	case n > math.MaxInt32:
		return field.ErrorList{field.Invalid(fp, n, fmt.Sprintf("should be less than or equal to %d", math.MaxInt32))}
	}
	return nil
}

// openAPISchema is a CRD schema as a kube-openapi schema. Both serialize
// to the same OpenAPI v3 JSON, x-kubernetes extensions included, so the
// conversion is a JSON round trip; a schema that fails it (it came through
// validation, so it should not) publishes as a free-form object.
func openAPISchema(p *apiextensionsv1.JSONSchemaProps) *spec.Schema {
	out := &spec.Schema{}
	data, err := json.Marshal(p)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return &spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}}}
	}
	return out
}

// printerColumn turns an additionalPrinterColumn into a Table column.

// deprecationWarnings are the warnings of the CRD's deprecated served
// versions, by version, as upstream words them: the version's
// deprecationWarning, or "<group>/<version> <Kind> is deprecated" and,
// if a served version that is not deprecated ranks above it, "; use"
// the highest of them (Kubernetes version order: v2 > v1 > v1beta2 >
// v1alpha1).
func deprecationWarnings(s *apiextensionsv1.CustomResourceDefinitionSpec) map[string]string {
	var warnings map[string]string
	for _, v := range s.Versions {
		if !v.Served || !v.Deprecated {
			continue
		}
		if warnings == nil {
			warnings = map[string]string{}
		}
		if v.DeprecationWarning != nil {
			warnings[v.Name] = *v.DeprecationWarning
			continue
		}
		msg := fmt.Sprintf("%s/%s %s is deprecated", s.Group, v.Name, s.Names.Kind)
		use := ""
		for _, o := range s.Versions {
			if o.Served && !o.Deprecated && version.CompareKubeAwareVersionStrings(v.Name, o.Name) < 0 &&
				(use == "" || version.CompareKubeAwareVersionStrings(o.Name, use) > 0) {
				use = o.Name
			}
		}
		if use != "" {
			msg += fmt.Sprintf("; use %s/%s %s", s.Group, use, s.Names.Kind)
		}
		warnings[v.Name] = msg
	}
	return warnings
}

// standardFinalizers are the finalizers Kubernetes itself names, which
// need no domain.
var standardFinalizers = sets.New(metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents, "kubernetes")

// finalizerWarnings are upstream's warnings for the finalizers a write of
// a custom resource adds (not those the object had), in name order: a
// name that is not a qualified name, or one without a domain and a path
// that is not a standard finalizer.
func finalizerWarnings(obj, old *unstructured.Unstructured) []string {
	fins := obj.GetFinalizers()
	if len(fins) == 0 {
		return nil
	}
	added := sets.New(fins...)
	if old != nil {
		added = added.Difference(sets.New(old.GetFinalizers()...))
	}
	var warnings []string
	for _, f := range sets.List(added) {
		for _, msg := range validation.IsQualifiedName(f) {
			warnings = append(warnings, fmt.Sprintf("metadata.finalizers: %q: %s", f, msg))
		}
		switch {
		case strings.Contains(f, "/") || standardFinalizers.Has(f):
		case strings.Contains(f, "."):
			warnings = append(warnings, fmt.Sprintf("metadata.finalizers: %q: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers", f))
		default:
			warnings = append(warnings, fmt.Sprintf("metadata.finalizers: %q: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers", f))
		}
	}
	return warnings
}
