package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
)

// Two kplane servers on one etcd, the second started with a copy of the
// first one's credentials (<data-dir>/pki), serve one cluster, as
// kube-apiserver replicas behind a load balancer do:
//   - both certificates name the load balancer (--tls-san), and the first
//     one's kubeconfig (its CA and admin certificate), and a service
//     account token it signed, work with the second;
//   - a CRD made through one is served by the other;
//   - an object written through one is read through the other at the
//     same resourceVersion, and watched through it;
//   - deleting a namespace, or an owner, through one deletes what the
//     namespace holds or the owner owns, both servers' controllers
//     running;
//   - with --authorization-mode RBAC, a binding made through one
//     authorizes the very next request through the other.
func TestReplicasOnOneEtcd(t *testing.T) {
	etcd := etcdtest.Start(t)
	flags := []string{"--storage", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ","), "--authorization-mode", "RBAC",
		"--tls-san", "kplane.example.com,10.99.0.1", "--tls-san", "*.kplane.example.com"}
	a := startServer(t, flags...)
	dir := t.TempDir()
	copyDir(t, filepath.Join(a.dir, "pki"), filepath.Join(dir, "pki"))
	b := startServerIn(t, dir, flags...)

	// A's kubeconfig, pointed at B.
	if out, errOut, err := a.kubectl("--server", "https://"+b.addr, "get", "namespace", "default", "-o", "name"); err != nil || out != "namespace/default\n" {
		t.Fatalf("A's kubeconfig at B: %q %v %s", out, err, errOut)
	}

	// Each certificate names the load balancer, as the client dials it.
	for _, s := range []*server{a, b} {
		for name, ok := range map[string]bool{"kplane.example.com": true, "lb.kplane.example.com": true, "10.99.0.1": true, "other.example.com": false} {
			cfg := s.config()
			cfg.TLSClientConfig.ServerName = name
			_, err := kubernetes.NewForConfigOrDie(cfg).Discovery().ServerVersion()
			if ok != (err == nil) {
				t.Errorf("%s as %s: %v", s.addr, name, err)
			}
		}
	}

	// A CRD made through A is served by B.
	crd, err := filepath.Abs("../../examples/foo-operator/config/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a.mustKubectl(t, "apply", "-f", crd)
	eventually(t, 10*time.Second, "B serves foos", func() (bool, string) {
		_, errOut, err := b.kubectl("get", "foos")
		return err == nil, errOut
	})
	foos := schema.GroupVersionResource{Group: "webapp.my.domain", Version: "v1", Resource: "foos"}
	foo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "webapp.my.domain/v1", "kind": "Foo",
		"metadata": map[string]any{"name": "one"}, "spec": map[string]any{"foo": "bar"},
	}}
	made, err := dynamic.NewForConfigOrDie(b.config()).Resource(foos).Namespace("default").Create(ctx, foo, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read, err := dynamic.NewForConfigOrDie(a.config()).Resource(foos).Namespace("default").Get(ctx, "one", metav1.GetOptions{})
	if err != nil || read.GetResourceVersion() != made.GetResourceVersion() {
		t.Fatalf("the Foo made through B, read through A: %v, %v (made at %s)", read, err, made.GetResourceVersion())
	}

	// A watch through B sees a write through A.
	ca, cb := kubernetes.NewForConfigOrDie(a.config()), kubernetes.NewForConfigOrDie(b.config())
	list, err := cb.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cb.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	owner, err := ca.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || !ok || cm.Name != "owner" || cm.ResourceVersion != owner.ResourceVersion {
			t.Errorf("B's watch: %s %v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Error("B's watch saw nothing of a create through A")
	}

	// An owner deleted through B takes its dependent, made through A.
	if _, err := ca.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cb.CoreV1().ConfigMaps("default").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the dependent collected", func() (bool, string) {
		_, err := ca.CoreV1().ConfigMaps("default").Get(ctx, "dependent", metav1.GetOptions{})
		return apierrors.IsNotFound(err), "dependent: " + errString(err)
	})

	// A namespace made and filled through A, deleted through B.
	a.mustKubectl(t, "create", "namespace", "doomed")
	a.mustKubectl(t, "-n", "doomed", "create", "configmap", "inside", "--from-literal=k=v")
	b.mustKubectl(t, "delete", "namespace", "doomed", "--timeout", "30s")
	if _, err := ca.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the namespace deleted through B, read through A: %v", err)
	}

	// A token A signed, authorized through B by a binding made through A.
	a.mustKubectl(t, "create", "serviceaccount", "robot")
	robot := rest.AnonymousClientConfig(b.config())
	robot.BearerToken = strings.TrimSpace(a.mustKubectl(t, "create", "token", "robot"))
	asRobot := kubernetes.NewForConfigOrDie(robot).CoreV1().ConfigMaps("default")
	if _, err := asRobot.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the token at B before any binding: %v", err)
	}
	a.mustKubectl(t, "create", "rolebinding", "robot-view", "--clusterrole", "view", "--serviceaccount", "default:robot")
	if _, err := asRobot.List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the token at B right after a binding through A: %v", err)
	}
}

// copyDir copies the files of src into dst, made, keeping their modes.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			t.Fatalf("%s: %v %v", e.Name(), info, err)
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
