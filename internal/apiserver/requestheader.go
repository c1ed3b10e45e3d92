package apiserver

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/kplane-dev/kplane/internal/registry"
)

// RequestHeader is front-proxy authentication, as kube-apiserver's
// --requestheader-* flags: a proxy that authenticated the user itself
// presents a client certificate of its own certificate authority and
// names the user in request headers (X-Remote-User, X-Remote-Uid,
// X-Remote-Group, X-Remote-Extra-<key>). kplane takes the user from the
// headers only from such a proxy, then removes them.
type RequestHeader struct {
	// CAs verifies the proxies' certificates (--requestheader-client-ca-file),
	// read for each request, so that the file can change.
	CAs func() *x509.CertPool
	// AllowedNames, if any, are the common names a proxy's certificate
	// must have one of.
	AllowedNames []string
	// UsernameHeaders are asked in order; the first with a value names
	// the user. None: the request is not the proxy's user.
	UsernameHeaders []string
	// UIDHeaders, likewise, give the uid.
	UIDHeaders []string
	// GroupHeaders give the groups: every value of each.
	GroupHeaders []string
	// ExtraHeaderPrefixes give the extra: a header <prefix><key> adds
	// its values to the extra key <key>, lowercased and %-unescaped.
	ExtraHeaderPrefixes []string
}

// authenticate returns the user the proxy names, as upstream's request
// header authenticator: ok false with no error for a request whose
// certificate is the proxy's but that names no user; an error for a
// certificate that is not a proxy's. The headers are removed from a
// request it authenticates.
func (rh *RequestHeader) authenticate(r *http.Request) (registry.User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return registry.User{}, false, nil
	}
	if err := verifyClient(r, rh.CAs()); err != nil {
		return registry.User{}, false, err
	}
	if cn := r.TLS.PeerCertificates[0].Subject.CommonName; len(rh.AllowedNames) > 0 && !slices.Contains(rh.AllowedNames, cn) {
		return registry.User{}, false, fmt.Errorf("x509: subject with cn=%s is not in the allowed list", cn)
	}
	name := firstHeader(r.Header, rh.UsernameHeaders)
	if name == "" {
		return registry.User{}, false, nil
	}
	u := registry.User{Name: name, UID: firstHeader(r.Header, rh.UIDHeaders), Groups: []string{}}
	for _, h := range rh.GroupHeaders {
		for _, v := range r.Header[http.CanonicalHeaderKey(h)] {
			if v != "" {
				u.Groups = append(u.Groups, v)
			}
		}
	}
	for _, prefix := range rh.ExtraHeaderPrefixes {
		for h, vs := range r.Header {
			if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
				continue
			}
			key := strings.ToLower(h[len(prefix):])
			if k, err := url.PathUnescape(key); err == nil {
				key = k
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[key] = append(u.Extra[key], vs...)
		}
	}
	rh.clear(r.Header)
	return u, true, nil
}

// clear removes the headers that name a user.
func (rh *RequestHeader) clear(h http.Header) {
	for _, names := range [][]string{rh.UsernameHeaders, rh.UIDHeaders, rh.GroupHeaders} {
		for _, n := range names {
			h.Del(n)
		}
	}
	for _, prefix := range rh.ExtraHeaderPrefixes {
		for k := range h {
			if len(k) >= len(prefix) && strings.EqualFold(k[:len(prefix)], prefix) {
				delete(h, k)
			}
		}
	}
}

func firstHeader(h http.Header, names []string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// verifyClient checks the request's client certificate against pool,
// for client authentication, with the intermediates it sent.
func verifyClient(r *http.Request, pool *x509.CertPool) error {
	certs := r.TLS.PeerCertificates
	opts := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if len(certs) > 1 {
		opts.Intermediates = x509.NewCertPool()
		for _, c := range certs[1:] {
			opts.Intermediates.AddCert(c)
		}
	}
	_, err := certs[0].Verify(opts)
	return err
}
