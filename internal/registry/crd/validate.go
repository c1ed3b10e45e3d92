package crd

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
	"github.com/kplane-dev/kplane/internal/registry/crd/schema"
)

// A CRD is defaulted and checked as kube-apiserver's apiextensions
// defaulting, strategy and validation do it (checked against v1.37.2 with
// the same requests), with one difference on purpose: errors name the
// fields of the v1 object the client sent. Upstream validates its internal
// form, into which a schema, subresources or printer columns shared by
// every version are hoisted, so for a CRD of one version it reports
// spec.validation.openAPIV3Schema... where kplane reports
// spec.versions[0].schema.openAPIV3Schema..., and it checks spec.version,
// a field v1 does not have, repeating an invalid first version name.

var (
	// What upstream accepts, in the order its messages list them.
	scopes         = []string{string(apiextensionsv1.ClusterScoped), string(apiextensionsv1.NamespaceScoped)}
	strategies     = []string{string(apiextensionsv1.NoneConverter), string(apiextensionsv1.WebhookConverter)}
	columnTypes    = []string{"boolean", "date", "integer", "number", "string"}
	columnFormats  = []string{"byte", "date", "date-time", "double", "float", "int32", "int64", "password"}
	reviewVersions = []string{"v1", "v1beta1"}
)

// approvalAnnotation marks a CRD in a protected group (k8s.io,
// kubernetes.io) as approved by the Kubernetes API review.
const approvalAnnotation = "api-approved.kubernetes.io"

// setDefaults sets what CRD v1 defaulting sets: the singular and list
// names, the conversion strategy, a webhook service's port.
func setDefaults(obj *unstructured.Unstructured) {
	kind, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "kind")
	if s, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "singular"); s == "" {
		_ = unstructured.SetNestedField(obj.Object, strings.ToLower(kind), "spec", "names", "singular")
	}
	if l, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "listKind"); l == "" && kind != "" {
		_ = unstructured.SetNestedField(obj.Object, kind+"List", "spec", "names", "listKind")
	}
	if _, ok := obj.Object["spec"].(map[string]any); !ok {
		return
	}
	if c, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "conversion"); !ok || c == nil {
		_ = unstructured.SetNestedMap(obj.Object, map[string]any{"strategy": string(apiextensionsv1.NoneConverter)}, "spec", "conversion")
	}
	if svc, ok, _ := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook", "clientConfig", "service"); ok && svc["port"] == nil {
		_ = unstructured.SetNestedField(obj.Object, int64(443), "spec", "conversion", "webhook", "clientConfig", "service", "port")
	}
}

// prepareForCreate defaults a new CRD and records its storage version as
// stored, as upstream's strategy does before validation (the registry has
// already dropped the status the client sent).
func prepareForCreate(obj *unstructured.Unstructured) {
	setDefaults(obj)
	addStoredVersion(obj)
}

// prepareForUpdate defaults a changed spec and adds its storage version to
// the stored ones. A spec left as stored (a status write, a label) is not
// defaulted, so that a status write cannot change a CRD stored before
// kplane set these defaults; but an empty status.storedVersions gets the
// storage version back, as upstream's defaulting gives it on every write.
func prepareForUpdate(obj, old *unstructured.Unstructured) {
	if !equality.Semantic.DeepEqual(obj.Object["spec"], old.Object["spec"]) {
		setDefaults(obj)
		addStoredVersion(obj)
	} else if stored, _, _ := unstructured.NestedStringSlice(obj.Object, "status", "storedVersions"); len(stored) == 0 {
		addStoredVersion(obj)
	}
}

// addStoredVersion appends the first storage version to
// status.storedVersions unless it is there.
func addStoredVersion(obj *unstructured.Unstructured) {
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if storage, _ := v["storage"].(bool); !storage {
			continue
		}
		name, _ := v["name"].(string)
		stored, _, _ := unstructured.NestedStringSlice(obj.Object, "status", "storedVersions")
		if !slices.Contains(stored, name) {
			_ = unstructured.SetNestedStringSlice(obj.Object, append(stored, name), "status", "storedVersions")
		}
		return
	}
}

