package e2e

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// Writes are refused in kube-apiserver v1.37.2's order and words. Its
// answers to 65 requests, sent in order to a namespace of a server with
// the Foo and Widget CRDs, are in testdata/writes-kube-apiserver-v1.37.2.json
// (uids, resourceVersions and times masked):
//   - a custom resource's body must name its kind and apiVersion (400);
//     another kind of its group version is refused by validation (422,
//     naming the kind sent), before any other check, and a patch may not
//     change either;
//   - a missing namespace is answered first (404), before the checks of
//     the object (the NamespaceLifecycle admission runs before
//     validation); a resourceVersion on a create is refused after them,
//     and not on a dry run;
//   - bodies that are not objects, in JSON and YAML;
//   - apply configurations of another type ("invalid object type: ..."),
//     through /scale once the object is found.
func TestWritesRefusedAsKubeAPIServer(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	installFooCRD(t, s)
	installWidgetCRD(t, s)
	data, err := os.ReadFile("testdata/writes-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var upstream struct {
		Steps []struct {
			Method, Path, ContentType, Body string
			Code                            int
			Answer                          any
		}
	}
	if err := json.Unmarshal(data, &upstream); err != nil {
		t.Fatal(err)
	}
	if len(upstream.Steps) < 65 {
		t.Fatalf("%d steps", len(upstream.Steps))
	}
	const ns = "writes"
	s.mustKubectl(t, "create", "namespace", ns)
	for i, st := range upstream.Steps {
		code, _, body := s.call(t, st.Method, strings.ReplaceAll(st.Path, "NS", ns), st.ContentType,
			[]byte(strings.ReplaceAll(st.Body, "NS", ns)), "User-Agent", "curl/8.5.0")
		var got any
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(body), ns, "NS")), &got); err != nil {
			t.Fatalf("step %d, %s %s: %d %s", i, st.Method, st.Path, code, body)
		}
		if code != st.Code || !reflect.DeepEqual(maskAnswer(got), maskAnswer(st.Answer)) {
			g, _ := json.MarshalIndent(got, "", " ")
			w, _ := json.MarshalIndent(st.Answer, "", " ")
			t.Errorf("step %d, %s %s %s:\n got  %d %s\n want %d %s", i, st.Method, st.Path, st.Body, code, g, st.Code, w)
		}
	}
}

var timeInMessage = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

// maskAnswer masks what differs between two servers' answers to the same
// requests, as the testdata was masked: uids, resourceVersions, creation
// and managedFields times, and times in messages.
func maskAnswer(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, m := range v {
			s, isString := m.(string)
			switch {
			case isString && (k == "uid" || k == "resourceVersion" || k == "creationTimestamp" || k == "time"):
				v[k] = "<masked>"
			case isString && k == "message":
				v[k] = timeInMessage.ReplaceAllString(s, "<time>")
			default:
				v[k] = maskAnswer(m)
			}
		}
	case []any:
		for i, m := range v {
			v[i] = maskAnswer(m)
		}
	}
	return v
}
