package webhook_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/webhook"
)

// writeFiles writes files (name → content) into the directory dir under
// root, each at once (written aside, then renamed), and returns it.
func writeFiles(t *testing.T, root, dir string, files map[string]string) string {
	t.Helper()
	d := filepath.Join(root, dir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		tmp := filepath.Join(d, name+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(d, name)); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// staticWebhook is a webhook of a static configuration calling srv at
// path for creates of resources in groups.
func staticWebhook(srv *server, name, path, groups, resources, extra string) string {
	return `
- name: ` + name + `
  clientConfig: {url: "` + srv.URL + path + `", caBundle: "` + base64.StdEncoding.EncodeToString([]byte(srv.caBundle())) + `"}
  rules: [{operations: [CREATE], apiGroups: ` + groups + `, apiVersions: [v1], resources: ` + resources + `}]
  sideEffects: None
  admissionReviewVersions: [v1]` + extra
}

// staticDirs writes the four plugins' directories of
// TestStaticManifests.
// readStatic is a setup for newEnvWith that reads the static manifests
// of the directories dirs returns.
func readStatic(t *testing.T, dirs func(*server) webhook.StaticDirs) func(*webhook.Webhooks, *server) {
	return func(w *webhook.Webhooks, srv *server) {
		if err := w.LoadStatic(dirs(srv)); err != nil {
			t.Fatal(err)
		}
	}
}

func staticDirs(t *testing.T) func(*server) webhook.StaticDirs {
	root := t.TempDir()
	return func(srv *server) webhook.StaticDirs {
		return webhook.StaticDirs{
			ValidatingWebhooks: writeFiles(t, root, "vwh", map[string]string{
				"hooks.yaml": `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: guard.static.k8s.io}
webhooks:` + staticWebhook(srv, "watch.example.com", "/allow", `["", admissionregistration.k8s.io]`, `[configmaps, validatingwebhookconfigurations, validatingadmissionpolicies]`, "") +
					staticWebhook(srv, "guard.example.com", "/deny", `["", admissionregistration.k8s.io]`, `[configmaps, validatingwebhookconfigurations]`, `
  objectSelector: {matchLabels: {deny: "yes"}}`),
				// Neither read nor a reason to fail.
				"README.md":  "not a manifest",
				"empty.yaml": "",
			}),
			MutatingWebhooks: writeFiles(t, root, "mwh", map[string]string{
				"hooks.json": `{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfigurationList", "items": [
					{"metadata": {"name": "stamp.static.k8s.io"}, "webhooks": [{"name": "stamp.example.com",
						"clientConfig": {"url": "` + srv.URL + `/label-static", "caBundle": "` + base64.StdEncoding.EncodeToString([]byte(srv.caBundle())) + `"},
						"rules": [{"operations": ["CREATE"], "apiGroups": ["", "admissionregistration.k8s.io"], "apiVersions": ["v1"], "resources": ["configmaps", "mutatingwebhookconfigurations"]}],
						"sideEffects": "None", "admissionReviewVersions": ["v1"]}]}]}`,
			}),
			ValidatingPolicies: writeFiles(t, root, "vap", map[string]string{
				"policy.yaml": `
# The policy, then its binding.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-forbidden.static.k8s.io}
spec:
  matchConstraints:
    resourceRules:
    - {operations: [CREATE, UPDATE], apiGroups: ["", admissionregistration.k8s.io], apiVersions: [v1], resources: [configmaps, validatingadmissionpolicies, validatingwebhookconfigurations]}
  validations:
  - expression: "!object.metadata.name.startsWith('forbidden')"
    message: static says no
---
# only a comment
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-forbidden.static.k8s.io}
spec: {policyName: no-forbidden.static.k8s.io, validationActions: [Deny]}
`,
			}),
			MutatingPolicies: writeFiles(t, root, "map", map[string]string{
				"list.yml": `
apiVersion: v1
kind: List
items:
- apiVersion: admissionregistration.k8s.io/v1
  kind: MutatingAdmissionPolicyBinding
  metadata: {name: mark.static.k8s.io}
  spec: {policyName: mark.static.k8s.io}
- apiVersion: admissionregistration.k8s.io/v1
  kind: MutatingAdmissionPolicy
  metadata: {name: mark.static.k8s.io}
  spec:
    matchConstraints:
      resourceRules:
      - {operations: [CREATE], apiGroups: ["", admissionregistration.k8s.io], apiVersions: [v1], resources: [configmaps, mutatingadmissionpolicies]}
    reinvocationPolicy: Never
    mutations:
    - patchType: ApplyConfiguration
      applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'marked': 'yes'}}}"}
`,
			}),
		}
	}
}

// admissionObject is an admissionregistration.k8s.io/v1 object of kind.
func admissionObject(kind, name string, fields map[string]any) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind}}
	for k, v := range fields {
		obj.Object[k] = v
	}
	obj.SetName(name)
	return obj
}