// validateUpdate checks an update as validate does, unless it leaves the
// spec as it was (a status write, the CRD controller's, once per CRD; a
// label or finalizer change): then only the accepted names (as upstream's
// status strategy checks them) and the approval annotation are checked.
// The rest reads only the spec and the name, which cannot change, so the
// stored spec passes as it is, as upstream's update validation lets
// unchanged fields pass. A whole check compiles every version's schema and
// CEL rules.
func validateUpdate(obj, old *unstructured.Unstructured) field.ErrorList {
	if equality.Semantic.DeepEqual(obj.Object["spec"], old.Object["spec"]) {
		// Without decoding the CRDs (their schemas are most of them).
		var names apiextensionsv1.CustomResourceDefinitionNames
		if m, ok, _ := unstructured.NestedMap(obj.Object, "status", "acceptedNames"); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &names); err != nil {
				return field.ErrorList{field.Invalid(field.NewPath("status", "acceptedNames"), "", err.Error())}
			}
		}
		errs := validateNames(&names, field.NewPath("status", "acceptedNames"))
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		return append(errs, validateApprovalUpdate(group, obj.GetAnnotations(), old.GetAnnotations())...)
	}
	crd, err := decode(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	prev, err := decode(old)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	return validateCRD(crd, prev)
}

// validate checks a new CRD.
func validate(obj *unstructured.Unstructured) field.ErrorList {
	crd, err := decode(obj)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
	}
	return validateCRD(crd, nil)
}

// validateCRD checks crd, new (old nil) or replacing old, in upstream's
// order: the name, the spec, the accepted names, the stored versions, the
// approval of a protected group and preserveUnknownFields.
func validateCRD(crd, old *apiextensionsv1.CustomResourceDefinition) field.ErrorList {
	var errs field.ErrorList
	if old == nil {
		if want := crd.Spec.Names.Plural + "." + crd.Spec.Group; crd.Name != want {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), crd.Name, `must be spec.names.plural+"."+spec.group`))
		}
	}
	errs = append(errs, validateSpec(&crd.Spec, field.NewPath("spec"))...)
	if old != nil {
		errs = append(errs, validateSpecUpdate(&crd.Spec, &old.Spec, established(old), field.NewPath("spec"))...)
	}
	errs = append(errs, validateNames(&crd.Status.AcceptedNames, field.NewPath("status", "acceptedNames"))...)
	errs = append(errs, validateStoredVersions(crd.Status.StoredVersions, crd.Spec.Versions, field.NewPath("status", "storedVersions"))...)
	if old == nil {
		errs = append(errs, validateApproval(crd.Spec.Group, crd.Annotations)...)
	} else {
		errs = append(errs, validateApprovalUpdate(crd.Spec.Group, crd.Annotations, old.Annotations)...)
	}
	if crd.Spec.PreserveUnknownFields && (old == nil || !old.Spec.PreserveUnknownFields) {
		errs = append(errs, field.Invalid(field.NewPath("spec", "preserveUnknownFields"), true, "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead"))
	}
	return errs
}

