package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// API Priority and Fairness with the real kubectl and client-go: the
// bootstrap configuration is served; a user's own FlowSchema sends its
// requests to a small Reject level, where a burst is refused with 429
// (upstream's text, Retry-After, the headers naming the schema and level)
// while the admin (exempt) is never refused; client-go retries the 429s
// and every request succeeds; the metrics count the refusals; and a
// FlowSchema whose level is missing shows it (MISSINGPL).
func TestPriorityAndFairness(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	eventually(t, 10*time.Second, "the bootstrap configuration", func() (bool, string) {
		fs, _, err1 := s.kubectl("get", "flowschemas", "-o", "name")
		pl, _, err2 := s.kubectl("get", "prioritylevelconfigurations", "-o", "name")
		return err1 == nil && err2 == nil && strings.Count(fs, "\n") == 11 && strings.Count(pl, "\n") == 8, fs + pl
	})
	s.mustKubectl(t, "apply", "-f", "testdata/flowcontrol-tiny.yaml")
	admin := kubernetes.NewForConfigOrDie(s.config())
	payload := strings.Repeat("x", 3000)
	for i := range 300 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i)}, Data: map[string]string{"k": payload}}
		if _, err := admin.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	uid := func(resource, name string) string {
		return s.mustKubectl(t, "get", resource, name, "-o", "jsonpath={.metadata.uid}")
	}
	floodFS, tinyPL := uid("flowschema", "flood"), uid("prioritylevelconfiguration", "tiny")

	// Requests as user flood, by impersonation, through client-go's
	// transport but without its retries: 40 at once, 5 each.
	flood := s.config()
	flood.Impersonate = rest.ImpersonationConfig{UserName: "flood"}
	hc, err := rest.HTTPClientFor(flood)
	if err != nil {
		t.Fatal(err)
	}
	adminHC, err := rest.HTTPClientFor(s.config())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var refused *http.Response
	var refusedBody string
	var adminFailures []string
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				resp, err := hc.Get(flood.Host + "/api/v1/namespaces/default/configmaps")
				if err != nil {
					t.Error(err)
					return
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				if resp.StatusCode == http.StatusTooManyRequests && refused == nil {
					refused, refusedBody = resp, string(body)
				}
				mu.Unlock()
				// The admin, meanwhile, is exempt.
				a, err := adminHC.Get(flood.Host + "/api/v1/namespaces/default/configmaps?limit=1")
				if err != nil || a.StatusCode != http.StatusOK {
					mu.Lock()
					adminFailures = append(adminFailures, a.Status)
					mu.Unlock()
				}
				if a != nil {
					io.Copy(io.Discard, a.Body)
					a.Body.Close()
				}
			}
		}()
	}
	wg.Wait()
	if refused == nil {
		t.Fatalf("no request of 200 at a level of 3 seats was refused: %v", codes)
	}
	if codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 200 {
		t.Fatalf("answers %v", codes)
	}
	h := refused.Header
	if refusedBody != "Too many requests, please try again later.\n" || h.Get("Retry-After") == "" ||
		h.Get("X-Kubernetes-PF-FlowSchema-UID") != floodFS || h.Get("X-Kubernetes-PF-PriorityLevel-UID") != tinyPL {
		t.Fatalf("a refusal: %q, headers %v; want flow schema %s, level %s", refusedBody, h, floodFS, tinyPL)
	}
	if len(adminFailures) > 0 {
		t.Fatalf("the admin's requests failed: %v", adminFailures)
	}
	metrics := s.mustKubectl(t, "get", "--raw", "/metrics")
	if !strings.Contains(metrics, `apiserver_flowcontrol_rejected_requests_total{flow_schema="flood",priority_level="tiny",reason="concurrency-limit"} `) ||
		!strings.Contains(metrics, `apiserver_flowcontrol_nominal_limit_seats{priority_level="tiny"} 3`) ||
		!strings.Contains(metrics, `apiserver_request_total{code="429",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} `) ||
		!strings.Contains(metrics, `apiserver_request_terminations_total{code="429",component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} `) {
		t.Fatalf("the metrics do not count the refusals")
	}

	// client-go as it comes retries a 429 after its Retry-After: every
	// list succeeds. (Twice the level's seats: a burst of many more keeps
	// Retry-After growing, up to 32 s, as upstream's.)
	typed := kubernetes.NewForConfigOrDie(flood)
	errs := make(chan error, 6)
	for range 6 {
		go func() {
			_, err := typed.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			errs <- err
		}()
	}
	for range 6 {
		if err := <-errs; err != nil {
			t.Fatalf("client-go's list: %v", err)
		}
	}

	// A FlowSchema whose level is missing (made with the others).
	eventually(t, 10*time.Second, "the MISSINGPL column", func() (bool, string) {
		out, errOut, err := s.kubectl("get", "flowschema", "orphan", "--no-headers")
		f := strings.Fields(out)
		return err == nil && len(f) == 6 && f[5] == "True", out + errOut
	})
}
