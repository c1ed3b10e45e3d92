package core

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
)

// testCA is an authority's certificate of name, valid until notAfter.
func testCA(t *testing.T, name string, notAfter time.Time) []byte {
	return certPEM(t, name, true, notAfter)
}

// What is stored is merged with what kplane needs, as upstream's
// controller merges: lists keep their entries and gain the missing ones,
// bundles keep their certificates, drop the expired ones and gain the
// missing ones; without proxies, no requestheader keys unless stored.
func TestAuthenticationDataMerges(t *testing.T) {
	now := time.Now()
	own, other, expired, proxy := testCA(t, "own", now.Add(time.Hour)), testCA(t, "other", now.Add(time.Hour)),
		testCA(t, "expired", now.Add(-time.Hour)), testCA(t, "proxy", now.Add(time.Hour))

	data, err := authenticationData(nil, own, RequestHeaderInfo{}, false, now)
	if err != nil || len(data) != 1 || data["client-ca-file"] != string(own) {
		t.Fatalf("without proxies: %v %q", err, data)
	}

	have := map[string]string{
		"client-ca-file":                 string(other) + string(expired) + string(own),
		"requestheader-client-ca-file":   string(proxy),
		"requestheader-username-headers": `["X-Other-User","X-Remote-User"]`,
		"requestheader-allowed-names":    `[]`,
		"unrelated":                      "dropped",
	}
	want := RequestHeaderInfo{CA: proxy, UsernameHeaders: []string{"X-Remote-User"}, GroupHeaders: []string{"X-Remote-Group"},
		ExtraHeaderPrefixes: []string{"X-Remote-Extra-"}, AllowedNames: []string{"front-proxy"}}
	data, err = authenticationData(have, own, want, true, now)
	if err != nil {
		t.Fatal(err)
	}
	expect := map[string]string{
		"client-ca-file":                     string(other) + string(own),
		"requestheader-client-ca-file":       string(proxy),
		"requestheader-username-headers":     `["X-Other-User","X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
		"requestheader-allowed-names":        `["front-proxy"]`,
	}
	for k, v := range expect {
		if data[k] != v {
			t.Errorf("%s: %q, want %q", k, data[k], v)
		}
	}
	if len(data) != len(expect) {
		t.Errorf("keys %v", data)
	}
	// Stored proxies' settings stay though this server has none.
	if data, _ := authenticationData(have, own, RequestHeaderInfo{}, false, now); data["requestheader-client-ca-file"] != string(proxy) || data["requestheader-group-headers"] != `[]` {
		t.Errorf("a stored proxy without proxies here: %q", data)
	}
	if _, err := authenticationData(map[string]string{"requestheader-client-ca-file": string(proxy), "requestheader-group-headers": "not json"}, own, want, true, now); err == nil {
		t.Error("a stored list that is not JSON was taken")
	}
}

// The controller publishes the ConfigMap and the reader role and binding,
// is synced then, and makes a deleted ConfigMap again at once.
func TestAuthenticationInfoRun(t *testing.T) {
	f := newTokenFixture(t)
	own := testCA(t, "own", time.Now().Add(time.Hour))
	a := &AuthenticationInfo{Registry: f.reg, ClientCA: func() []byte { return own }, Interval: time.Hour}
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	go a.Run(ctx)
	select {
	case <-a.Synced():
	case <-time.After(10 * time.Second):
		t.Fatal("not synced")
	}
	cms := f.res("configmaps")
	get := func() (*unstructured.Unstructured, error) {
		return cms.Get(ctx, "v1", "kube-system", authenticationInfoName, metav1.GetOptions{})
	}
	cm, err := get()
	if err != nil || cm.Object["data"].(map[string]any)["client-ca-file"] != string(own) {
		t.Fatalf("the configmap: %v %v", err, cm)
	}
	for _, r := range []struct{ resource, name string }{{"roles", authenticationReader}, {"rolebindings", "system::" + authenticationReader}} {
		res, _ := rbacResource(f.reg, r.resource)
		if _, err := res.Get(ctx, "v1", "kube-system", r.name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s %s: %v", r.resource, r.name, err)
		}
	}
	uid := cm.GetUID()
	if _, _, err := cms.Delete(ctx, "v1", "kube-system", authenticationInfoName, metav1.DeleteOptions{}, registry.WriteOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cm, err := get()
		if err == nil && cm.GetUID() != uid {
			break
		}
		if err != nil && !apierrors.IsNotFound(err) || time.Now().After(deadline) {
			t.Fatalf("not made again (the check is hourly): %v", err)
		}
	}
}

// Two servers on one store, each with its own authority, starting at
// once: both are ready at once (a conflict is retried at once, not at the
// next check), and the ConfigMap holds both authorities.
func TestAuthenticationInfoOfTwoServers(t *testing.T) {
	f := newTokenFixture(t)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	var cas [][]byte
	var servers []*AuthenticationInfo
	for i := range 2 {
		ca := testCA(t, "server-"+strconv.Itoa(i), time.Now().Add(time.Hour))
		cas = append(cas, ca)
		servers = append(servers, &AuthenticationInfo{Registry: f.reg, ClientCA: func() []byte { return ca }, Interval: time.Hour})
	}
	for _, a := range servers {
		go a.Run(ctx)
	}
	for _, a := range servers {
		select {
		case <-a.Synced():
		case <-time.After(10 * time.Second):
			t.Fatal("not synced (the check is hourly)")
		}
	}
	var data string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		cm, err := f.res("configmaps").Get(ctx, "v1", "kube-system", authenticationInfoName, metav1.GetOptions{})
		if err == nil {
			data, _, _ = unstructured.NestedString(cm.Object, "data", "client-ca-file")
			if strings.Contains(data, string(cas[0])) && strings.Contains(data, string(cas[1])) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the authorities published: %v\n%s", err, data)
		}
	}
}