func established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established {
			return c.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

func validateSpec(s *apiextensionsv1.CustomResourceDefinitionSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Group == "" {
		errs = append(errs, field.Required(spec.Child("group"), ""))
	} else if msgs := validation.IsDNS1123Subdomain(s.Group); len(msgs) > 0 {
		errs = append(errs, field.Invalid(spec.Child("group"), s.Group, strings.Join(msgs, ",")))
	} else if !strings.Contains(s.Group, ".") {
		errs = append(errs, field.Invalid(spec.Child("group"), s.Group, "should be a domain with at least one dot"))
	}
	errs = append(errs, oneOf(spec.Child("scope"), string(s.Scope), scopes)...)
	versions := spec.Child("versions")
	for i, v := range s.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			errs = append(errs, field.Required(versions.Index(i).Child("schema", "openAPIV3Schema"), ""))
		}
	}
	if s.PreserveUnknownFields && hasDefaults(s) {
		errs = append(errs, field.Invalid(spec.Child("preserveUnknownFields"), true, "must be false in order to use defaults in the schema"))
	}
	storage, seen, unique := 0, sets.New[string](), true
	for i := range s.Versions {
		v := &s.Versions[i]
		p := versions.Index(i)
		if v.Storage {
			storage++
		}
		if seen.Has(v.Name) {
			unique = false
		}
		seen.Insert(v.Name)
		if msgs := validation.IsDNS1035Label(v.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("name"), v.Name, strings.Join(msgs, ",")))
		}
		errs = append(errs, validateVersion(v, p)...)
	}
	if !unique {
		errs = append(errs, field.Invalid(versions, versionsValue(s.Versions), "must contain unique version names"))
	}
	if storage != 1 {
		errs = append(errs, field.Invalid(versions, versionsValue(s.Versions), "must have exactly one version marked as storage version"))
	}
	names := spec.Child("names")
	for _, n := range []struct{ name, value string }{
		{"plural", s.Names.Plural}, {"singular", s.Names.Singular}, {"kind", s.Names.Kind}, {"listKind", s.Names.ListKind},
	} {
		if n.value == "" {
			errs = append(errs, field.Required(names.Child(n.name), ""))
		}
	}
	errs = append(errs, validateNames(&s.Names, names)...)
	if c := s.Conversion; c != nil && c.Strategy != apiextensionsv1.NoneConverter && s.PreserveUnknownFields {
		errs = append(errs, field.Invalid(spec.Child("conversion", "strategy"), c.Strategy, "must be None if spec.preserveUnknownFields is true"))
	}
	errs = append(errs, validateConversion(s.Conversion, spec.Child("conversion"))...)
	return errs
}

// validateVersion checks one version: its deprecation warning, schema,
// subresources, printer columns and selectable fields.
func validateVersion(v *apiextensionsv1.CustomResourceDefinitionVersion, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range deprecationWarningErrors(v.Deprecated, v.DeprecationWarning) {
		errs = append(errs, field.Invalid(p.Child("deprecationWarning"), v.DeprecationWarning, msg))
	}
	if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
		sp := p.Child("schema", "openAPIV3Schema")
		schemaErrs := schema.ValidateCRD(v.Schema.OpenAPIV3Schema, sp)
		errs = append(errs, schemaErrs...)
		if len(schemaErrs) == 0 {
			_, celErrs := cel.Compile(v.Schema.OpenAPIV3Schema, sp)
			errs = append(errs, celErrs...)
		}
	}
	if sub := v.Subresources; sub != nil && sub.Scale != nil {
		scale := p.Child("subresources").Child("scale")
		errs = append(errs, replicasPath(scale.Child("specReplicasPath"), sub.Scale.SpecReplicasPath, ".spec.")...)
		errs = append(errs, replicasPath(scale.Child("statusReplicasPath"), sub.Scale.StatusReplicasPath, ".status.")...)
		if sel := sub.Scale.LabelSelectorPath; sel != nil && *sel != "" {
			lp := scale.Child("labelSelectorPath")
			if e := simpleJSONPath(lp, *sel); e != nil {
				errs = append(errs, e)
			} else if !strings.HasPrefix(*sel, ".spec.") && !strings.HasPrefix(*sel, ".status.") {
				errs = append(errs, field.Invalid(lp, sel, "should be a json path under either .spec or .status"))
			}
		}
	}
	for i, c := range v.AdditionalPrinterColumns {
		errs = append(errs, validateColumn(&c, p.Child("additionalPrinterColumns").Index(i))...)
	}
	errs = append(errs, validateSelectableFields(v, p)...)
	return errs
}

// versionsValue renders spec.versions as the bad value of a field error
// the way upstream shows it: the JSON of its internal version type, whose
// fields have no JSON names, after the schema, subresources, printer
// columns or selectable fields every version shares were hoisted out of
// the versions (they show as null). Fields that differ between versions
// are shown in their v1 form.
type versionsValue []apiextensionsv1.CustomResourceDefinitionVersion

