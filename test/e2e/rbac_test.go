package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// tokenKubeconfig writes a kubeconfig that holds token alone, for
// namespace ns, and returns its path.
func tokenKubeconfig(t *testing.T, s *server, token, ns string) string {
	t.Helper()
	admin := s.config()
	c := clientcmdapi.NewConfig()
	c.Clusters["kplane"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	c.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	c.Contexts["sa"] = &clientcmdapi.Context{Cluster: "kplane", AuthInfo: "sa", Namespace: ns}
	c.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*c, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// With --authorization-mode=RBAC, a service account may do what its
// roles allow and nothing else, as on a real cluster, through kubectl,
// client-go and controller-runtime:
//   - refused (403, upstream's words) until a Role is bound to it; the
//     binding applies to the very next request, with no wait;
//   - kubectl auth can-i answers by the same rules, also for the admin
//     impersonating the account (--as), which the account itself may not;
//   - a controller-runtime manager with the account's token syncs its
//     cache and reads, and is refused the writes its role lacks;
//   - it cannot bind a role with more than it holds;
//   - /metrics takes a binding to system:monitoring, as upstream's;
//   - all of it holds across a restart;
//   - the roles view, edit and admin gather the rules of the roles
//     labeled to aggregate into them.
func TestRBACAuthorization(t *testing.T) {
	s := startServer(t, "--authorization-mode", "RBAC")
	ctx := context.Background()
	s.mustKubectl(t, "create", "namespace", "team")
	s.mustKubectl(t, "-n", "team", "create", "serviceaccount", "operator")
	s.mustKubectl(t, "-n", "team", "create", "configmap", "settings", "--from-literal=mode=fast")
	token := strings.TrimSpace(s.mustKubectl(t, "-n", "team", "create", "token", "operator", "--duration", "1h"))
	kubeconfig := tokenKubeconfig(t, s, token, "team")
	asOperator := func(args ...string) (string, string, error) {
		return s.kubectl(append([]string{"--kubeconfig", kubeconfig}, args...)...)
	}

	_, errOut, err := asOperator("get", "configmaps")
	if want := `Error from server (Forbidden): configmaps is forbidden: User "system:serviceaccount:team:operator" cannot list resource "configmaps" in API group "" in the namespace "team"`; err == nil || !strings.Contains(errOut, want) {
		t.Fatalf("before any role: %v %q, want %q", err, errOut, want)
	}
	if out, _, err := asOperator("auth", "can-i", "list", "configmaps"); err == nil || strings.TrimSpace(out) != "no" {
		t.Errorf("can-i before any role: %q, %v", out, err)
	}

	s.mustKubectl(t, "-n", "team", "create", "role", "reader", "--verb=get,list,watch", "--resource=configmaps")
	s.mustKubectl(t, "-n", "team", "create", "rolebinding", "operator-reads", "--role=reader", "--serviceaccount=team:operator")
	// No wait: an acknowledged binding applies to the next request.
	if out, errOut, err := asOperator("get", "configmaps", "-o", "name"); err != nil || out != "configmap/settings\n" {
		t.Fatalf("after the binding: %q %v %s", out, err, errOut)
	}
	if out, _, err := asOperator("auth", "can-i", "list", "configmaps"); err != nil || strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i after the binding: %q, %v", out, err)
	}
	// The admin asks for it by impersonation, as RBAC is usually checked.
	for verb, want := range map[string]string{"list": "yes", "delete": "no"} {
		out, _, _ := s.kubectl("-n", "team", "auth", "can-i", verb, "configmaps", "--as=system:serviceaccount:team:operator")
		if strings.TrimSpace(out) != want {
			t.Errorf("can-i %s --as the account: %q, want %s", verb, out, want)
		}
	}
	if out := s.mustKubectl(t, "auth", "whoami", "--as=jane", "--as-group=devs", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); out != `jane ["devs","system:authenticated"]` {
		t.Errorf("whoami --as jane: %q", out)
	}
	if _, errOut, err := s.kubectl("-n", "team", "get", "secrets", "--as=system:serviceaccount:team:operator"); err == nil ||
		!strings.Contains(errOut, `User "system:serviceaccount:team:operator" cannot list resource "secrets"`) {
		t.Errorf("get secrets --as the account: %v %s", err, errOut)
	}
	if _, errOut, err := asOperator("get", "configmaps", "--as=jane"); err == nil ||
		!strings.Contains(errOut, `cannot impersonate-on:user-info:list resource "configmaps"`) {
		t.Errorf("the account impersonating: %v %s", err, errOut)
	}
	if out, _, _ := asOperator("auth", "can-i", "--list"); !strings.Contains(out, "configmaps") || !strings.Contains(out, "selfsubjectaccessreviews.authorization.k8s.io") {
		t.Errorf("can-i --list:\n%s", out)
	}
	if _, errOut, err := asOperator("create", "configmap", "other"); err == nil || !strings.Contains(errOut, `cannot create resource "configmaps"`) {
		t.Errorf("a create its role lacks: %v %s", err, errOut)
	}
	if _, errOut, err := asOperator("get", "configmaps", "-n", "default"); err == nil || !strings.Contains(errOut, `in the namespace "default"`) {
		t.Errorf("another namespace: %v %s", err, errOut)
	}

	// controller-runtime, with the account's kubeconfig and a cache of
	// its namespace.
	mgr := startManager(t, &server{t: t, kubeconfig: kubeconfig}, ctrl.Options{
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{"team": {}}},
	}, nil)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache not synced")
	}
	var cm corev1.ConfigMap
	if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: "team", Name: "settings"}, &cm); err != nil || cm.Data["mode"] != "fast" {
		t.Fatalf("cached read: %v %v", err, cm.Data)
	}
	err = mgr.GetClient().Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "made"}})
	if !apierrors.IsForbidden(err) {
		t.Errorf("a create its role lacks: %v, want Forbidden", err)
	}

	// May write bindings, not grant what it does not hold.
	s.mustKubectl(t, "-n", "team", "create", "role", "binder", "--verb=create,get", "--resource=rolebindings.rbac.authorization.k8s.io")
	s.mustKubectl(t, "-n", "team", "create", "rolebinding", "operator-binds", "--role=binder", "--serviceaccount=team:operator")
	if _, errOut, err := asOperator("create", "rolebinding", "grab", "--clusterrole=cluster-admin", "--user=eve"); err == nil ||
		!strings.Contains(errOut, "is attempting to grant RBAC permissions not currently held") {
		t.Errorf("binding cluster-admin: %v %s", err, errOut)
	}
	if out, errOut, err := asOperator("create", "rolebinding", "share", "--role=reader", "--user=eve"); err != nil {
		t.Errorf("binding a role it holds: %v %s%s", err, out, errOut)
	}

	// /metrics, as a scraper's account.
	if _, errOut, err := asOperator("get", "--raw", "/metrics"); err == nil || !strings.Contains(errOut, "Forbidden") {
		t.Errorf("/metrics without system:monitoring: %v %s", err, errOut)
	}
	s.mustKubectl(t, "create", "clusterrolebinding", "operator-monitors", "--clusterrole=system:monitoring", "--serviceaccount=team:operator")
	if out, errOut, err := asOperator("get", "--raw", "/metrics"); err != nil || !strings.Contains(out, "apiserver_request_total") {
		t.Errorf("/metrics with system:monitoring: %v %s", err, errOut)
	}

	s.restart()
	if out, errOut, err := asOperator("get", "configmap", "settings", "-o", "name"); err != nil || out != "configmap/settings\n" {
		t.Errorf("after a restart: %q %v %s", out, err, errOut)
	}
	if _, errOut, err := asOperator("delete", "configmap", "settings"); err == nil || !strings.Contains(errOut, "Forbidden") {
		t.Errorf("a delete after a restart: %v %s", err, errOut)
	}
	// The admin's certificate (system:masters) may do everything.
	s.mustKubectl(t, "-n", "team", "delete", "configmap", "settings")

	// The user-facing roles, their rules aggregated: view lets it read
	// ServiceAccounts, and a role an operator labels aggregate-to-view
	// adds its custom resources to view.
	s.mustKubectl(t, "-n", "team", "create", "rolebinding", "operator-views", "--clusterrole=view", "--serviceaccount=team:operator")
	eventually(t, 10*time.Second, "view's rules", func() (bool, string) {
		out, _, err := asOperator("auth", "can-i", "list", "serviceaccounts")
		return err == nil && strings.TrimSpace(out) == "yes", out
	})
	manifest := filepath.Join(t.TempDir(), "widgets-view.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [get, list]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s.mustKubectl(t, "apply", "-f", manifest)
	// (kubectl auth can-i names a resource it does not find in discovery
	// without its group: client-go asks.)
	opCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	canI := func(verb string) bool {
		t.Helper()
		r, err := kubernetes.NewForConfigOrDie(opCfg).AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: "team", Verb: verb, Group: "example.com", Resource: "widgets"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.Allowed
	}
	eventually(t, 10*time.Second, "a role aggregated into view", func() (bool, string) { return canI("list"), "" })
	if canI("delete") {
		t.Error("view lets it delete widgets")
	}
}