func (e *env) createAdmission(resource string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return e.res("admissionregistration.k8s.io", resource).Create(e.ctx, "v1", "", obj, registry.WriteOptions{FieldManager: "test"})
}

// Configurations read from files apply before the API's, and to writes
// of the admission configurations, which the API's webhooks never see
// (and the API's policies see only for webhook configurations), as in
// kube-apiserver v1.37.2 given the same files and requests.
func TestStaticManifests(t *testing.T) {
	e := newEnvWith(t, readStatic(t, staticDirs(t)))
	e.configure("Mutating", "api", map[string]any{"name": "api.example.com", "path": "/label-api"})
	e.configure("Validating", "api-all", map[string]any{"name": "all.example.com", "path": "/deny",
		"rules": []any{map[string]any{"operations": []any{"*"}, "apiGroups": []any{"admissionregistration.k8s.io"}, "apiVersions": []any{"*"}, "resources": []any{"*"}}},
	})

	// The mutating policy, the static webhook, then the API's.
	cm, err := e.createConfigMap("plain", nil, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := cm.GetLabels(); len(l) != 3 || l["marked"] != "yes" || l["static"] != "yes" || l["api"] != "yes" {
		t.Errorf("labels %v, want marked, static and api", l)
	}
	// (The static webhook also labelled the configuration "api".)
	if got := e.srv.got("/label-static"); len(got) != 2 || got[1].Request.Name != "plain" || decode(t, got[1].Request.Object.Raw).GetLabels()["marked"] != "yes" {
		t.Errorf("the static webhook did not see the policy's label first: %d calls", len(got))
	}
	if got := e.srv.got("/label-api"); len(got) != 1 || decode(t, got[0].Request.Object.Raw).GetLabels()["static"] != "yes" {
		t.Errorf("the API's webhook did not see the static one's label: %d calls", len(got))
	}
	_, err = e.createConfigMap("forbidden-1", nil, registry.WriteOptions{})
	refusal(t, err, 422, metav1.StatusReasonInvalid, "forbidden-1",
		"ValidatingAdmissionPolicy 'no-forbidden.static.k8s.io' with binding 'no-forbidden.static.k8s.io' denied request: static says no")
	if _, err := e.createConfigMap("held", map[string]string{"deny": "yes"}, registry.WriteOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `admission webhook "guard.example.com" denied the request: no way`) {
		t.Errorf("create of a denied configmap: %v", err)
	}

	// The files' webhooks and policies see the admission configurations;
	// the API's validating webhook, which names them all, does not.
	allowed := len(e.srv.got("/allow"))
	vwc, err := e.createAdmission("validatingwebhookconfigurations", admissionObject("ValidatingWebhookConfiguration", "fine", nil))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.srv.got("/allow")); n != allowed+1 {
		t.Errorf("the static validating webhook was called %d times for a webhook configuration, want 1", n-allowed)
	}
	_, err = e.createAdmission("validatingwebhookconfigurations", admissionObject("ValidatingWebhookConfiguration", "forbidden-vwc", nil))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "static says no") {
		t.Errorf("create of a webhook configuration the static policy refuses: %v", err)
	}
	held := admissionObject("ValidatingWebhookConfiguration", "held", nil)
	held.SetLabels(map[string]string{"deny": "yes"})
	if _, err := e.createAdmission("validatingwebhookconfigurations", held); !apierrors.IsForbidden(err) {
		t.Errorf("create of a webhook configuration the static webhook refuses: %v", err)
	}
	mwc, err := e.createAdmission("mutatingwebhookconfigurations", admissionObject("MutatingWebhookConfiguration", "fine", nil))
	if err != nil || mwc.GetLabels()["static"] != "yes" {
		t.Errorf("create of a mutating webhook configuration: %v, labels %v", err, mwc.GetLabels())
	}
	mapObj := admissionObject("MutatingAdmissionPolicy", "fine", map[string]any{"spec": map[string]any{
		"matchConstraints":   map[string]any{"resourceRules": []any{map[string]any{"operations": []any{"CREATE"}, "apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"secrets"}}}},
		"reinvocationPolicy": "Never",
		"mutations":          []any{jsonPatch(`[JSONPatch{op: "test", path: "/kind", value: "Secret"}]`)},
	}})
	if got, err := e.createAdmission("mutatingadmissionpolicies", mapObj); err != nil || got.GetLabels()["marked"] != "yes" {
		t.Errorf("create of a mutating policy: %v, labels %v", err, got.GetLabels())
	}
	if n := len(e.srv.got("/deny")); n != 2 {
		t.Errorf("/deny was called %d times, want 2 (the static webhook's two refusals; never the API's)", n)
	}
	if vwc.GetLabels() != nil {
		t.Errorf("webhook configuration labelled %v", vwc.GetLabels())
	}

	// The API's policies apply to webhook configurations, not to
	// policies.
	e.policy("api-deny", map[string]any{
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{
			"operations": []any{"CREATE"}, "apiGroups": []any{"admissionregistration.k8s.io"}, "apiVersions": []any{"v1"},
			"resources": []any{"mutatingwebhookconfigurations", "validatingadmissionpolicies"},
		}}},
		"validations": []any{map[string]any{"expression": "!object.metadata.name.startsWith('apideny')", "message": "api says no"}},
	})
	e.binding("api-deny", "api-deny", []any{"Deny"}, nil)
	_, err = e.createAdmission("mutatingwebhookconfigurations", admissionObject("MutatingWebhookConfiguration", "apideny-mwc", nil))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'api-deny' with binding 'api-deny' denied request: api says no") {
		t.Errorf("create of a webhook configuration the API's policy refuses: %v", err)
	}
	vap := admissionObject("ValidatingAdmissionPolicy", "apideny-vap", map[string]any{"spec": map[string]any{
		"matchConstraints": map[string]any{"resourceRules": []any{map[string]any{"operations": []any{"CREATE"}, "apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"secrets"}}}},
		"validations":      []any{map[string]any{"expression": "true"}},
	}})
	if _, err := e.createAdmission("validatingadmissionpolicies", vap); err != nil {
		t.Errorf("the API's policy applied to a policy: %v", err)
	}
}

// Without files, writes of the admission configurations are asked
// about only when an API policy may apply: the registry does not call
// admission for policies at all.
func TestAdmitsAdmissionConfigurations(t *testing.T) {
	e := newEnv(t)
	kind := func(resource string) *registry.Kind { return e.res("admissionregistration.k8s.io", resource).Kind() }
	e.configure("Validating", "any", map[string]any{"name": "any.example.com", "path": "/deny"})
	for _, r := range []string{"validatingwebhookconfigurations", "mutatingadmissionpolicies"} {
		if e.w.Admits(kind(r)) {
			t.Errorf("%s admitted with only an API webhook", r)
		}
	}
	e.policy("p", map[string]any{"validations": []any{map[string]any{"expression": "true"}}})
	e.binding("p", "p", []any{"Deny"}, nil)
	if !e.w.Admits(kind("validatingwebhookconfigurations")) || e.w.Admits(kind("validatingadmissionpolicies")) {
		t.Errorf("with an API policy: webhook configurations admitted %v, policies %v; want true, false",
			e.w.Admits(kind("validatingwebhookconfigurations")), e.w.Admits(kind("validatingadmissionpolicies")))
	}
}

// loadStatic is LoadStatic's error for dirs on a fresh registry.
func loadStatic(t *testing.T, dirs webhook.StaticDirs) error {
	t.Helper()
	var w *webhook.Webhooks
	newRegistry(t, func(reg *registry.Registry) []*registry.Kind {
		w = &webhook.Webhooks{Registry: reg}
		return w.Install(core.Kinds())
	})
	return w.LoadStatic(dirs)
}

// Files kube-apiserver refuses to start with stop kplane with its words.
func TestStaticManifestsRefused(t *testing.T) {
	root := t.TempDir()
	hook := func(name, webhook string) string {
		return "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: " + name + "}\nwebhooks:\n" + webhook
	}
	okHook := `- {name: a.example.com, clientConfig: {url: "https://127.0.0.1:1/x"}, sideEffects: None, admissionReviewVersions: [v1]}`
	policy := func(name, extra string) string {
		return "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: " + name + "}\nspec:\n  matchConstraints: {resourceRules: [{operations: [CREATE], apiGroups: [''], apiVersions: [v1], resources: [secrets]}]}\n  validations: [{expression: 'true'}]\n" + extra
	}
	binding := func(name, spec string) string {
		return "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: " + name + "}\nspec: " + spec + "\n"
	}
	for _, c := range []struct {
		name     string
		policies bool
		files    map[string]string
		want     string // after `failed to load static … manifests from "DIR": `, FILE the file
	}{
		{"suffix", false, map[string]string{"x.yaml": hook("nosuffix", okHook)},
			`error loading FILE: "nosuffix" in file "FILE" must have a name ending with ".static.k8s.io"`},
		{"duplicate", false, map[string]string{"x.yaml": hook("a.static.k8s.io", okHook) + "\n---\n" + hook("a.static.k8s.io", okHook)},
			`error loading FILE: duplicate name "a.static.k8s.io" found in file "FILE" (previously seen in "FILE")`},
		{"service", false, map[string]string{"x.yaml": hook("svc.static.k8s.io", `- {name: a.example.com, clientConfig: {service: {name: s, namespace: default}}, sideEffects: None, admissionReviewVersions: [v1]}`)},
			`error loading FILE: webhook "a.example.com" in "svc.static.k8s.io" (file "FILE"): clientConfig.service is not supported for static manifests; use clientConfig.url instead`},
		{"unknown field", false, map[string]string{"x.yaml": hook("unk.static.k8s.io", okHook) + "\nbogus: 1"},
			`error loading FILE: strict decoding error: unknown field "bogus"`},
		{"invalid", false, map[string]string{"x.yaml": hook("inval.static.k8s.io", `- {name: nodots, clientConfig: {url: "http://127.0.0.1:1/x"}, sideEffects: Some, admissionReviewVersions: [v1]}`)},
			`error loading FILE: ValidatingWebhookConfiguration "inval.static.k8s.io": [webhooks[0].name: Invalid value: "nodots": should be a domain with at least three segments separated by dots, webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun", webhooks[0].clientConfig.url: Invalid value: "http": 'https' is the only allowed URL scheme; desired format: https://host[/path]]`},
		{"other kind", false, map[string]string{"x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}"},
			`error loading FILE: unsupported resource type v1, Kind=ConfigMap: the ValidatingAdmissionWebhook plugin reads admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration`},
		{"no kind", false, map[string]string{"x.json": `{"metadata": {"name": "a.static.k8s.io"}}`},
			`error loading FILE: apiVersion and kind are required`},
		{"bad yaml", false, map[string]string{"x.yaml": "webhooks: ["},
			`error loading FILE: yaml: line 1: did not find expected node content`},
		{"param kind", true, map[string]string{"x.yaml": policy("p.static.k8s.io", "  paramKind: {apiVersion: v1, kind: ConfigMap}")},
			`error loading FILE: ValidatingAdmissionPolicy "p.static.k8s.io": spec.paramKind is not supported for static manifests`},
		{"param ref", true, map[string]string{"x.yaml": binding("b.static.k8s.io", "{policyName: p.static.k8s.io, validationActions: [Deny], paramRef: {name: x, parameterNotFoundAction: Deny}}")},
			`error loading FILE: binding "b.static.k8s.io": spec.paramRef is not supported for static manifests`},
		{"policy suffix", true, map[string]string{"x.yaml": binding("b.static.k8s.io", "{policyName: p, validationActions: [Deny]}")},
			`error loading FILE: binding "b.static.k8s.io": spec.policyName "p" must end with ".static.k8s.io"`},
		{"missing policy", true, map[string]string{"x.yaml": binding("b.static.k8s.io", "{policyName: missing.static.k8s.io, validationActions: [Deny]}")},
			`binding "b.static.k8s.io" references policy "missing.static.k8s.io" which does not exist in the manifest directory`},
	} {
		dir := writeFiles(t, root, strings.ReplaceAll(c.name, " ", "-"), c.files)
		var file string
		for name := range c.files {
			file = filepath.Join(dir, name)
		}
		dirs, what, plugin := webhook.StaticDirs{ValidatingWebhooks: dir}, "webhook", "ValidatingAdmissionWebhook"
		if c.policies {
			dirs, what, plugin = webhook.StaticDirs{ValidatingPolicies: dir}, "policy", "ValidatingAdmissionPolicy"
		}
		want := `admission plugin "` + plugin + `": failed to load static ` + what + ` manifests from "` + dir + `": ` + strings.ReplaceAll(c.want, "FILE", file)
		if err := loadStatic(t, dirs); err == nil || err.Error() != want {
			t.Errorf("%s: got %v\nwant %s", c.name, err, want)
		}
	}
	if err := loadStatic(t, webhook.StaticDirs{MutatingPolicies: filepath.Join(root, "gone")}); err == nil || !strings.Contains(err.Error(), "failed to read manifest directory") {
		t.Errorf("a missing directory: %v", err)
	}
}

// WatchStatic applies what the files say once they change; files that
// do not load leave the configurations in force, and count as a failed
// reload.
func TestStaticManifestsReload(t *testing.T) {
	root := t.TempDir()
	policy := func(prefix string) string {
		return `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: prefix.static.k8s.io}
spec:
  matchConstraints: {resourceRules: [{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]}
  validations: [{expression: "!object.metadata.name.startsWith('` + prefix + `')", message: "not ` + prefix + `"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: prefix.static.k8s.io}
spec: {policyName: prefix.static.k8s.io, validationActions: [Deny]}
`
	}
	dir := writeFiles(t, root, "vap", map[string]string{"p.yaml": policy("red")})
	e := newEnvWith(t, func(w *webhook.Webhooks, srv *server) {
		w.APIServerID = "test-server"
		// A short interval, for a file system without notifications.
		w.StaticReloadInterval = 50 * time.Millisecond
		readStatic(t, func(*server) webhook.StaticDirs { return webhook.StaticDirs{ValidatingPolicies: dir} })(w, srv)
	})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.w.WatchStatic(ctx)
	}()
	t.Cleanup(func() { stop(); <-done })
	// refuses reports whether a configmap named name is refused now.
	refuses := func(name string) bool {
		_, err := e.createConfigMap(name+"-", nil, registry.WriteOptions{DryRun: true})
		return apierrors.IsInvalid(err)
	}
	eventually := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not after 10s", what)
			}
		}
	}
	if !refuses("red") || refuses("blue") {
		t.Fatal("the first reading is not in force")
	}
	writeFiles(t, root, "vap", map[string]string{"p.yaml": policy("blue")})
	eventually("the changed policy applies", func() bool { return refuses("blue") && !refuses("red") })

	counts := func() (success, failure uint64) {
		reloads, _, _ := e.w.ManifestMetrics()
		for _, s := range reloads {
			switch s.Labels[5] {
			case "success":
				success = s.Total()
			case "failure":
				failure = s.Total()
			}
		}
		return success, failure
	}
	if s, f := counts(); s != 2 || f != 0 {
		t.Errorf("reloads: %d succeeded, %d failed; want 2 and 0", s, f)
	}
	// A file that does not load: the policy in force stays.
	writeFiles(t, root, "vap", map[string]string{"q.yaml": "apiVersion: v1\nkind: Secret"})
	eventually("the failed reload is counted", func() bool { _, f := counts(); return f > 0 })
	if !refuses("blue") {
		t.Error("a failed reload dropped the policy in force")
	}
	if err := os.Remove(filepath.Join(dir, "q.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, root, "vap", map[string]string{"p.yaml": policy("green")})
	eventually("the fixed files apply", func() bool { return refuses("green") && !refuses("blue") })

	// A mounted ConfigMap's update: the files are links into a
	// directory that ..data names, which is swapped by a rename.
	if err := os.Remove(filepath.Join(dir, "p.yaml")); err != nil {
		t.Fatal(err)
	}
	mount := func(version, prefix string) {
		t.Helper()
		writeFiles(t, dir, version, map[string]string{"p.yaml": policy(prefix)})
		if err := os.Symlink(version, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	mount("..v1", "cyan")
	if err := os.Symlink(filepath.Join("..data", "p.yaml"), filepath.Join(dir, "p.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually("the mounted files apply", func() bool { return refuses("cyan") && !refuses("green") })
	mount("..v2", "magenta")
	eventually("the swapped mount applies", func() bool { return refuses("magenta") && !refuses("cyan") })

	_, last, info := e.w.ManifestMetrics()
	id := fmt.Sprintf("sha256:%x", sha256.Sum256([]byte("test-server")))
	if len(info) != 1 || info[0].Labels[1] != id || info[0].Labels[5] != "ValidatingAdmissionPolicy" || !strings.HasPrefix(info[0].Labels[3], "sha256:") || info[0].Value != 1 {
		t.Errorf("last_config_info %+v", info)
	}
	if len(last) != 2 || last[0].Value <= 0 {
		t.Errorf("last reload times %+v", last)
	}
}