func (vs versionsValue) MarshalJSON() ([]byte, error) {
	if vs == nil {
		return []byte("null"), nil
	}
	shared := func(f func(v *apiextensionsv1.CustomResourceDefinitionVersion) any) bool {
		for i := range vs {
			if !equality.Semantic.DeepEqual(f(&vs[i]), f(&vs[0])) {
				return false
			}
		}
		return true
	}
	hoisted := func(shared bool, v any) any {
		if shared {
			return nil
		}
		return v
	}
	schemas := shared(func(v *apiextensionsv1.CustomResourceDefinitionVersion) any { return v.Schema })
	subresources := shared(func(v *apiextensionsv1.CustomResourceDefinitionVersion) any { return v.Subresources })
	columns := shared(func(v *apiextensionsv1.CustomResourceDefinitionVersion) any { return v.AdditionalPrinterColumns })
	selectable := shared(func(v *apiextensionsv1.CustomResourceDefinitionVersion) any { return v.SelectableFields })
	type internal struct {
		Name                     string
		Served, Storage          bool
		Deprecated               bool
		DeprecationWarning       *string
		Schema                   any
		Subresources             any
		AdditionalPrinterColumns any
		SelectableFields         any
	}
	out := make([]internal, len(vs))
	for i, v := range vs {
		out[i] = internal{v.Name, v.Served, v.Storage, v.Deprecated, v.DeprecationWarning,
			hoisted(schemas, v.Schema), hoisted(subresources, v.Subresources),
			hoisted(columns, v.AdditionalPrinterColumns), hoisted(selectable, v.SelectableFields)}
	}
	return json.Marshal(out)
}

// replicasPath checks a scale path, which must lie under prefix.
func replicasPath(p *field.Path, path, prefix string) field.ErrorList {
	if path == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if e := simpleJSONPath(p, path); e != nil {
		return field.ErrorList{e}
	}
	if !strings.HasPrefix(path, prefix) {
		return field.ErrorList{field.Invalid(p, path, "should be a json path under "+strings.TrimSuffix(prefix, "."))}
	}
	return nil
}

// simpleJSONPath checks a path in the dot notation kplane and upstream
// read scale and column paths in.
func simpleJSONPath(p *field.Path, s string) *field.Error {
	switch {
	case s == "":
		return field.Invalid(p, s, "must not be empty")
	case s[0] != '.':
		return field.Invalid(p, s, "must be a simple json path starting with .")
	}
	return nil
}

func validateColumn(c *apiextensionsv1.CustomResourceColumnDefinition, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	must := "must be one of " + strings.Join(columnTypes, ",")
	if c.Type == "" {
		errs = append(errs, field.Required(p.Child("type"), must))
	} else if !slices.Contains(columnTypes, c.Type) {
		errs = append(errs, field.Invalid(p.Child("type"), c.Type, must))
	}
	if c.Format != "" && !slices.Contains(columnFormats, c.Format) {
		errs = append(errs, field.Invalid(p.Child("format"), c.Format, "must be one of "+strings.Join(columnFormats, ",")))
	}
	// JSONPath, as upstream's internal field is named.
	if c.JSONPath == "" {
		errs = append(errs, field.Required(p.Child("JSONPath"), ""))
	} else if e := simpleJSONPath(p.Child("JSONPath"), c.JSONPath); e != nil {
		errs = append(errs, e)
	}
	return errs
}

// deprecationWarningErrors are the faults of a version's deprecation
// warning: set on a version not deprecated, empty, too long, or not
// printable.
func deprecationWarningErrors(deprecated bool, w *string) []string {
	if w == nil {
		return nil
	}
	if !deprecated {
		return []string{"can only be set for deprecated versions"}
	}
	var msgs []string
	if len(*w) > 256 {
		msgs = append(msgs, "must be <= 256 characters long")
	}
	if *w == "" {
		msgs = append(msgs, "must not be an empty string")
	}
	for i, r := range *w {
		if !unicode.IsPrint(r) {
			msgs = append(msgs, fmt.Sprintf("must only contain printable UTF-8 characters; non-printable character found at index %d", i))
			break
		}
	}
	if !utf8.ValidString(*w) {
		msgs = append(msgs, "must only contain printable UTF-8 characters")
	}
	return msgs
}

