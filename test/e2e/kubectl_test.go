package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

const fooYAML = `apiVersion: webapp.my.domain/v1
kind: Foo
metadata:
  name: foo-sample
  namespace: default
spec:
  foo: bar
`

const conflictMsg = `Operation cannot be fulfilled on foos.webapp.my.domain "foo-sample": the object has been modified; please apply your changes to the latest version and try again`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func crdPath(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../examples/foo-operator/config/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// installFooCRD applies the Foo CRD with kubectl and waits until it is
// Established.
func installFooCRD(t *testing.T, s *server) {
	t.Helper()
	s.mustKubectl(t, "apply", "-f", crdPath(t))
	s.mustKubectl(t, "wait", "--for", "condition=established", "--timeout", "30s", "crd/foos.webapp.my.domain")
}

func TestKubectl(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		if out := s.mustKubectl(t, "get", "ns"); !regexp.MustCompile(`(?m)^default\s+Active\s+\d+s$`).MatchString(out) {
			t.Fatalf("kubectl get ns:\n%s", out)
		}
		installFooCRD(t, s)
		if out := s.mustKubectl(t, "apply", "-f", writeFile(t, "foo.yaml", fooYAML)); !strings.Contains(out, "foo.webapp.my.domain/foo-sample created") {
			t.Fatalf("apply: %s", out)
		}

		// get: a Table with the CRD's printer column, and no AGE, which
		// the CRD does not declare (kube-apiserver v1.37.2 prints the same).
		out := s.mustKubectl(t, "get", "foos")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 || !regexp.MustCompile(`^NAME\s+FOO$`).MatchString(lines[0]) ||
			!regexp.MustCompile(`^foo-sample\s+bar$`).MatchString(lines[1]) {
			t.Fatalf("kubectl get foos:\n%s", out)
		}

		// get -o yaml: the object as stored, with its system fields.
		yml := s.mustKubectl(t, "get", "foo", "foo-sample", "-o", "yaml")
		for _, want := range []string{"apiVersion: webapp.my.domain/v1", "kind: Foo", "generation: 1", "uid: ", "creationTimestamp: ", "foo: bar"} {
			if !strings.Contains(yml, want) {
				t.Fatalf("get -o yaml lacks %q:\n%s", want, yml)
			}
		}
		rv := regexp.MustCompile(`resourceVersion: "(\d+)"`).FindStringSubmatch(yml)
		if rv == nil {
			t.Fatalf("no resourceVersion in\n%s", yml)
		}

		// replace with the current resourceVersion works; replaying the
		// same (now stale) object prints seed 000's conflict.
		changed := strings.Replace(yml, "foo: bar", "foo: baz", 1)
		file := writeFile(t, "foo-rv.yaml", changed)
		s.mustKubectl(t, "replace", "-f", file)
		_, errOut, err := s.kubectl("replace", "-f", file)
		if err == nil || !strings.Contains(errOut, conflictMsg) {
			t.Fatalf("replace with a stale resourceVersion: err %v, stderr %q; want the conflict message", err, errOut)
		}
		if out := s.mustKubectl(t, "get", "foo", "foo-sample", "-o", "jsonpath={.spec.foo} {.metadata.generation}"); out != "baz 2" {
			t.Fatalf("after replace: spec.foo and generation %q, want \"baz 2\"", out)
		}

		// get --watch sees a new object, then its deletion.
		watch := exec.Command("kubectl", "--kubeconfig", s.kubeconfig, "get", "foos", "--watch", "--output-watch-events")
		stdout, err := watch.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		defer watch.Process.Kill()
		lines2 := make(chan string, 16)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines2 <- sc.Text()
			}
			close(lines2)
		}()
		expect := func(want ...string) {
			t.Helper()
			select {
			case l := <-lines2:
				// Table rows: EVENT NAME FOO AGE; compare the first two.
				if f := strings.Fields(l); len(f) >= 2 {
					l = f[0] + " " + f[1]
				}
				if l != want[0] && (len(want) == 1 || l != want[1]) {
					t.Fatalf("kubectl get --watch printed %q, want %q", l, want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("kubectl get --watch: no %q", want)
			}
		}
		expect("EVENT NAME")
		expect("ADDED foo-sample")
		s.mustKubectl(t, "apply", "-f", writeFile(t, "foo2.yaml", strings.Replace(fooYAML, "foo-sample", "foo-two", 1)))
		expect("ADDED foo-two")
		if out := s.mustKubectl(t, "delete", "foo", "foo-two"); !strings.Contains(out, `foo.webapp.my.domain "foo-two" deleted`) {
			t.Fatalf("delete: %s", out)
		}
		expect("DELETED foo-two")

		// Built-in kinds: create, read back, delete.
		s.mustKubectl(t, "create", "configmap", "cm1", "--from-literal=k=v")
		if out := s.mustKubectl(t, "get", "cm", "cm1", "-o", "jsonpath={.data.k}"); out != "v" {
			t.Fatalf("configmap data %q", out)
		}
		if out := s.mustKubectl(t, "get", "cm", "cm1"); !regexp.MustCompile(`(?m)^cm1\s+1\s+\d+s$`).MatchString(out) {
			t.Fatalf("kubectl get cm:\n%s", out)
		}
		s.mustKubectl(t, "delete", "cm", "cm1")
		if _, errOut, err := s.kubectl("get", "cm", "cm1"); err == nil || !strings.Contains(errOut, `configmaps "cm1" not found`) {
			t.Fatalf("get after delete: %v %s", err, errOut)
		}
	})
}

