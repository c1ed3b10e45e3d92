package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kplane-dev/kplane/internal/apiserver"
)

// RequestHeaderFlags are kube-apiserver's --requestheader-* flags: front
// proxies, whose client certificates ClientCAFile's authorities sign,
// name the user in headers.
type RequestHeaderFlags struct {
	ClientCAFile        string
	AllowedNames        []string
	UsernameHeaders     []string
	UIDHeaders          []string
	GroupHeaders        []string
	ExtraHeaderPrefixes []string
}

// validate checks the flags as upstream does, with its errors, and
// returns its warnings.
func (f *RequestHeaderFlags) validate() (warnings []string, err error) {
	var errs []error
	for _, c := range []struct {
		flag   string
		values []string
	}{
		{"requestheader-username-headers", f.UsernameHeaders},
		{"requestheader-group-headers", f.GroupHeaders},
		{"requestheader-extra-headers-prefix", f.ExtraHeaderPrefixes},
		{"requestheader-allowed-names", f.AllowedNames},
	} {
		if slices.ContainsFunc(c.values, func(v string) bool { return strings.TrimSpace(v) == "" }) {
			errs = append(errs, fmt.Errorf("empty value in %q", c.flag))
		}
	}
	has := func(values []string, v string) bool {
		return slices.ContainsFunc(values, func(x string) bool { return strings.EqualFold(x, v) })
	}
	if len(f.UsernameHeaders) > 0 && !has(f.UsernameHeaders, "X-Remote-User") {
		warnings = append(warnings, "--requestheader-username-headers is set without specifying the standard X-Remote-User header - API aggregation will not work")
	}
	if len(f.GroupHeaders) > 0 && !has(f.GroupHeaders, "X-Remote-Group") {
		warnings = append(warnings, "--requestheader-group-headers is set without specifying the standard X-Remote-Group header - API aggregation will not work")
	}
	if len(f.ExtraHeaderPrefixes) > 0 && !has(f.ExtraHeaderPrefixes, "X-Remote-Extra-") {
		warnings = append(warnings, "--requestheader-extra-headers-prefix is set without specifying the standard X-Remote-Extra- header prefix - API aggregation will not work")
	}
	if slices.ContainsFunc(f.UIDHeaders, func(v string) bool { return strings.TrimSpace(v) == "" }) {
		errs = append(errs, fmt.Errorf("empty value in %q", "requestheader-uid-headers"))
	}
	if len(f.UIDHeaders) > 0 && !has(f.UIDHeaders, "X-Remote-Uid") {
		errs = append(errs, errors.New("--requestheader-uid-headers is set without specifying the standard X-Remote-Uid header - API aggregation will not work"))
	}
	switch len(errs) {
	case 0:
		return warnings, nil
	case 1:
		return warnings, errs[0]
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return warnings, errors.New("[" + strings.Join(msgs, ", ") + "]")
}

// proxyCAs are the front proxies' authorities, read again when their
// file changes.
type proxyCAs struct {
	path string
	log  *slog.Logger
	pool atomic.Pointer[x509.CertPool]
	// combined is the pool the TLS handshake verifies client
	// certificates with: kplane's own authority and the proxies'.
	combined atomic.Pointer[x509.CertPool]
	// own is kplane's own authority, and ownPEM its certificate, set
	// once the credentials are loaded (setOwn).
	own    atomic.Pointer[x509.CertPool]
	ownPEM atomic.Pointer[[]byte]
	last   []byte
	// lastPEM is last, for other goroutines than the watch's.
	lastPEM atomic.Pointer[[]byte]
	// changed, if set, is called after the file was read again.
	changed func()
}

// newProxyCAs reads path.
func newProxyCAs(path string, log *slog.Logger) (*proxyCAs, error) {
	p := &proxyCAs{path: path, log: log}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := p.set(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func (p *proxyCAs) set(data []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return errors.New("data does not contain any valid RSA or ECDSA certificates")
	}
	combined := x509.NewCertPool()
	if own := p.ownPEM.Load(); own != nil {
		combined.AppendCertsFromPEM(*own)
	}
	combined.AppendCertsFromPEM(data)
	p.pool.Store(pool)
	p.combined.Store(combined)
	p.last = data
	p.lastPEM.Store(&data)
	return nil
}

// current is the proxies' authorities as last read (PEM).
func (p *proxyCAs) current() []byte {
	if d := p.lastPEM.Load(); d != nil {
		return *d
	}
	return nil
}

// setOwn sets kplane's own authority.
func (p *proxyCAs) setOwn(pem []byte, pool *x509.CertPool) {
	p.own.Store(pool)
	p.ownPEM.Store(&pem)
	p.set(p.last)
}

// ownCAs is kplane's own authority.
func (p *proxyCAs) ownCAs() *x509.CertPool {
	if pool := p.own.Load(); pool != nil {
		return pool
	}
	return x509.NewCertPool()
}

// watch reads the file again when it changes, until ctx ends: a file
// that holds no certificate is logged and the authorities in force stay.
func (p *proxyCAs) watch(ctx context.Context) {
	watchFile(ctx, time.Minute, p.path, func() {
		data, err := os.ReadFile(p.path)
		if err != nil || string(data) == string(p.last) {
			return
		}
		if err := p.set(data); err != nil {
			p.log.Error("the request header client CA file does not hold certificates; the previous ones stay", "file", p.path, "err", err)
			return
		}
		p.log.Info("reloaded the request header client CA file", "file", p.path)
		if p.changed != nil {
			p.changed()
		}
	}, func(err error) { p.log.Error("watching the request header client CA file", "err", err) })
}

// tlsConfig is base, verifying client certificates against both
// authorities as they are now.
func (p *proxyCAs) tlsConfig(base *tls.Config) *tls.Config {
	cfg := base.Clone()
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		c := base.Clone()
		c.ClientCAs = p.combined.Load()
		return c, nil
	}
	return cfg
}

// apiserver is the API server's configuration of front proxies.
func (f *RequestHeaderFlags) apiserver(p *proxyCAs) *apiserver.RequestHeader {
	trim := func(vs []string) []string {
		out := make([]string, len(vs))
		for i, v := range vs {
			out[i] = strings.TrimSpace(v)
		}
		return out
	}
	return &apiserver.RequestHeader{
		CAs:                 p.pool.Load,
		AllowedNames:        slices.Clone(f.AllowedNames),
		UsernameHeaders:     trim(f.UsernameHeaders),
		UIDHeaders:          trim(f.UIDHeaders),
		GroupHeaders:        trim(f.GroupHeaders),
		ExtraHeaderPrefixes: trim(f.ExtraHeaderPrefixes),
	}
}
