package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"

	"github.com/kplane-dev/kplane/internal/registry"
)

// requestUser is who sent r, as kube-apiserver's x509 authenticator names
// them: the client certificate's common name, its organizations as groups
// (with system:authenticated), and the certificate's SHA-256 as its
// credential id. A request without one (where anonymous requests are
// allowed) is system:anonymous.
func requestUser(r *http.Request) registry.User {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return registry.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
	}
	cert := r.TLS.VerifiedChains[0][0]
	sum := sha256.Sum256(cert.Raw)
	return registry.User{
		Name:   cert.Subject.CommonName,
		Groups: append(slices.Clone(cert.Subject.Organization), "system:authenticated"),
		Extra:  map[string][]string{"authentication.kubernetes.io/credential-id": {"X509SHA256=" + hex.EncodeToString(sum[:])}},
	}
}
