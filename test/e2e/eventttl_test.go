package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// With --event-ttl, an Event goes that long after its last write, as
// with kube-apiserver: a watcher sees it DELETED, and it is gone after a
// restart too.
func TestEventTTL(t *testing.T) {
	s := startServer(t, "--event-ttl", "1s")
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(s.config())
	w, err := cs.CoreV1().Events("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "short-lived"}, Reason: "Tested", Message: "gone in a second",
		InvolvedObject: corev1.ObjectReference{Kind: "ConfigMap", Name: "x", Namespace: "default"}}
	made, err := cs.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(30 * time.Second) // a failure bound, not a timing assertion
	for deleted := false; !deleted; {
		select {
		case e := <-w.ResultChan():
			if got, ok := e.Object.(*corev1.Event); ok && e.Type == watch.Deleted && got.Name == "short-lived" {
				deleted = got.ResourceVersion != "" && got.UID == made.UID
			}
		case <-timeout:
			t.Fatal("the event was not expired")
		}
	}
	if _, err := cs.CoreV1().Events("default").Get(ctx, "short-lived", metav1.GetOptions{}); err == nil {
		t.Fatal("the expired event is still there")
	}
	// Stored across a restart, it is dated by its metadata.
	if _, err := cs.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.restart()
	eventually(t, 30*time.Second, "the event expired after a restart", func() (bool, string) {
		_, err := cs.CoreV1().Events("default").Get(ctx, "short-lived", metav1.GetOptions{})
		return err != nil, "still there"
	})
}
