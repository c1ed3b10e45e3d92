package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Exec credential plugins: a kubeconfig user's exec section, run as
// client-go's exec authenticator runs it (plugin/pkg/client/auth/exec,
// read for the behaviour, written anew) when kube-apiserver calls a
// webhook as that user:
//   - the command (resolved against the kubeconfig's directory when it
//     holds a path separator, else on PATH) runs with the server's
//     environment, the user's env and KUBERNETES_EXEC_INFO, an
//     ExecCredential of the configured apiVersion whose spec says it is
//     not interactive (and, with provideClusterInfo, names the webhook's
//     server, CA and server name);
//   - it prints an ExecCredential of the same apiVersion whose status
//     holds a token, a client certificate and key, or both, and may say
//     when they expire;
//   - the credentials are kept until they expire or a webhook answers
//     401, then the command runs again. A token goes in the
//     Authorization header (unless one is set), a certificate in the TLS
//     handshake;
//   - a failure is the call's, in client-go's words (getting
//     credentials: exec: executable X failed with exit code 1), under
//     the webhook's failurePolicy.
//
// kplane gives the command no terminal, so interactiveMode Always is
// refused when the kubeconfig is read (upstream refuses each call
// without a terminal); the command is bounded by the webhook's timeout.

// execAPIVersions are the ExecCredential versions a plugin may speak.
var execAPIVersions = map[string]bool{
	"client.authentication.k8s.io/v1":      true,
	"client.authentication.k8s.io/v1beta1": true,
}

// execConfig is a kubeconfig user's exec section.
type execConfig struct {
	Command string   `json:"command"`
	Args    []string `json:"args"`
	Env     []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"env"`
	APIVersion         string `json:"apiVersion"`
	ProvideClusterInfo bool   `json:"provideClusterInfo"`
	InteractiveMode    string `json:"interactiveMode"`
}

// execPlugin is one user's plugin, with the credentials it last gave
// for each cluster it was asked about ("" without provideClusterInfo).
type execPlugin struct {
	command            string
	args, env          []string
	apiVersion         string
	provideClusterInfo bool

	mu    sync.Mutex
	creds map[string]*execCreds
}

// execCreds are what one run of a plugin gave.
type execCreds struct {
	token   string
	cert    *tls.Certificate
	expires time.Time // zero: never
}

// newExecPlugin checks a kubeconfig's exec section; file resolves a
// path relative to the kubeconfig.
func newExecPlugin(raw json.RawMessage, file func(string) string) (*execPlugin, error) {
	var c execConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("exec: %w", err)
	}
	if !execAPIVersions[c.APIVersion] {
		return nil, fmt.Errorf("exec plugin: invalid apiVersion %q", c.APIVersion)
	}
	if c.Command == "" {
		return nil, errors.New("exec plugin: command is required")
	}
	switch c.InteractiveMode {
	case "", "Never", "IfAvailable":
	case "Always":
		return nil, errors.New("exec plugin cannot support interactive mode: standard input is not a terminal")
	default:
		return nil, fmt.Errorf("exec plugin: unknown interactiveMode: %q", c.InteractiveMode)
	}
	p := &execPlugin{command: c.Command, args: c.Args, apiVersion: c.APIVersion, provideClusterInfo: c.ProvideClusterInfo,
		creds: map[string]*execCreds{}}
	if strings.ContainsRune(p.command, filepath.Separator) {
		p.command = file(p.command)
	}
	p.command = filepath.Clean(p.command)
	for _, e := range c.Env {
		p.env = append(p.env, e.Name+"="+e.Value)
	}
	return p, nil
}

// execCluster is the cluster a plugin with provideClusterInfo is told
// of: the webhook's server, as client-go's ExecCredential names it.
type execCluster struct {
	Server                   string          `json:"server"`
	TLSServerName            string          `json:"tls-server-name,omitempty"`
	CertificateAuthorityData []byte          `json:"certificate-authority-data,omitempty"`
	Config                   json.RawMessage `json:"config"` // the cluster's exec extension: none
}

// execInfo is KUBERNETES_EXEC_INFO, in client-go's member order.
type execInfo struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	Spec       struct {
		Cluster     *execCluster `json:"cluster,omitempty"`
		Interactive bool         `json:"interactive"`
	} `json:"spec"`
}

// get returns the credentials for cluster, running the plugin if it has
// none that have not expired (or stale is what it has).
func (p *execPlugin) get(ctx context.Context, cluster *execCluster, stale *execCreds) (*execCreds, error) {
	key := ""
	if p.provideClusterInfo {
		data, _ := json.Marshal(cluster)
		key = string(data)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.creds[key]; c != nil && c != stale && (c.expires.IsZero() || time.Now().Before(c.expires)) {
		return c, nil
	}
	c, err := p.run(ctx, cluster)
	if err != nil {
		return nil, err
	}
	p.creds[key] = c
	return c, nil
}

// run runs the plugin once.
func (p *execPlugin) run(ctx context.Context, cluster *execCluster) (*execCreds, error) {
	in := execInfo{Kind: "ExecCredential", APIVersion: p.apiVersion}
	if p.provideClusterInfo {
		in.Spec.Cluster = cluster
	}
	info, err := json.Marshal(&in)
	if err != nil {
		return nil, fmt.Errorf("encode ExecCredentials: %v", err)
	}
	var stdout bytes.Buffer
	cmd := exec.CommandContext(ctx, p.command, p.args...)
	cmd.Env = append(append(os.Environ(), p.env...), "KUBERNETES_EXEC_INFO="+string(info))
	cmd.Stdout, cmd.Stderr = &stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var notFound *exec.Error
		var exit *exec.ExitError
		switch {
		case errors.As(err, &notFound):
			return nil, fmt.Errorf("exec: executable %s not found", p.command)
		case errors.As(err, &exit):
			return nil, fmt.Errorf("exec: executable %s failed with exit code %d", p.command, exit.ExitCode())
		}
		return nil, fmt.Errorf("exec: %v", err)
	}
	var out struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Status     *struct {
			Token                 string     `json:"token"`
			ClientCertificateData string     `json:"clientCertificateData"`
			ClientKeyData         string     `json:"clientKeyData"`
			ExpirationTimestamp   *time.Time `json:"expirationTimestamp"`
		} `json:"status"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return nil, fmt.Errorf("decoding stdout: %v", err)
	}
	if out.Kind != "ExecCredential" {
		return nil, fmt.Errorf("decoding stdout: kind %q, want ExecCredential", out.Kind)
	}
	if out.APIVersion != p.apiVersion {
		return nil, fmt.Errorf("exec plugin is configured to use API version %s, plugin returned version %s", p.apiVersion, out.APIVersion)
	}
	st := out.Status
	switch {
	case st == nil:
		return nil, errors.New("exec plugin didn't return a status field")
	case st.Token == "" && st.ClientCertificateData == "" && st.ClientKeyData == "":
		return nil, errors.New("exec plugin didn't return a token or cert/key pair")
	case (st.ClientCertificateData == "") != (st.ClientKeyData == ""):
		return nil, errors.New("exec plugin returned only certificate or key, not both")
	}
	c := &execCreds{token: st.Token}
	if st.ExpirationTimestamp != nil {
		c.expires = *st.ExpirationTimestamp
	}
	if st.ClientCertificateData != "" {
		cert, err := tls.X509KeyPair([]byte(st.ClientCertificateData), []byte(st.ClientKeyData))
		if err != nil {
			return nil, fmt.Errorf("failed parsing client key/certificate: %v", err)
		}
		c.cert = &cert
	}
	return c, nil
}