// Paths kube-apiserver has no delete on refuse kubectl's raw deletes with
// its 405, and delete nothing: namespaces have no deletecollection, and
// there is no deletecollection across all namespaces.
func TestKubectlRawDeleteWhereThereIsNoDelete(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	s.mustKubectl(t, "create", "configmap", "keep", "-n", "default")
	for _, path := range []string{"/api/v1/namespaces", "/api/v1/configmaps", "/api/v1/namespaces/default/status"} {
		_, errOut, err := s.kubectl("delete", "--raw", path)
		if err == nil || !strings.Contains(errOut, "the server does not allow this method on the requested resource") {
			t.Errorf("kubectl delete --raw %s: %v, stderr %q; want MethodNotAllowed", path, err, errOut)
		}
	}
	if out := s.mustKubectl(t, "get", "configmap", "keep", "-n", "default", "-o", "jsonpath={.metadata.name}"); out != "keep" {
		t.Errorf("the ConfigMap after the deletes: %q", out)
	}
	if out := s.mustKubectl(t, "get", "namespace", "default", "-o", "jsonpath={.status.phase}"); out != "Active" {
		t.Errorf("the namespace after the deletes: phase %q, want Active", out)
	}
	// The system namespaces may not be deleted, as upstream's admission
	// refuses.
	if _, errOut, err := s.kubectl("delete", "namespace", "kube-system"); err == nil || !strings.Contains(errOut, "this namespace may not be deleted") {
		t.Errorf("kubectl delete namespace kube-system: %v, stderr %q", err, errOut)
	}
	// A group not served: kubectl says NotFound, from Go's plain 404.
	if _, errOut, err := s.kubectl("get", "--raw", "/apis/nogroup.example/v1"); err == nil || !strings.Contains(errOut, "NotFound") {
		t.Errorf("get --raw of a group not served: %v, stderr %q", err, errOut)
	}
}

// TestKubectlAuth: kubectl auth asks kplane's reviews. kplane authorizes
// every authenticated request, so every question is a yes, the rules list
// everything, and whoami names the client certificate's user and groups.
func TestKubectlAuth(t *testing.T) {
	s := startServer(t)
	for _, q := range [][]string{{"create", "configmaps"}, {"delete", "namespaces", "--all-namespaces"}, {"get", "/healthz"}, {"create", "foos.webapp.my.domain", "-n", "other"}} {
		if out := s.mustKubectl(t, append([]string{"auth", "can-i"}, q...)...); out != "yes\n" {
			t.Errorf("kubectl auth can-i %v: %q", q, out)
		}
	}
	if out := s.mustKubectl(t, "auth", "can-i", "--list"); !regexp.MustCompile(`(?m)^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+\[\*\]\s+\[\]\s+\[\*\]$`).MatchString(out) {
		t.Errorf("kubectl auth can-i --list:\n%s", out)
	}
	var who struct {
		Kind   string
		Status struct {
			UserInfo struct {
				Username string
				Groups   []string
				Extra    map[string][]string
			}
		}
	}
	if err := json.Unmarshal([]byte(s.mustKubectl(t, "auth", "whoami", "-o", "json")), &who); err != nil {
		t.Fatal(err)
	}
	u := who.Status.UserInfo
	if who.Kind != "SelfSubjectReview" || u.Username != "kplane-admin" || strings.Join(u.Groups, ",") != "system:masters,system:authenticated" ||
		!regexp.MustCompile(`^X509SHA256=[0-9a-f]{64}$`).MatchString(strings.Join(u.Extra["authentication.kubernetes.io/credential-id"], ",")) {
		t.Errorf("kubectl auth whoami: %+v", who)
	}
}