// validateNames checks spec.names or status.acceptedNames.
func validateNames(n *apiextensionsv1.CustomResourceDefinitionNames, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	label := func(name, value string) {
		if msgs := validation.IsDNS1035Label(value); value != "" && len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child(name), value, strings.Join(msgs, ",")))
		}
	}
	mixedCase := func(name, value string) {
		if msgs := validation.IsDNS1035Label(strings.ToLower(value)); value != "" && len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child(name), value, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
		}
	}
	label("plural", n.Plural)
	label("singular", n.Singular)
	mixedCase("kind", n.Kind)
	mixedCase("listKind", n.ListKind)
	for i, s := range n.ShortNames {
		if msgs := validation.IsDNS1035Label(s); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("shortNames").Index(i), s, strings.Join(msgs, ",")))
		}
	}
	if n.Kind != "" && n.Kind == n.ListKind {
		errs = append(errs, field.Invalid(p.Child("listKind"), n.ListKind, "kind and listKind may not be the same"))
	}
	for i, c := range n.Categories {
		if msgs := validation.IsDNS1035Label(c); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("categories").Index(i), c, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// validateConversion checks the conversion strategy and a webhook's
// client config and review versions. (kplane calls no conversion
// webhook; see docs/design.md.)
func validateConversion(c *apiextensionsv1.CustomResourceConversion, p *field.Path) field.ErrorList {
	if c == nil {
		return nil
	}
	errs := oneOf(p.Child("strategy"), string(c.Strategy), strategies)
	if c.Strategy != apiextensionsv1.WebhookConverter {
		if c.Webhook != nil && c.Webhook.ClientConfig != nil {
			errs = append(errs, field.Forbidden(p.Child("webhookClientConfig"), "should not be set when strategy is not set to Webhook"))
		}
		if c.Webhook != nil && len(c.Webhook.ConversionReviewVersions) > 0 {
			errs = append(errs, field.Forbidden(p.Child("conversionReviewVersions"), "should not be set when strategy is not set to Webhook"))
		}
		return errs
	}
	var review []string
	if c.Webhook == nil || c.Webhook.ClientConfig == nil {
		errs = append(errs, field.Required(p.Child("webhookClientConfig"), "required when strategy is set to Webhook"))
	} else {
		cc := c.Webhook.ClientConfig
		switch {
		case (cc.URL == nil) == (cc.Service == nil):
			errs = append(errs, field.Required(p.Child("webhookClientConfig"), "exactly one of url or service is required"))
		case cc.URL != nil:
			errs = append(errs, registry.ValidateWebhookURL(p.Child("webhookClientConfig", "url"), *cc.URL)...)
		default:
			errs = append(errs, webhookService(p.Child("webhookClientConfig", "service"), cc.Service)...)
		}
	}
	if c.Webhook != nil {
		review = c.Webhook.ConversionReviewVersions
	}
	rp := p.Child("conversionReviewVersions")
	if len(review) == 0 {
		return append(errs, field.Required(rp, ""))
	}
	seen, known := sets.New[string](), false
	for i, v := range review {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(rp.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		for _, msg := range validation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(rp.Index(i), v, msg))
		}
		known = known || slices.Contains(reviewVersions, v)
	}
	if !known {
		errs = append(errs, field.Invalid(rp, review, "must include at least one of "+strings.Join(reviewVersions, ", ")))
	}
	return errs
}

func webhookService(p *field.Path, s *apiextensionsv1.ServiceReference) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	}
	port := int32(443)
	if s.Port != nil {
		port = *s.Port
	}
	if msgs := validation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(p.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Path != nil {
		errs = append(errs, registry.ValidateWebhookPath(p.Child("path"), *s.Path)...)
	}
	return errs
}

