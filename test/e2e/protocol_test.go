package e2e

import (
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestHTTPProtocols checks which protocol client-go ends up speaking:
// HTTP/2 as it comes, and HTTP/1.1 when the server runs with Go's HTTP/2
// server off (GODEBUG=http2server=0, as operators set it to shut out an
// HTTP/2 flaw). The server must then stop offering h2 in its handshake;
// offering it and answering in HTTP/1.1 breaks every client that takes it.
func TestHTTPProtocols(t *testing.T) {
	for _, c := range []struct {
		godebug, want string
	}{
		{"", "HTTP/2.0"},
		{"http2server=0", "HTTP/1.1"},
	} {
		t.Run("GODEBUG="+c.godebug, func(t *testing.T) {
			t.Setenv("GODEBUG", c.godebug) // the server inherits it
			s := startServer(t, "--storage", "memory")
			cfg := s.config()
			hc, err := rest.HTTPClientFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := hc.Get(cfg.Host + "/version")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Proto != c.want {
				t.Fatalf("/version: %d over %s, want 200 over %s", resp.StatusCode, resp.Proto, c.want)
			}

			// A write and its watch event go through client-go's typed
			// client over the same protocol, and kubectl works too.
			cs := kubernetes.NewForConfigOrDie(cfg)
			w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "proto"}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-w.ResultChan():
				got, ok := ev.Object.(*corev1.ConfigMap)
				if ev.Type != watch.Added || !ok || got.ResourceVersion != cm.ResourceVersion {
					t.Fatalf("watch: %s %#v, want ADDED at %s", ev.Type, ev.Object, cm.ResourceVersion)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no watch event in 10 s")
			}
			if out := s.mustKubectl(t, "get", "configmap", "proto", "-o", "name"); out != "configmap/proto\n" {
				t.Fatalf("kubectl get: %q", out)
			}
		})
	}
}
