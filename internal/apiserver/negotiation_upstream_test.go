package apiserver_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
)

// What a request accepts decides its answer as kube-apiserver v1.37.2's
// did. testdata/negotiation-kube-apiserver-v1.37.2.json holds 92 requests
// and upstream's answers, byte for byte:
//   - errors come in the form Accept names among JSON, YAML and protobuf,
//     on every route (a custom resource's in protobuf too), never as a
//     Table; when none is acceptable, in indented JSON;
//   - a client that accepts nothing the route produces gets 406 before
//     anything is read or written (a POST so refused creates nothing, a
//     GET of a missing object is 406, not 404), with go-restful's message
//     for built-in kinds (application/* is not enough there; a list's
//     route names its watch streams) and the handler's for custom
//     resources, in the error's own negotiated form;
//   - a custom resource's /scale comes in YAML when asked, and refuses
//     protobuf;
//   - a body in a media type other than JSON, YAML and (for built-in
//     kinds) protobuf is 415, naming the three: text/yaml,
//     application/x-yaml and */* too, and parameters that do not parse;
//   - discovery documents (/api, /apis, a group, a group version) come in
//     YAML and protobuf too, and 406 as a resource route's or a handler's
//     (a Table of them, application/* on /api/v1);
//   - a watch negotiated to YAML, which has no stream form, is 406 (no
//     fall back to a lower range), as is one that asks YAML as a stream.
//
// Answers that are objects (uids, times) are compared by code and
// Content-Type only.
func TestNegotiationAsKubeAPIServer(t *testing.T) {
	replayBytes(t, "testdata/negotiation-kube-apiserver-v1.37.2.json", 92)
}

// Patch bodies that are not what their type says fail as kube-apiserver
// v1.37.2's did, before the object is read (a missing one too):
// "invalid JSON patch" for a JSON, merge or strategic merge patch that is
// not JSON, whatever the field validation; "error encoding patch: ..."
// for an apply configuration that is not YAML, a /scale's too.
// testdata/patchbodies-kube-apiserver-v1.37.2.json holds 24 requests and
// upstream's answers, byte for byte.
func TestPatchBodiesAsKubeAPIServer(t *testing.T) {
	replayBytes(t, "testdata/patchbodies-kube-apiserver-v1.37.2.json", 24)
}

