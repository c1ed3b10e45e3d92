package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kplane-dev/kplane/internal/registry"
)

// requestUser is who sent r: the user its bearer token named
// (authenticateToken), or its client certificate's, as kube-apiserver's
// x509 authenticator names them: the certificate's common name, its
// organizations as groups (with system:authenticated), and its SHA-256 as
// its credential id. A request with neither (where anonymous requests are
// allowed) is system:anonymous.
func requestUser(r *http.Request) registry.User {
	if u, ok := registry.UserFrom(r.Context()); ok {
		return u
	}
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

// authenticateToken authenticates r by its bearer token (the
// Authorization header's "Bearer <token>", in any case), as upstream's
// token authenticators: it returns r carrying the token's user, or nil
// if r has no token; ok is false for a token that is not valid. The
// header is removed from a request it authenticates, as upstream removes
// it, so that nothing downstream sees the credential.
func (s *Server) authenticateToken(r *http.Request) (authed *http.Request, ok bool) {
	auth := r.Header.Get("Authorization")
	scheme, rest, _ := strings.Cut(auth, " ")
	token, _, _ := strings.Cut(rest, " ")
	if !strings.EqualFold(scheme, "bearer") || token == "" {
		return nil, true
	}
	if s.cfg.Tokens == nil {
		return nil, false
	}
	u, _, err := s.cfg.Tokens.AuthenticateToken(r.Context(), token, nil)
	if err != nil {
		s.cfg.Logger.Debug("bearer token refused", "err", err)
		return nil, false
	}
	authed = r.WithContext(registry.WithUser(r.Context(), u))
	authed.Header = r.Header.Clone()
	authed.Header.Del("Authorization")
	return authed, true
}

// openIDConfiguration serves the OpenID Connect discovery document of the
// service account token issuer, as kube-apiserver does, so that a relying
// party can find the keys that check kplane's tokens. Both documents are
// served with and without a trailing slash, in their one media type, as
// upstream's.
func (s *Server) openIDConfiguration(w http.ResponseWriter, r *http.Request) {
	if !openIDRequest(w, r, "/.well-known/openid-configuration", "application/json") {
		return
	}
	doc, err := json.Marshal(struct {
		Issuer    string   `json:"issuer"`
		JWKSURI   string   `json:"jwks_uri"`
		Responses []string `json:"response_types_supported"`
		Subjects  []string `json:"subject_types_supported"`
		Algs      []string `json:"id_token_signing_alg_values_supported"`
	}{s.cfg.Tokens.Issuer(), s.jwksURI(r), []string{"id_token"}, []string{"public"}, []string{"ES256"}})
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	writeDiscoveryDoc(w, "application/json", doc)
}

// jwksURI is where the discovery document answering r says the keys are.
func (s *Server) jwksURI(r *http.Request) string {
	if s.cfg.ServiceAccountJWKSURI != "" {
		return s.cfg.ServiceAccountJWKSURI
	}
	return "https://" + r.Host + "/openid/v1/jwks"
}

// discoverableIssuer says why issuer cannot be published by OpenID
// discovery, in upstream's words, if it cannot: it must be an https URL
// without query or fragment.
func discoverableIssuer(issuer string) error {
	u, err := url.Parse(issuer)
	switch {
	case err != nil:
		return err
	case u.Scheme != "https":
		return fmt.Errorf("issuer URL must use https scheme, got: %s", issuer)
	case u.RawQuery != "":
		return fmt.Errorf("issuer URL may not include a query, got: %s", issuer)
	case u.Fragment != "":
		return fmt.Errorf("issuer URL may not include a fragment, got: %s", issuer)
	}
	return nil
}

// openIDKeys serves the public keys of the service account tokens.
func (s *Server) openIDKeys(w http.ResponseWriter, r *http.Request) {
	if !openIDRequest(w, r, "/openid/v1/jwks", "application/jwk-set+json") {
		return
	}
	keys, err := s.cfg.Tokens.JWKS()
	if err != nil {
		writeError(w, apierrors.NewServiceUnavailable(err.Error()))
		return
	}
	writeDiscoveryDoc(w, "application/jwk-set+json", keys)
}

// writeDiscoveryDoc writes an OpenID document, cacheable for an hour as
// upstream's.
func writeDiscoveryDoc(w http.ResponseWriter, ctype string, doc []byte) {
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.WriteHeader(http.StatusOK)
	w.Write(doc)
}

// openIDRequest reports whether r asks for the document doc as upstream
// serves it: its path with or without a trailing slash (a path below it
// gets the generic 404 Status), GET (405 otherwise), and an Accept that
// takes its one media type ctype (406 otherwise). If not, it has answered.
func openIDRequest(w http.ResponseWriter, r *http.Request, doc, ctype string) bool {
	var err error
	switch {
	case r.URL.Path != doc && r.URL.Path != doc+"/":
		err = errNoRoute
	case r.Method != http.MethodGet:
		err = errMethodNotAllowed
	case !accepts(r, ctype):
		err = notAcceptable(ctype)
	default:
		return true
	}
	writeError(w, err)
	return false
}

// accepts reports whether r's Accept header takes ctype, as upstream's
// routes of one media type decide: no header, the type itself or */*
// (parameters ignored; application/* is not enough).
func accepts(r *http.Request, ctype string) bool {
	h := r.Header.Get("Accept")
	if h == "" {
		return true
	}
	for _, part := range strings.Split(h, ",") {
		mt, _, _ := strings.Cut(part, ";")
		if mt = strings.TrimSpace(mt); mt == ctype || mt == "*/*" {
			return true
		}
	}
	return false
}

// notAcceptable is upstream's 406 for a route that offers only ctype.
func notAcceptable(ctype string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotAcceptable, Reason: metav1.StatusReasonNotAcceptable,
		Message: "406: Not Acceptable\n\nAvailable representations: " + ctype, Details: &metav1.StatusDetails{},
	}}
}
