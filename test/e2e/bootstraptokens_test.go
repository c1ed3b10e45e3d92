package e2e

import (
	"strings"
	"testing"
	"time"
)

// --enable-bootstrap-token-auth: a bootstrap token Secret made with
// kubectl authenticates its token as system:bootstrap:<id>, in
// system:bootstrappers and its extra groups, for kubectl and RBAC; the
// Secret is deleted once it expires, and the token with it. Without the
// flag, such a token is 401.
func TestBootstrapTokens(t *testing.T) {
	s := startServer(t, "--authorization-mode", "RBAC", "--enable-bootstrap-token-auth")
	expires := time.Now().Add(4 * time.Second).UTC().Format(time.RFC3339)
	s.mustKubectl(t, "-n", "kube-system", "create", "secret", "generic", "bootstrap-token-abcdef", "--type", "bootstrap.kubernetes.io/token",
		"--from-literal", "token-id=abcdef", "--from-literal", "token-secret=0123456789abcdef",
		"--from-literal", "usage-bootstrap-authentication=true", "--from-literal", "auth-extra-groups=system:bootstrappers:agents",
		"--from-literal", "expiration="+expires)
	kc := tokenKubeconfig(t, s, "abcdef.0123456789abcdef", "default")
	// The token holds once the server's cache has the Secret (at once,
	// but for a slow machine), as upstream's informer.
	eventually(t, 10*time.Second, "whoami with the bootstrap token", func() (bool, string) {
		out, errOut, err := s.kubectl("--kubeconfig", kc, "auth", "whoami", "-o", "jsonpath={.status.userInfo}")
		want := `{"groups":["system:bootstrappers","system:bootstrappers:agents","system:authenticated"],"username":"system:bootstrap:abcdef"}`
		return err == nil && out == want, out + errOut
	})
	if _, errOut, err := s.kubectl("--kubeconfig", kc, "get", "configmaps"); err == nil ||
		!strings.Contains(errOut, `User "system:bootstrap:abcdef" cannot list resource "configmaps"`) {
		t.Fatalf("before a binding: %v %s", err, errOut)
	}
	s.mustKubectl(t, "create", "rolebinding", "agents-view", "--clusterrole", "view", "--group", "system:bootstrappers:agents", "-n", "default")
	if _, errOut, err := s.kubectl("--kubeconfig", kc, "get", "configmaps"); err != nil {
		t.Fatalf("with a binding: %v %s", err, errOut)
	}
	// Expired: the cleaner deletes the Secret, and the token is 401.
	eventually(t, 30*time.Second, "the expired token's secret deleted", func() (bool, string) {
		out, _, _ := s.kubectl("-n", "kube-system", "get", "secrets", "-o", "name")
		return !strings.Contains(out, "bootstrap-token-abcdef"), out
	})
	if _, errOut, err := s.kubectl("--kubeconfig", kc, "get", "configmaps"); err == nil || !strings.Contains(errOut, "You must be logged in to the server") {
		t.Fatalf("an expired token: %v %s", err, errOut)
	}

	off := startServer(t)
	off.mustKubectl(t, "-n", "kube-system", "create", "secret", "generic", "bootstrap-token-abcdef", "--type", "bootstrap.kubernetes.io/token",
		"--from-literal", "token-id=abcdef", "--from-literal", "token-secret=0123456789abcdef", "--from-literal", "usage-bootstrap-authentication=true")
	if _, errOut, err := off.kubectl("--kubeconfig", tokenKubeconfig(t, off, "abcdef.0123456789abcdef", "default"), "get", "configmaps"); err == nil ||
		!strings.Contains(errOut, "You must be logged in to the server") {
		t.Fatalf("without the flag: %v %s", err, errOut)
	}
}