// execTransport adds a plugin's credentials to the requests of base,
// whose TLS client config asks it for certificates (clientCertificate).
type execTransport struct {
	plugin  *execPlugin
	cluster func(*http.Request) *execCluster
	base    http.RoundTripper
}

type execCredsKey struct{}

func (t *execTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	cluster := t.cluster(req)
	creds, err := t.plugin.get(req.Context(), cluster, nil)
	if err != nil {
		return nil, fmt.Errorf("getting credentials: %v", err)
	}
	req = req.Clone(context.WithValue(req.Context(), execCredsKey{}, creds))
	if creds.token != "" && req.Header.Get("Authorization") == "" {
		req.Header.Set("Authorization", "Bearer "+creds.token)
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		// As client-go: new credentials for the next call (an error is
		// the next call's), on new connections if the certificate
		// changed.
		if fresh, err := t.plugin.get(req.Context(), cluster, creds); err == nil && fresh.cert != creds.cert {
			t.CloseIdleConnections()
		}
	}
	return resp, err
}

// clientCertificate is a TLS client config's GetClientCertificate for
// connections an execTransport opens: the certificate of the request's
// credentials, or none.
func clientCertificate(info *tls.CertificateRequestInfo) (*tls.Certificate, error) {
	if c, ok := info.Context().Value(execCredsKey{}).(*execCreds); ok && c.cert != nil {
		return c.cert, nil
	}
	return &tls.Certificate{}, nil
}

// CloseIdleConnections closes base's, as http.Client asks.
func (t *execTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
