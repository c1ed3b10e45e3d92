package apiserver

import (
	"net/http/httptest"
	"testing"
)

// Content negotiation: the first form kplane can produce in Accept order,
// protobuf only when preferred by q-value to every JSON form, or when no
// JSON form is acceptable; 406 when nothing is.
func TestNegotiate(t *testing.T) {
	table := "application/json;as=Table;v=v1;g=meta.k8s.io"
	for _, tc := range []struct {
		accept string
		proto  bool
		want   form
		err    bool
	}{
		{"", true, formJSON, false},
		{"application/json", true, formJSON, false},
		{"*/*", true, formJSON, false},
		{"application/vnd.kubernetes.protobuf,application/json", true, formJSON, false}, // client-go's typed clients
		{"application/vnd.kubernetes.protobuf, application/json;q=0.9", true, formProtobuf, false},
		{"application/json;q=0.5, application/vnd.kubernetes.protobuf", true, formProtobuf, false},
		{"application/vnd.kubernetes.protobuf", true, formProtobuf, false},
		{"application/vnd.kubernetes.protobuf", false, 0, true}, // a custom resource
		{"application/vnd.kubernetes.protobuf, application/json;q=0.9", false, formJSON, false},
		{"application/vnd.kubernetes.protobuf;q=0, application/json;q=0.1", true, formJSON, false},
		{table + ",application/json", true, formTable, false},
		{"application/yaml", true, formYAML, false},
		{"application/json;q=0, application/yaml;q=0.2", true, formYAML, false},
		{"text/html", true, 0, true},
		{"application/cbor", true, 0, true},
	} {
		r := httptest.NewRequest("GET", "/api/v1/configmaps", nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		got, err := negotiateFor(r, tc.proto)
		if (err != nil) != tc.err || (err == nil && got != tc.want) {
			t.Errorf("Accept %q (protobuf offered: %v): got %v, %v; want %v (error: %v)", tc.accept, tc.proto, got, err, tc.want, tc.err)
		}
	}
}