// replayBytes sends the requests of an upstream testdata file, in order,
// to a server with the built-in kinds and scalersCRD, and holds each
// answer to upstream's: its code, Content-Type and body byte for byte
// (code and Content-Type only for an object, whose uid and times differ).
// Namespace default holds ConfigMap "yes" and Scaler "s1", as upstream's
// did.
func replayBytes(t *testing.T, file string, min int) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Steps []struct {
			Method, Path, Accept, UserAgent, Body, RequestContentType string
			Code                                                      int
			ContentType                                               string
			Answer, AnswerBase64                                      string
			AnswerVolatile                                            bool
		}
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	if len(upstream.Steps) < min {
		t.Fatalf("%d steps", len(upstream.Steps))
	}
	do, h := newCustomResourcesHandler(t, scalersCRD)
	for _, setup := range []struct{ path, body string }{
		{"/api/v1/namespaces/default/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"yes"}}`},
		{"/apis/ex.com/v1/namespaces/default/scalers", `{"apiVersion":"ex.com/v1","kind":"Scaler","metadata":{"name":"s1"},"spec":{"replicas":2}}`},
	} {
		if w := do(http.MethodPost, setup.path, setup.body); w.Code != http.StatusCreated {
			t.Fatalf("POST %s: %d %s", setup.path, w.Code, w.Body)
		}
	}
	for i, s := range upstream.Steps {
		r := httptest.NewRequest(s.Method, s.Path, strings.NewReader(s.Body))
		r.Header.Set("User-Agent", s.UserAgent)
		if s.Accept != "" {
			r.Header.Set("Accept", s.Accept)
		}
		if s.RequestContentType != "" {
			r.Header.Set("Content-Type", s.RequestContentType)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		want := []byte(s.Answer)
		if s.AnswerBase64 != "" {
			if want, err = base64.StdEncoding.DecodeString(s.AnswerBase64); err != nil {
				t.Fatal(err)
			}
		}
		ct := w.Header().Get("Content-Type")
		if w.Code != s.Code || ct != s.ContentType || !s.AnswerVolatile && !bytes.Equal(w.Body.Bytes(), want) {
			t.Errorf("step %d, %s %s, Accept %q:\n got  %d %s %q\n want %d %s %q", i, s.Method, s.Path, s.Accept, w.Code, ct, w.Body, s.Code, s.ContentType, want)
		}
	}
}

// scalersCRD defines ex.com/v1 Scaler with a /scale subresource.
const scalersCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"scalers.ex.com"},
"spec":{"group":"ex.com","names":{"kind":"Scaler","plural":"scalers"},"scope":"Namespaced",
"versions":[{"name":"v1","served":true,"storage":true,"subresources":{"scale":{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas"}},
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// An error that says when to retry sets Retry-After, as upstream's: a
// read at a resourceVersion the server has not reached (504, retry after
// 1 s, which client-go's reflector honours).
func TestErrorRetryAfter(t *testing.T) {
	h := newInProcess(t)
	for _, accept := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps?resourceVersion=999999&resourceVersionMatch=NotOlderThan", nil)
		r.Header.Set("Accept", accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusGatewayTimeout || w.Header().Get("Retry-After") != "1" || w.Header().Get("Content-Type") != accept {
			t.Errorf("Accept %s: %d, Retry-After %q, Content-Type %q; want 504, 1, %s", accept, w.Code, w.Header().Get("Retry-After"), w.Header().Get("Content-Type"), accept)
		}
	}
}

// Refusals before routing (a bad token's 401) are negotiated as every
// error is: kube-apiserver v1.37.2's answers to the same request.
func TestRefusalsNegotiatedAsKubeAPIServer(t *testing.T) {
	pb, _ := base64.StdEncoding.DecodeString("azhzAAoMCgJ2MRIGU3RhdHVzEjAKBgoAEgAaABIHRmFpbHVyZRoMVW5hdXRob3JpemVkIgxVbmF1dGhvcml6ZWQwkQMaACIA")
	h := newInProcess(t)
	for _, c := range []struct{ accept, contentType, answer string }{
		{"application/yaml", "application/yaml", "apiVersion: v1\ncode: 401\nkind: Status\nmessage: Unauthorized\nmetadata: {}\nreason: Unauthorized\nstatus: Failure\n"},
		{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf", string(pb)},
		{"application/xml", "application/json", "{\n  \"kind\": \"Status\",\n  \"apiVersion\": \"v1\",\n  \"metadata\": {},\n  \"status\": \"Failure\",\n  \"message\": \"Unauthorized\",\n  \"reason\": \"Unauthorized\",\n  \"code\": 401\n}"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces", nil)
		r.Header.Set("User-Agent", "kubectl/v1.37.2")
		r.Header.Set("Authorization", "Bearer bad.token.x")
		r.Header.Set("Accept", c.accept)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized || w.Header().Get("Content-Type") != c.contentType || w.Body.String() != c.answer {
			t.Errorf("Accept %s: %d %s %q; want 401 %s %q", c.accept, w.Code, w.Header().Get("Content-Type"), w.Body, c.contentType, c.answer)
		}
	}
}

// A path that is not clean (an empty segment, "." or "..") is answered
// as kube-apiserver v1.37.2 answered the same requests, never with the
// redirect Go's mux would send (a 307 that a client follows with the same
// method and body): its go-restful routes (/api/..., a built-in group's
// /apis/<group>/...) serve the path with trailing slashes collapsed and
// otherwise answer the generic 404 Status (negotiated); every other path
// gets the plain-text 404.
func TestUncleanPathsAsKubeAPIServer(t *testing.T) {
	do, h := newCustomResourcesHandler(t, scalersCRD)
	if w := do(http.MethodPost, "/api/v1/namespaces/default/configmaps", `{"metadata":{"name":"yes"}}`); w.Code != http.StatusCreated {
		t.Fatalf("ConfigMap: %d %s", w.Code, w.Body)
	}
	const (
		text     = "404 page not found\n"
		status   = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}` + "\n"
		yaml     = "apiVersion: v1\ncode: 404\ndetails: {}\nkind: Status\nmessage: the server could not find the requested resource\nmetadata: {}\nreason: NotFound\nstatus: Failure\n"
		cm       = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"slash"}}`
		required = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Namespace parameter required.","reason":"BadRequest","code":400}` + "\n"
	)
	for _, c := range []struct {
		method, path, accept, body string
		code                       int
		contentType, answer        string // answer "": not compared (an object)
	}{
		{"GET", "//api/v1/namespaces/default/configmaps/yes", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "/api/v1//namespaces/default/configmaps/yes", "", "", 404, "application/json", status},
		{"GET", "/api/v1//namespaces/default/configmaps/yes", "application/yaml", "", 404, "application/yaml", yaml},
		{"GET", "/api/v1/namespaces/default/configmaps/./yes", "", "", 404, "application/json", status},
		{"GET", "/api/v1/namespaces/default/configmaps/../configmaps/yes", "", "", 404, "application/json", status},
		{"GET", "/api/v1/namespaces/default/configmaps/yes/.", "", "", 404, "application/json", status},
		{"GET", "/./api/v1/namespaces/default/configmaps/yes", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "/apis//ex.com/v1/namespaces/default/scalers/s1", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "/apis/ex.com/v1/namespaces/default//scalers/s1", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "/apis/ex.com//v1/namespaces/default/scalers", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "/apis/rbac.authorization.k8s.io/v1//clusterroles", "", "", 404, "application/json", status},
		{"GET", "/apis/rbac.authorization.k8s.io//v1/clusterroles", "", "", 404, "application/json", status},
		{"GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases//x", "", "", 404, "application/json", status},
		{"GET", "/api//v1", "", "", 404, "application/json", status},
		{"GET", "/apis//", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "//version", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "//healthz", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "/healthz//", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "//metrics", "", "", 404, "text/plain; charset=utf-8", text},
		{"GET", "/openapi//v2", "", "", 404, "text/plain; charset=utf-8", text},
		{"POST", "//api/v1/namespaces/default/configmaps", "", cm, 404, "text/plain; charset=utf-8", text},
		{"POST", "/api/v1//namespaces/default/configmaps", "", cm, 404, "application/json", status},
		{"GET", "/api/v1/namespaces/default/configmaps/slash", "", "", 404, "application/json", ""}, // neither POST created it
		{"GET", "/api/v1/namespaces/default/configmaps/yes//", "", "", 200, "application/json", ""},
		{"GET", "/api/v1/namespaces/default/configmaps//", "", "", 200, "application/json", ""},
		{"GET", "/api/v1//", "", "", 200, "application/json", ""},
		{"GET", "/api//", "", "", 200, "application/json", ""},
		// An empty namespace: across namespaces for a GET of the
		// collection, 400 on an object and on a built-in kind's DELETE of
		// the collection; a POST creates in no namespace, which fails
		// validation, and other methods are 405; a custom resource's
		// collection takes none of them.
		{"GET", "/api/v1/namespaces//configmaps", "", "", 200, "application/json", ""},
		{"GET", "/apis/ex.com/v1/namespaces//scalers", "", "", 200, "application/json", ""},
		{"GET", "/api/v1/namespaces//configmaps/yes", "", "", 400, "application/json", required},
		{"DELETE", "/api/v1/namespaces//configmaps/yes", "", "", 400, "application/json", required},
		{"GET", "/api/v1/namespaces/default/configmaps/yes", "", "", 200, "application/json", ""}, // not deleted
		{"POST", "/api/v1/namespaces//configmaps", "", cm, 422, "application/json", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ConfigMap \"slash\" is invalid: metadata.namespace: Required value","reason":"Invalid","details":{"name":"slash","kind":"ConfigMap","causes":[{"reason":"FieldValueRequired","message":"Required value","field":"metadata.namespace"}]},"code":422}` + "\n"},
		{"POST", "/api/v1/namespaces//configmaps", "", `{"metadata":{"name":"slash","namespace":"default"}}`, 422, "application/json", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ConfigMap \"slash\" is invalid: metadata.namespace: Required value","reason":"Invalid","details":{"name":"slash","kind":"ConfigMap","causes":[{"reason":"FieldValueRequired","message":"Required value","field":"metadata.namespace"}]},"code":422}` + "\n"},
		{"DELETE", "/api/v1/namespaces//configmaps", "", "", 400, "application/json", required},
		{"GET", "/api/v1/namespaces/default/configmaps/yes", "", "", 200, "application/json", ""}, // not deleted
		{"PUT", "/api/v1/namespaces//configmaps", "", "{}", 405, "application/json", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405}` + "\n"},
		{"POST", "/apis/ex.com/v1/namespaces//scalers", "", "{}", 404, "text/plain; charset=utf-8", text},
		{"POST", "/apis/authorization.k8s.io/v1/namespaces//localsubjectaccessreviews", "",
			`{"apiVersion":"authorization.k8s.io/v1","kind":"LocalSubjectAccessReview","spec":{"user":"x","resourceAttributes":{"verb":"get","resource":"pods"}}}`,
			400, "application/json", `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"namespace is required on this type: ","reason":"BadRequest","code":400}` + "\n"},
	} {
		r := httptest.NewRequest(c.method, "/", strings.NewReader(c.body))
		r.URL.Path = c.path // as sent: httptest would not parse "//api/..." as a path
		r.RequestURI = c.path
		r.Header.Set("User-Agent", "kubectl/v1.37.2")
		r.Header.Set("Content-Type", "application/json")
		if c.accept != "" {
			r.Header.Set("Accept", c.accept)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != c.code || w.Header().Get("Content-Type") != c.contentType || c.answer != "" && w.Body.String() != c.answer {
			t.Errorf("%s %s: %d %s %q; want %d %s %q", c.method, c.path, w.Code, w.Header().Get("Content-Type"), w.Body, c.code, c.contentType, c.answer)
		}
	}
}

// The Success Status of a delete comes in the form Accept negotiated, as
// kube-apiserver v1.37.2's did for the same deletes (byte for byte, the
// uid aside): YAML, protobuf (for a protobuf metadata request too), JSON
// for a Table or JSON metadata request. Before, it was always JSON.
func TestDeleteStatusNegotiatedAsKubeAPIServer(t *testing.T) {
	do, h := newCustomResourcesHandler(t, scalersCRD)
	const cms = "/api/v1/namespaces/default/configmaps"
	for _, c := range []struct {
		accept, contentType, want string // want: with UID for the uid
	}{
		{"application/yaml", "application/yaml",
			"apiVersion: v1\ndetails:\n  kind: configmaps\n  name: e1\n  uid: UID\nkind: Status\nmetadata: {}\nstatus: Success\n"},
		{"application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf",
			"k8s\x00\n\x0c\n\x02v1\x12\x06Status\x12S\n\x06\n\x00\x12\x00\x1a\x00\x12\x07Success\x1a\x00\"\x00*:\n\x02e1\x12\x00\x1a\nconfigmaps(\x002$UID0\x00\x1a\x00\"\x00"},
		{"application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;v=v1;g=meta.k8s.io", "application/vnd.kubernetes.protobuf",
			"k8s\x00\n\x0c\n\x02v1\x12\x06Status\x12S\n\x06\n\x00\x12\x00\x1a\x00\x12\x07Success\x1a\x00\"\x00*:\n\x02e1\x12\x00\x1a\nconfigmaps(\x002$UID0\x00\x1a\x00\"\x00"},
		{"application/json;as=Table;v=v1;g=meta.k8s.io", "application/json",
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","details":{"name":"e1","kind":"configmaps","uid":"UID"}}` + "\n"},
	} {
		w := do(http.MethodPost, cms, `{"metadata":{"name":"e1"}}`)
		var created struct{ Metadata struct{ UID string } }
		if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil || w.Code != http.StatusCreated {
			t.Fatalf("create: %d %s", w.Code, w.Body)
		}
		r := httptest.NewRequest(http.MethodDelete, cms+"/e1", nil)
		r.Header.Set("Accept", c.accept)
		r.Header.Set("User-Agent", "kubectl/v1.37.2")
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		want := strings.Replace(c.want, "UID", created.Metadata.UID, 1)
		if ct := w.Header().Get("Content-Type"); w.Code != http.StatusOK || ct != c.contentType || w.Body.String() != want {
			t.Errorf("Accept %s: %d %s %q\nwant 200 %s %q", c.accept, w.Code, ct, w.Body, c.contentType, want)
		}
	}
}