// validateSpecUpdate checks what may not change: the group and plural
// (the CRD's name is made of them) always, the scope and kind once the
// CRD is established (they decide how its objects are stored).
func validateSpecUpdate(s, old *apiextensionsv1.CustomResourceDefinitionSpec, established bool, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	immutable := func(p *field.Path, v, was string) {
		if v != was {
			errs = append(errs, field.Invalid(p, v, "field is immutable"))
		}
	}
	if established {
		immutable(spec.Child("scope"), string(s.Scope), string(old.Scope))
		immutable(spec.Child("names", "kind"), s.Names.Kind, old.Names.Kind)
	}
	immutable(spec.Child("group"), s.Group, old.Group)
	immutable(spec.Child("names", "plural"), s.Names.Plural, old.Names.Plural)
	return errs
}

// validateStoredVersions checks that the storage version is recorded as
// stored, and that every version ever stored is still in spec.versions:
// objects may remain in it until a storage migration removes it from
// status.storedVersions.
func validateStoredVersions(stored []string, versions []apiextensionsv1.CustomResourceDefinitionVersion, p *field.Path) field.ErrorList {
	if len(stored) == 0 {
		return field.ErrorList{field.Invalid(p, stored, "must have at least one stored version")}
	}
	var errs field.ErrorList
	left := sets.New(stored...)
	for _, v := range versions {
		// Each stored version is matched once (a repeated version name
		// finds it taken), as upstream matches them.
		if v.Storage && !left.Has(v.Name) {
			errs = append(errs, field.Invalid(p, stored, "must have the storage version "+v.Name))
		}
		left.Delete(v.Name)
	}
	for i, v := range stored {
		if left.Has(v) {
			left.Delete(v)
			errs = append(errs, field.Invalid(p.Index(i), v, fmt.Sprintf("missing from spec.versions; %[1]s was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in %[1]s and removes %[1]s from status.storedVersions", v)))
		}
	}
	return errs
}

// validateApproval requires a CRD in a protected group (k8s.io,
// kubernetes.io) to carry the API review's approval annotation: a URL, or
// a reason starting with "unapproved".
func validateApproval(group string, annotations map[string]string) field.ErrorList {
	if group != "k8s.io" && !strings.HasSuffix(group, ".k8s.io") && group != "kubernetes.io" && !strings.HasSuffix(group, ".kubernetes.io") {
		return nil
	}
	state, reason := approvalState(annotations)
	p := field.NewPath("metadata", "annotations").Key(approvalAnnotation)
	switch state {
	case approvalMissing:
		return field.ErrorList{field.Required(p, reason)}
	case approvalInvalid:
		return field.ErrorList{field.Invalid(p, annotations[approvalAnnotation], reason)}
	}
	return nil
}

// validateApprovalUpdate is validateApproval, but an update that leaves
// the approval's state as it was passes (upstream lets a CRD approved
// under older rules keep its annotation).
func validateApprovalUpdate(group string, annotations, old map[string]string) field.ErrorList {
	now, _ := approvalState(annotations)
	if was, _ := approvalState(old); now == was {
		return nil
	}
	return validateApproval(group, annotations)
}

type approval int

const (
	approvalInvalid approval = iota
	approved
	approvalBypassed
	approvalMissing
)

func approvalState(annotations map[string]string) (approval, string) {
	a := annotations[approvalAnnotation]
	u, err := url.ParseRequestURI(a)
	switch {
	case a == "":
		return approvalMissing, fmt.Sprintf("protected groups must have approval annotation %q, see https://github.com/kubernetes/enhancements/pull/1111", approvalAnnotation)
	case strings.HasPrefix(a, "unapproved"):
		return approvalBypassed, ""
	case err == nil && u.Host != "" && u.Scheme != "":
		return approved, ""
	}
	return approvalInvalid, fmt.Sprintf("protected groups must have approval annotation %q with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111", approvalAnnotation)
}

// oneOf checks a required value against the accepted ones.
func oneOf(p *field.Path, v string, accepted []string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	if !slices.Contains(accepted, v) {
		return field.ErrorList{field.NotSupported(p, v, accepted)}
	}
	return nil
}

// hasDefaults reports whether any version's schema sets a default.
func hasDefaults(s *apiextensionsv1.CustomResourceDefinitionSpec) bool {
	for _, v := range s.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil && hasDefault(v.Schema.OpenAPIV3Schema) {
			return true
		}
	}
	return false
}
