package apiserver

import (
	"net/http/httptest"
	"testing"
)

// Content negotiation, as kube-apiserver's: by q-value, then the more
// specific range, then the order sent; protobuf only where offered; 406
// when nothing is acceptable.
func TestNegotiate(t *testing.T) {
	table := "application/json;as=Table;v=v1;g=meta.k8s.io"
	meta := func(mediaType, list, v string) string {
		return mediaType + ";as=PartialObjectMetadata" + list + ";g=meta.k8s.io;v=" + v
	}
	for _, tc := range []struct {
		accept string
		proto  bool
		want   form
		err    bool
	}{
		{"", true, formJSON, false},
		{"application/json", true, formJSON, false},
		{"*/*", true, formJSON, false},
		{"application/*", true, formJSON, false},
		{"application/vnd.kubernetes.protobuf,application/json", true, formProtobuf, false}, // client-go's typed clients
		{"application/vnd.kubernetes.protobuf, */*", true, formProtobuf, false},             // controller-runtime's, built-in kinds
		{"application/vnd.kubernetes.protobuf,application/json", false, formJSON, false},    // a custom resource
		{"application/json, application/vnd.kubernetes.protobuf", true, formJSON, false},    // the order sent
		{"*/*, application/vnd.kubernetes.protobuf", true, formProtobuf, false},             // the more specific first
		{"application/*, application/vnd.kubernetes.protobuf", true, formProtobuf, false},   // likewise
		{"*/*, application/*;q=1, application/yaml", true, formYAML, false},                 // likewise
		{"application/vnd.kubernetes.protobuf, application/json;q=0.9", true, formProtobuf, false},
		{"application/json;q=0.5, application/vnd.kubernetes.protobuf", true, formProtobuf, false},
		{"application/yaml;q=0.5, application/json", true, formJSON, false},
		{"application/vnd.kubernetes.protobuf;q=0.5, */*;q=0.6", true, formJSON, false},
		{"application/vnd.kubernetes.protobuf", true, formProtobuf, false},
		{"application/vnd.kubernetes.protobuf", false, 0, true},
		{"application/vnd.kubernetes.protobuf, application/json;q=0.9", false, formJSON, false},
		{"application/vnd.kubernetes.protobuf;q=0, application/json;q=0.1", true, formJSON, false},
		{"application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io, " + table, true, formTable, false},
		{table + ",application/json", true, formTable, false},
		{"application/json," + table, true, formJSON, false},
		{"application/yaml", true, formYAML, false},
		// client-go's metadata client: protobuf for every kind, built-in
		// or custom; v1beta1 only in JSON (its list's fields are
		// numbered otherwise).
		{meta("application/vnd.kubernetes.protobuf", "List", "v1") + "," + meta("application/json", "List", "v1") + ",application/json", false, formMetadataProto, false},
		{meta("application/vnd.kubernetes.protobuf", "", "v1") + "," + meta("application/json", "", "v1") + ",application/json", true, formMetadataProto, false},
		{meta("application/vnd.kubernetes.protobuf", "List", "v1beta1") + "," + meta("application/json", "List", "v1beta1"), false, formMetadata, false},
		{meta("application/json", "List", "v1") + "," + meta("application/vnd.kubernetes.protobuf", "List", "v1"), true, formMetadata, false},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=example.com;v=v1", true, 0, true},
		{"application/json;q=0, application/yaml;q=0.2", true, formYAML, false},
		{"application/json;q=2, application/yaml", true, formYAML, false}, // an invalid q is skipped
		{"text/html", true, 0, true},
		{"application/cbor", true, 0, true},
	} {
		r := httptest.NewRequest("GET", "/api/v1/configmaps", nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		got, err := negotiateAccept(r, tc.proto)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("Accept %q (protobuf offered: %v): got %v, %v; want %v (error: %v)", tc.accept, tc.proto, got, err, tc.want, tc.err)
		}
		// The 406 names what upstream's handlers list, custom resources'
		// too.
		if want := "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"; err != nil {
			if err.Error() != want {
				t.Errorf("Accept %q (protobuf offered: %v): %q, want %q", tc.accept, tc.proto, err, want)
			}
		}
	}
}
