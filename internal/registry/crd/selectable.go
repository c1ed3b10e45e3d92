package crd

import (
	"errors"
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Selectable fields (spec.versions[].selectableFields, GA in Kubernetes
// 1.32) let field selectors of lists and watches use fields of a custom
// resource besides metadata.name and metadata.namespace.

// maxSelectableFields is upstream's limit per version
// (apiextensions validation.MaxSelectableFields).
const maxSelectableFields = 8

// validateSelectableFields checks a version's selectableFields as
// apiextensions-apiserver's ValidateCustomResourceSelectableFields does:
// each jsonPath a dotted path to a string, integer or boolean field of the
// schema, outside metadata, not repeated, at most 8 of them.
func validateSelectableFields(v *apiextensionsv1.CustomResourceDefinitionVersion, fldPath *field.Path) field.ErrorList {
	if len(v.SelectableFields) == 0 {
		return nil
	}
	fldPath = fldPath.Child("selectableFields")
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		// Upstream's words, inverted as they are.
		return field.ErrorList{field.Invalid(fldPath, "", "may only be set when `version.schema.openAPIV3Schema` is not included")}
	}
	var errs field.ErrorList
	unique := sets.New[string]()
	for i, sf := range v.SelectableFields {
		p := fldPath.Index(i).Child("jsonPath")
		if sf.JSONPath == "" {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		path, s, err := selectablePath(sf.JSONPath, v.Schema.OpenAPIV3Schema)
		if err != nil {
			errs = append(errs, field.Invalid(p, sf.JSONPath, fmt.Sprintf("is an invalid path: %v", err)))
			continue
		}
		if path.Root().String() == "metadata" {
			errs = append(errs, field.Invalid(p, sf.JSONPath, "must not point to fields in metadata"))
		}
		if s == nil || (s.Type != "string" && s.Type != "boolean" && s.Type != "integer") {
			errs = append(errs, field.Invalid(p, sf.JSONPath, "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed."))
		}
		if unique.Has(path.String()) {
			errs = append(errs, field.Duplicate(p, sf.JSONPath))
		} else {
			unique.Insert(path.String())
		}
	}
	if unique.Len() > maxSelectableFields {
		errs = append(errs, field.TooMany(fldPath, unique.Len(), maxSelectableFields))
	}
	return errs
}

// selectablePath resolves a selectable field's jsonPath in schema s, as
// upstream's cel.ValidFieldPath does without array notation: a sequence
// of ".name" steps, each a property (or an additionalProperties key).
// It returns the path and the schema it reaches (nil past a map whose
// values have no schema).
func selectablePath(jsonPath string, s *apiextensionsv1.JSONSchemaProps) (*field.Path, *apiextensionsv1.JSONSchemaProps, error) {
	toks := pathTokens(jsonPath)
	var path *field.Path
	for i := 0; i < len(toks); i++ {
		switch toks[i] {
		case "[":
			return nil, nil, errors.New("array notation is not allowed")
		case ".":
			i++
			if i == len(toks) {
				return nil, nil, errors.New("unexpected end of JSON path")
			}
			name := toks[i]
			switch {
			case s != nil && len(s.Properties) > 0:
				prop, ok := s.Properties[name]
				if !ok {
					return nil, nil, errors.New("does not refer to a valid field")
				}
				path, s = path.Child(name), &prop
			case s != nil && s.AdditionalProperties != nil:
				path, s = path.Key(name), s.AdditionalProperties.Schema
			default:
				return nil, nil, errors.New("does not refer to a valid field")
			}
		default:
			return nil, nil, fmt.Errorf("expected [ or . but got: %s", toks[i])
		}
	}
	return path, s, nil
}

// pathTokens splits a JSON path into the delimiters ".", "[" and "]" and
// the text between them, a token that starts with a single quote running
// to the next unescaped one, as upstream's scanner does.
func pathTokens(p string) []string {
	var toks []string
	for len(p) > 0 {
		n := len(p)
		if p[0] == '\'' {
			for i := 1; i < len(p); i++ {
				if p[i] == '\'' && p[i-1] != '\\' {
					n = i + 1
					break
				}
			}
		} else if strings.ContainsRune(".[]", rune(p[0])) {
			n = 1
		} else if i := strings.IndexAny(p, ".[]"); i >= 0 {
			n = i
		}
		toks = append(toks, p[:n])
		p = p[n:]
	}
	return toks
}

// selectableFields returns the field-selector hooks of crd's kind: the
// fields of every served version, with their values (fields), and which
// of them each version accepts (byVersion). A field's name is its
// jsonPath without the leading dot; its value is the field's value
// printed, or "" where the object lacks it, as upstream's
// customResourceStrategy.GetAttrs gives it. Versions differ only in
// apiVersion (conversion None), so one set of values serves them all.
func selectableFields(crd *apiextensionsv1.CustomResourceDefinition) (fieldsOf func(*unstructured.Unstructured) fields.Set, byVersion map[string][]string) {
	paths := map[string]jsonPath{}
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if byVersion == nil {
			byVersion = map[string][]string{}
		}
		names := []string{}
		for _, sf := range v.SelectableFields {
			name := strings.TrimPrefix(sf.JSONPath, ".")
			names = append(names, name)
			paths[name], _ = parseJSONPath(sf.JSONPath) // validated: a dotted path
		}
		byVersion[v.Name] = names
	}
	if len(paths) == 0 {
		return nil, nil
	}
	return func(obj *unstructured.Unstructured) fields.Set {
		set := make(fields.Set, len(paths))
		for name, p := range paths {
			set[name] = ""
			if v, ok := p.first(obj.Object); ok && v != nil {
				set[name] = fmt.Sprint(v)
			}
		}
		return set
	}, byVersion
}
