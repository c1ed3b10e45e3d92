package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kplane-dev/kplane/internal/kv/etcdkv/etcdtest"
)

// quotaUsed waits until quota ns/name's status.used is want (as kubectl's
// jsonpath prints it). It lists: a consistent list is served by the
// server's cache once it has caught up, so the cache, which quota
// admission reads, holds what it answers.
func quotaUsed(t *testing.T, s *server, ns, name, want string) {
	t.Helper()
	eventually(t, 10*time.Second, "quota "+name+"'s status.used", func() (bool, string) {
		out, errOut, err := s.kubectl("get", "quota", "-n", ns, "--field-selector", "metadata.name="+name, "-o", "jsonpath={.items[0].status.used}")
		return err == nil && out == want, out + errOut
	})
}

// ResourceQuotas with the real kubectl and client-go: kubectl create quota
// makes one, kplane's controller fills in its status, creates past a
// count are refused with upstream's message, a custom resource is counted
// by count/<plural>.<group>, a delete gives its place back, and the quota
// holds across a restart.
func TestResourceQuotas(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	s.mustKubectl(t, "create", "namespace", "team-a")
	crd, err := filepath.Abs("../../examples/foo-operator/config/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s.mustKubectl(t, "apply", "-f", crd)
	s.mustKubectl(t, "wait", "--for", "condition=Established", "crd/foos.webapp.my.domain")
	s.mustKubectl(t, "create", "configmap", "before", "-n", "team-a")

	out := s.mustKubectl(t, "create", "quota", "objects", "-n", "team-a", "--hard=count/configmaps=2,count/foos.webapp.my.domain=1,secrets=5,cpu=1")
	if out != "resourcequota/objects created\n" {
		t.Fatalf("kubectl create quota: %q", out)
	}
	quotaUsed(t, s, "team-a", "objects", `{"count/configmaps":"1","count/foos.webapp.my.domain":"0","cpu":"0","secrets":"0"}`)

	s.mustKubectl(t, "create", "configmap", "second", "-n", "team-a")
	_, errOut, err := s.kubectl("create", "configmap", "third", "-n", "team-a")
	want := `error: failed to create configmap: configmaps "third" is forbidden: exceeded quota: objects, requested: count/configmaps=1, used: count/configmaps=2, limited: count/configmaps=2` + "\n"
	if err == nil || errOut != want {
		t.Fatalf("third configmap: %v %q, want %q", err, errOut, want)
	}
	out = s.mustKubectl(t, "get", "quota", "-n", "team-a")
	if !strings.Contains(out, "count/configmaps: 2/2, count/foos.webapp.my.domain: 0/1, cpu: 0/1, secrets: 0/5") {
		t.Fatalf("kubectl get quota:\n%s", out)
	}

	// A custom resource, through client-go's dynamic client.
	foos := dynamic.NewForConfigOrDie(s.config()).Resource(schema.GroupVersionResource{Group: "webapp.my.domain", Version: "v1", Resource: "foos"}).Namespace("team-a")
	foo := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "webapp.my.domain/v1", "kind": "Foo",
			"metadata": map[string]any{"name": name}, "spec": map[string]any{"foo": "bar"}}}
	}
	if _, err := foos.Create(ctx, foo("one"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = foos.Create(ctx, foo("two"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `foos.webapp.my.domain "two" is forbidden: exceeded quota: objects, requested: count/foos.webapp.my.domain=1, used: count/foos.webapp.my.domain=1, limited: count/foos.webapp.my.domain=1` {
		t.Fatalf("second foo: %v", err)
	}

	// A delete gives its place back.
	s.mustKubectl(t, "delete", "configmap", "before", "-n", "team-a")
	quotaUsed(t, s, "team-a", "objects", `{"count/configmaps":"1","count/foos.webapp.my.domain":"1","cpu":"0","secrets":"0"}`)
	s.mustKubectl(t, "create", "configmap", "third", "-n", "team-a")

	// A bad quota is refused with upstream's reasons.
	_, errOut, err = s.kubectl("create", "quota", "bad", "-n", "team-a", "--hard=count/configmaps=1.5,foo=1")
	if err == nil || !strings.Contains(errOut, `spec.hard[count/configmaps]: Invalid value: "1500m": must be an integer`) ||
		!strings.Contains(errOut, `spec.hard[foo]: Invalid value: "foo": must be a standard resource for quota`) {
		t.Fatalf("bad quota: %v %s", err, errOut)
	}

	// The limits and counts survive a restart.
	s.restart()
	_, errOut, err = s.kubectl("create", "configmap", "fourth", "-n", "team-a")
	if err == nil || !strings.Contains(errOut, "exceeded quota: objects") {
		t.Fatalf("fourth configmap after a restart: %v %q", err, errOut)
	}
	quotaUsed(t, s, "team-a", "objects", `{"count/configmaps":"2","count/foos.webapp.my.domain":"1","cpu":"0","secrets":"0"}`)
}

// Two kplane replicas on one etcd share a quota: clients creating
// through both at once, retrying on conflict as client-go's
// RetryOnConflict does, store exactly as many objects as the quota
// allows, and its status counts them.
func TestResourceQuotaAcrossReplicas(t *testing.T) {
	etcd := etcdtest.Start(t)
	flags := []string{"--storage", "etcd", "--etcd-endpoints", strings.Join(etcd.Endpoints(), ",")}
	a := startServer(t, flags...)
	dir := t.TempDir()
	copyDir(t, filepath.Join(a.dir, "pki"), filepath.Join(dir, "pki"))
	b := startServerIn(t, dir, flags...)
	a.mustKubectl(t, "create", "namespace", "shared")
	const limit, workers, each = 30, 8, 8
	a.mustKubectl(t, "create", "quota", "q", "-n", "shared", fmt.Sprintf("--hard=configmaps=%d", limit))
	// Read through each server: each one's cache then holds the quota's
	// limits, which it enforces from then on.
	quotaUsed(t, a, "shared", "q", `{"configmaps":"0"}`)
	quotaUsed(t, b, "shared", "q", `{"configmaps":"0"}`)

	ctx := context.Background()
	clients := []kubernetes.Interface{kubernetes.NewForConfigOrDie(a.config()), kubernetes.NewForConfigOrDie(b.config())}
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored, refused := 0, 0
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d-%d", w, i)}}
				err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
					_, err := clients[w%2].CoreV1().ConfigMaps("shared").Create(ctx, cm, metav1.CreateOptions{})
					return err
				})
				mu.Lock()
				switch {
				case err == nil:
					stored++
				case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota: q"):
					refused++
				default:
					t.Errorf("create %s: %v", cm.Name, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	list, err := clients[0].CoreV1().ConfigMaps("shared").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored != limit || refused != workers*each-limit || len(list.Items) != limit {
		t.Fatalf("%d stored, %d listed, %d refused; limit %d", stored, len(list.Items), refused, limit)
	}
	quotaUsed(t, a, "shared", "q", fmt.Sprintf(`{"configmaps":"%d"}`, limit))
}
