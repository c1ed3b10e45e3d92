package apiserver_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// Events of both APIs, and updates that create, answer as kube-apiserver
// v1.37.2 does. testdata/events-kube-apiserver-v1.37.2.json holds 67
// requests and upstream's answers, sent in order in one namespace:
//   - events.k8s.io/v1 Events written and read through both APIs (members
//     renamed, empty ones as each Go type writes them), their field
//     selectors, Tables, patches of every type, server-side apply, and
//     deletes;
//   - the managers of the other API dropped by a write (the field manager
//     cannot convert between the two);
//   - the new API's checks: the legacy ones with reportingController
//     named so, then the metadata's, the strict ones, and the immutable
//     fields of an update, shown as upstream's internal types;
//   - PUTs that create (Leases, Events, RBAC objects) and those that do
//     not (ConfigMaps), Leases refusing an update without a
//     resourceVersion, and binding errors in upstream's order.
func TestEventsAsKubeAPIServer(t *testing.T) {
	replayUpstream(t, "testdata/events-kube-apiserver-v1.37.2.json", 60)
}

// The reviews kubectl auth asks (can-i, whoami) answer as kube-apiserver
// v1.37.2's do for its admin: every access allowed (kplane authorizes
// every authenticated request; upstream allows system:masters
// everything), the question echoed with the field manager's entry, the
// metadata refused unless empty, and the user named by the client
// certificate. testdata/reviews-kube-apiserver-v1.37.2.json holds 20
// requests and upstream's answers, credential ids masked (the two
// servers' certificates differ). Rules reviews differ on purpose (upstream
// lists its bootstrap roles' rules besides everything): see
// TestRulesReviewListsEverything.
func TestReviewsAsKubeAPIServer(t *testing.T) {
	replayUpstream(t, "testdata/reviews-kube-apiserver-v1.37.2.json", 20)
}

// replayUpstream sends the requests of file, in order, to an in-process
// server, each from a client certificate as kplane's admin's (CN
// kplane-admin, O system:masters) and with curl's User-Agent, and holds
// each answer to upstream's, masked as the file is (maskVolatile). At
// least min requests must be there. The file's "NS" is a namespace the
// replay creates first.
func replayUpstream(t *testing.T, file string, min int) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Steps []struct {
			Method, Path, ContentType, Accept, Body string
			Code                                    int
			Answer                                  any
		}
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	if len(upstream.Steps) < min {
		t.Fatalf("%d steps", len(upstream.Steps))
	}
	h := newInProcess(t)
	admin := &x509.Certificate{Subject: pkix.Name{CommonName: "kplane-admin", Organization: []string{"system:masters"}}, Raw: []byte("a certificate")}
	const ns = "evt"
	send := func(method, path, ctype, accept, body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, strings.ReplaceAll(path, "NS", ns), strings.NewReader(strings.ReplaceAll(body, "NS", ns)))
		r.Header.Set("User-Agent", "curl/8.5.0") // upstream's answers name the manager "curl"
		r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{admin}}}
		if ctype != "" {
			r.Header.Set("Content-Type", ctype)
		}
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := send(http.MethodPost, "/api/v1/namespaces", "application/json", "", `{"metadata":{"name":"NS"}}`); w.Code != http.StatusCreated {
		t.Fatalf("namespace: %d %s", w.Code, w.Body)
	}
	for i, s := range upstream.Steps {
		w := send(s.Method, s.Path, s.ContentType, s.Accept, s.Body)
		var got any
		if err := json.Unmarshal([]byte(strings.ReplaceAll(w.Body.String(), ns, "NS")), &got); err != nil {
			t.Fatalf("step %d, %s %s: %d %s", i, s.Method, s.Path, w.Code, w.Body)
		}
		got, want := maskVolatile(got), maskVolatile(s.Answer)
		if w.Code != s.Code || !reflect.DeepEqual(got, want) {
			g, _ := json.MarshalIndent(got, "", " ")
			u, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("step %d, %s %s %s:\n got  %d %s\n want %d %s", i, s.Method, s.Path, s.Body, w.Code, g, s.Code, u)
		}
	}
}

var (
	tableAge   = regexp.MustCompile(`^([0-9]+[smhdy])+$`)
	timeInText = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
)

// maskVolatile masks in v what differs between two servers' answers to
// the same requests, as the testdata was masked: uids, resourceVersions,
// creation and managedFields times, a Table's ages, and credential ids;
// and times in error messages (a value shown with its managedFields).
func maskVolatile(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			_, isString := m.(string)
			switch {
			case isString && (k == "uid" || k == "resourceVersion" || k == "creationTimestamp" || k == "time"):
				v[k] = "<masked>"
			case isString && k == "message":
				v[k] = timeInText.ReplaceAllString(m.(string), "<time>") // a value shown in an error
			case k == "authentication.kubernetes.io/credential-id":
				v[k] = []any{"<masked>"}
			case k == "cells":
				cells, _ := m.([]any)
				for i, c := range cells {
					if s, ok := c.(string); ok && tableAge.MatchString(s) {
						cells[i] = "<age>"
					}
				}
			default:
				v[k] = maskVolatile(m)
			}
		}
	case []any:
		for i, m := range v {
			v[i] = maskVolatile(m)
		}
	}
	return v
}

// A rules review lists everything, as kplane authorizes every
// authenticated request: one rule for all resources and one for all
// non-resource URLs. Upstream also lists the rules of its bootstrap roles
// (system:basic-user, system:discovery, system:public-info-viewer),
// which kplane does not have.
func TestRulesReviewListsEverything(t *testing.T) {
	h := newInProcess(t)
	r := httptest.NewRequest(http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", strings.NewReader(`{"spec":{"namespace":"default"}}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	want := `{"kind":"SelfSubjectRulesReview","apiVersion":"authorization.k8s.io/v1","metadata":{},"spec":{},"status":{` +
		`"resourceRules":[{"verbs":["*"],"apiGroups":["*"],"resources":["*"]}],"nonResourceRules":[{"verbs":["*"],"nonResourceURLs":["*"]}],"incomplete":false}}`
	var got, exp any
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != http.StatusCreated {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if err := json.Unmarshal([]byte(want), &exp); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, exp) {
		t.Fatalf("got  %s\nwant %s", w.Body, want)
	}
}

// The reviews are in discovery as v1.37.2 lists them (its entries for
// the three kplane serves): create only, no storage version hash.
func TestReviewsDiscovery(t *testing.T) {
	h := newInProcess(t)
	for path, want := range map[string]string{
		"/apis/authorization.k8s.io/v1": `[{"name":"selfsubjectaccessreviews","singularName":"selfsubjectaccessreview","namespaced":false,"kind":"SelfSubjectAccessReview","verbs":["create"]},` +
			`{"name":"selfsubjectrulesreviews","singularName":"selfsubjectrulesreview","namespaced":false,"kind":"SelfSubjectRulesReview","verbs":["create"]}]`,
		"/apis/authentication.k8s.io/v1": `[{"name":"selfsubjectreviews","singularName":"selfsubjectreview","namespaced":false,"kind":"SelfSubjectReview","verbs":["create"]}]`,
	} {
		var list struct{ Resources []any }
		if err := json.Unmarshal(get(t, h, path).Body.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		var exp []any
		if err := json.Unmarshal([]byte(want), &exp); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(list.Resources, exp) {
			g, _ := json.Marshal(list.Resources)
			t.Errorf("%s:\n got  %s\n want %s", path, g, want)
		}
	}
}
