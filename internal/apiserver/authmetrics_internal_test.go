package apiserver

import "testing"

// User names are folded as upstream folds them for
// apiserver_authenticated_user_requests.
func TestCompressUsername(t *testing.T) {
	for name, want := range map[string]string{
		"admin": "admin", "kubelet": "kubelet", "system:serviceaccount:kube-system:default": "system:serviceaccount:kube-system:default",
		"alice@example.com": "email_id", "kplane-admin": "other", "system:serviceaccount:team:operator": "other", "": "other",
	} {
		if got := compressUsername(name); got != want {
			t.Errorf("%q: %q, want %q", name, got, want)
		}
	}
}