// With RBAC, a client without credentials is system:anonymous, authorized
// by its roles as on a cluster: refused with a 403 naming it, let to the
// health checks, and to the OpenID documents once an operator binds them
// to system:unauthenticated (a relying party outside the cluster fetching
// the keys). --anonymous-auth=false refuses it everything, 401.
func TestAnonymousAuth(t *testing.T) {
	get := func(s *server, path string) (int, string) {
		client, err := rest.UnversionedRESTClientFor(setNegotiated(rest.AnonymousClientConfig(s.config())))
		if err != nil {
			t.Fatal(err)
		}
		var code int
		body, _ := client.Get().AbsPath(path).Do(context.Background()).StatusCode(&code).Raw()
		return code, string(body)
	}
	s := startServer(t, "--authorization-mode", "RBAC")
	for path, want := range map[string]int{"/api/v1/namespaces": 403, "/readyz": 200, "/version": 200, "/openid/v1/jwks": 403} {
		if code, body := get(s, path); code != want {
			t.Errorf("anonymous %s: %d %s, want %d", path, code, body, want)
		}
	}
	if _, body := get(s, "/api/v1/namespaces"); !strings.Contains(body, `User \"system:anonymous\" cannot list resource \"namespaces\"`) {
		t.Errorf("anonymous list: %s", body)
	}
	s.mustKubectl(t, "create", "clusterrolebinding", "anonymous-discovery", "--clusterrole", "system:service-account-issuer-discovery", "--group", "system:unauthenticated")
	if code, body := get(s, "/openid/v1/jwks"); code != 200 || !strings.Contains(body, `"keys"`) {
		t.Errorf("anonymous keys after the binding: %d %s", code, body)
	}
	refusing := startServer(t, "--authorization-mode", "RBAC", "--anonymous-auth=false")
	for _, path := range []string{"/readyz", "/version", "/api/v1/namespaces"} {
		if code, body := get(refusing, path); code != 401 {
			t.Errorf("--anonymous-auth=false: anonymous %s: %d %s", path, code, body)
		}
	}
}

// setNegotiated gives cfg what an unversioned REST client needs.
func setNegotiated(cfg *rest.Config) *rest.Config {
	cfg.NegotiatedSerializer = clientscheme.Codecs.WithoutConversion()
	return cfg
}
