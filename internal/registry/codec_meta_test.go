package registry

import (
	"testing"
)

// TestDecodeRefusesMalformedMetadata: a custom resource body whose metadata
// does not decode as ObjectMeta is refused with the decoding error, as
// apiextensions-apiserver's schemaCoercingDecoder does
// (customresource_handler.go unstructuredSchemaCoercer.apply, via
// schema/objectmeta GetObjectMetaWithOptions without DropMalformedFields);
// the handler turns it into 400 "<Kind> in version ... cannot be handled
// as a <Kind>: <error>". The messages are encoding/json's, from the same
// sigs.k8s.io/json that upstream links.
func TestDecodeRefusesMalformedMetadata(t *testing.T) {
	cr := &Kind{Group: "example.kplane.dev", Versions: []string{"v1"}, Kind: "Widget", Resource: "widgets"}
	for _, c := range []struct {
		name, metadata, want string
	}{
		{"name a number", `{"name":5}`, "json: cannot unmarshal number into Go struct field ObjectMeta.name of type string"},
		{"generateName a bool", `{"generateName":true}`, "json: cannot unmarshal bool into Go struct field ObjectMeta.generateName of type string"},
		{"labels a string", `{"name":"a","labels":"x"}`, "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"},
		{"annotation value a number", `{"name":"a","annotations":{"a":1}}`, "json: cannot unmarshal number into Go struct field ObjectMeta.annotations of type string"},
		{"metadata a list", `[{"name":"a"}]`, "json: cannot unmarshal array into Go value of type v1.ObjectMeta"},
		{"metadata a string", `"a"`, "json: cannot unmarshal string into Go value of type v1.ObjectMeta"},
		{"ownerReferences an object", `{"name":"a","ownerReferences":{}}`, "json: cannot unmarshal object into Go struct field ObjectMeta.ownerReferences of type []v1.OwnerReference"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := Decode(cr, []byte(`{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":`+c.metadata+`}`))
			if err == nil || err.Error() != c.want {
				t.Errorf("err = %v, want %q", err, c.want)
			}
		})
	}
	for _, ok := range []string{`{"name":"a","unknown":1}`, `null`, `{}`, `{"name":"a","labels":null}`} {
		if _, _, err := Decode(cr, []byte(`{"apiVersion":"example.kplane.dev/v1","kind":"Widget","metadata":`+ok+`}`)); err != nil {
			t.Errorf("metadata %s: %v", ok, err)
		}
	}
}
