package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// How kplane authenticates to admission webhooks, as kube-apiserver does
// with --admission-control-config-file (k8s.io/apiserver's
// admission/config.go, webhook/config and util/webhook/authentication.go,
// read for the behaviour, written anew): an AdmissionConfiguration names,
// for the MutatingAdmissionWebhook and ValidatingAdmissionWebhook
// plugins, a WebhookAdmissionConfiguration whose kubeConfigFile holds a
// user per webhook host. A call to a webhook takes the user named
// exactly after its host and port ("name.namespace.svc:443" for a
// service, the URL's host as written for a URL), else "*." and a suffix
// of the host ("*.namespace.svc"), else the same without a port of 443,
// else "*", else the current context's user; none at all is anonymous.

// Credentials are one kubeconfig user's: what a webhook call presents.
type Credentials struct {
	name               string // the kubeconfig user's
	token              string
	username, password string
	cert               *tls.Certificate
	impersonate        impersonation
	exec               *execPlugin // exec.go
	// tokenFile, if set, is read again for the token once what was read
	// is 50 s old, as client-go's cached file token source does, so that
	// a token rotated in the file (a projected one) is sent.
	tokenFile string
	file      struct {
		sync.Mutex
		token string
		read  time.Time
	}
}

// tokenFileNow is the clock of token file reads (tests change it).
var tokenFileNow = time.Now

// bearer is the token to send: the token file's, read at most every
// 50 s (while it cannot be read or is empty, the last one read, or the
// inline token), or the inline token.
func (c *Credentials) bearer() string {
	if c.tokenFile == "" {
		return c.token
	}
	c.file.Lock()
	defer c.file.Unlock()
	if now := tokenFileNow(); c.file.token == "" || now.Sub(c.file.read) >= 50*time.Second {
		if data, err := os.ReadFile(c.tokenFile); err == nil {
			if t := strings.TrimSpace(string(data)); t != "" {
				c.file.token, c.file.read = t, now
			}
		}
	}
	if c.file.token != "" {
		return c.file.token
	}
	return c.token
}

type impersonation struct {
	user, uid string
	groups    []string
	extra     map[string][]string
}

// apply sets c's headers on a webhook request.
func (c *Credentials) apply(req *http.Request) {
	if c == nil {
		return
	}
	switch token := c.bearer(); {
	case token != "":
		req.Header.Set("Authorization", "Bearer "+token)
	case c.username != "" || c.password != "":
		req.SetBasicAuth(c.username, c.password)
	}
	if im := c.impersonate; im.user != "" {
		req.Header.Set("Impersonate-User", im.user)
		if im.uid != "" {
			req.Header.Set("Impersonate-Uid", im.uid)
		}
		for _, g := range im.groups {
			req.Header.Add("Impersonate-Group", g)
		}
		for k, vs := range im.extra {
			for _, v := range vs {
				req.Header.Add("Impersonate-Extra-"+k, v)
			}
		}
	}
}

// WebhookAuth is the users of one kubeconfig, by name, found for each
// webhook host as upstream finds them. The zero value (no
// kubeconfig) calls every webhook anonymously.
type WebhookAuth struct {
	users   map[string]*Credentials
	current *Credentials // the current context's user, if any
}

// For returns the credentials for a webhook at hostPort (nil:
// anonymous).
func (a *WebhookAuth) For(hostPort string) *Credentials {
	if a == nil || (len(a.users) == 0 && a.current == nil) {
		return nil
	}
	lookup := func(target string) *Credentials {
		if c, ok := a.users[target]; ok {
			return c
		}
		steps := strings.Split(target, ".")
		for i := 1; i < len(steps); i++ {
			if c, ok := a.users["*."+strings.Join(steps[i:], ".")]; ok {
				return c
			}
		}
		return nil
	}
	if c := lookup(hostPort); c != nil {
		return c
	}
	if host, port, err := net.SplitHostPort(hostPort); err == nil && port == "443" {
		if c := lookup(host); c != nil {
			return c
		}
	}
	if c, ok := a.users["*"]; ok {
		return c
	}
	return a.current
}

// kubeconfig is the part of a kubeconfig file webhook authentication
// reads.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Contexts       []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster string `json:"cluster"`
			User    string `json:"user"`
		} `json:"context"`
	} `json:"contexts"`
	Clusters []struct {
		Name    string          `json:"name"`
		Cluster kubeconfCluster `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string       `json:"name"`
		User kubeconfUser `json:"user"`
	} `json:"users"`
}

// kubeconfCluster is what an authorization webhook's kubeconfig says of
// its cluster (an admission webhook's configuration says it itself).
type kubeconfCluster struct {
	Server                   string `json:"server"`
	CertificateAuthority     string `json:"certificate-authority"`
	CertificateAuthorityData []byte `json:"certificate-authority-data"`
	TLSServerName            string `json:"tls-server-name"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
}

type kubeconfUser struct {
	Token                 string              `json:"token"`
	TokenFile             string              `json:"tokenFile"`
	ClientCertificate     string              `json:"client-certificate"`
	ClientCertificateData []byte              `json:"client-certificate-data"`
	ClientKey             string              `json:"client-key"`
	ClientKeyData         []byte              `json:"client-key-data"`
	Username              string              `json:"username"`
	Password              string              `json:"password"`
	Impersonate           string              `json:"as"`
	ImpersonateUID        string              `json:"as-uid"`
	ImpersonateGroups     []string            `json:"as-groups"`
	ImpersonateUserExtra  map[string][]string `json:"as-user-extra"`
	Exec                  json.RawMessage     `json:"exec"`
	AuthProvider          json.RawMessage     `json:"auth-provider"`
}

// LoadWebhookAuth reads the users of the kubeconfig at path. Files a
// user names are relative to the kubeconfig's directory, as kubectl
// reads them; token files and certificates are read now.
func LoadWebhookAuth(path string) (*WebhookAuth, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	file := relativeTo(filepath.Dir(path))
	a := &WebhookAuth{users: map[string]*Credentials{}}
	for _, u := range kc.Users {
		c, err := credentials(u.Name, u.User, file)
		if err != nil {
			return nil, fmt.Errorf("%s: user %q: %w", path, u.Name, err)
		}
		a.users[u.Name] = c
	}
	for _, ctx := range kc.Contexts {
		if ctx.Name == kc.CurrentContext && kc.CurrentContext != "" {
			a.current = a.users[ctx.Context.User]
		}
	}
	return a, nil
}

// relativeTo resolves the file names a kubeconfig in dir holds, as
// kubectl does: relative to dir.
func relativeTo(dir string) func(string) string {
	return func(name string) string {
		if name == "" || filepath.IsAbs(name) {
			return name
		}
		return filepath.Join(dir, name)
	}
}

func credentials(name string, u kubeconfUser, file func(string) string) (*Credentials, error) {
	if len(u.AuthProvider) > 0 && string(u.AuthProvider) != "null" {
		return nil, errors.New("auth provider not supported")
	}
	c := &Credentials{name: name, username: u.Username, password: u.Password, token: u.Token,
		impersonate: impersonation{user: u.Impersonate, uid: u.ImpersonateUID, groups: u.ImpersonateGroups, extra: u.ImpersonateUserExtra}}
	if len(u.Exec) > 0 && string(u.Exec) != "null" {
		var err error
		if c.exec, err = newExecPlugin(u.Exec, file); err != nil {
			return nil, err
		}
	}
	if u.TokenFile != "" {
		// Without an inline token, the file must be readable now.
		c.tokenFile = file(u.TokenFile)
		if c.token == "" {
			if _, err := os.ReadFile(c.tokenFile); err != nil {
				return nil, err
			}
		}
	}
	if u.ClientCertificate != "" || len(u.ClientCertificateData) > 0 {
		certPEM, keyPEM := u.ClientCertificateData, u.ClientKeyData
		var err error
		if len(certPEM) == 0 {
			if certPEM, err = os.ReadFile(file(u.ClientCertificate)); err != nil {
				return nil, err
			}
		}
		if len(keyPEM) == 0 {
			if keyPEM, err = os.ReadFile(file(u.ClientKey)); err != nil {
				return nil, err
			}
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		c.cert = &cert
	}
	return c, nil
}

// AdmissionConfig is what kplane takes from an AdmissionConfiguration.
type AdmissionConfig struct {
	// MutatingAuth and ValidatingAuth are how the MutatingAdmissionWebhook
	// and ValidatingAdmissionWebhook plugins call webhooks (nil:
	// anonymously).
	MutatingAuth, ValidatingAuth *WebhookAuth
	// Static are the plugins' staticManifestsDir.
	Static StaticDirs
	// Ignored are the other plugins it configures, which kplane does not
	// run.
	Ignored []string
}

// ReadAdmissionConfig reads an AdmissionConfiguration
// (apiserver.config.k8s.io/v1, v1beta1 or v1alpha1). A plugin's
// configuration is inline or in a file (path, relative to this file),
// read strictly as upstream reads it:
//   - MutatingAdmissionWebhook and ValidatingAdmissionWebhook: a
//     WebhookAdmissionConfiguration, whose kubeConfigFile (an absolute
//     path) holds the users webhooks are called as, and whose
//     staticManifestsDir holds configurations read from files;
//   - ValidatingAdmissionPolicy and MutatingAdmissionPolicy: a
//     ValidatingAdmissionPolicyConfiguration or a
//     MutatingAdmissionPolicyConfiguration, whose staticManifestsDir
//     holds policies and bindings read from files.
//
// A staticManifestsDir must be an absolute path to a directory.
func ReadAdmissionConfig(path string) (*AdmissionConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("unable to read admission control configuration from %q [%v]", path, err)
	}
	var cfg struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Plugins    []struct {
			Name          string          `json:"name"`
			Path          string          `json:"path"`
			Configuration json.RawMessage `json:"configuration"`
		} `json:"plugins"`
	}
	if err := strictYAML(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch cfg.APIVersion {
	case "apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1":
	default:
		return nil, fmt.Errorf("%s: apiVersion %q: want apiserver.config.k8s.io/v1", path, cfg.APIVersion)
	}
	if cfg.Kind != "AdmissionConfiguration" {
		return nil, fmt.Errorf("%s: kind %q: want AdmissionConfiguration", path, cfg.Kind)
	}
	out := &AdmissionConfig{}
	for _, p := range cfg.Plugins {
		var auth **WebhookAuth
		var dir *string
		want := "WebhookAdmissionConfiguration"
		switch p.Name {
		case pluginMutatingWebhook:
			auth, dir = &out.MutatingAuth, &out.Static.MutatingWebhooks
		case pluginValidatingWebhook:
			auth, dir = &out.ValidatingAuth, &out.Static.ValidatingWebhooks
		case pluginValidatingPolicy:
			dir, want = &out.Static.ValidatingPolicies, "ValidatingAdmissionPolicyConfiguration"
		case pluginMutatingPolicy:
			dir, want = &out.Static.MutatingPolicies, "MutatingAdmissionPolicyConfiguration"
		default:
			out.Ignored = append(out.Ignored, p.Name)
			continue
		}
		raw := []byte(p.Configuration)
		if p.Path != "" {
			file := p.Path
			if !filepath.IsAbs(file) {
				file = filepath.Join(filepath.Dir(path), file)
			}
			if raw, err = os.ReadFile(file); err != nil {
				return nil, fmt.Errorf("plugin %s: %w", p.Name, err)
			}
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var pc struct {
			APIVersion         string `json:"apiVersion"`
			Kind               string `json:"kind"`
			KubeConfigFile     string `json:"kubeConfigFile"`
			StaticManifestsDir string `json:"staticManifestsDir"`
		}
		if err := strictYAML(raw, &pc); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", p.Name, err)
		}
		if pc.APIVersion != "apiserver.config.k8s.io/v1" || pc.Kind != want {
			return nil, fmt.Errorf("plugin %s: %s %s: want apiserver.config.k8s.io/v1 %s", p.Name, pc.APIVersion, pc.Kind, want)
		}
		if auth == nil && pc.KubeConfigFile != "" {
			return nil, fmt.Errorf("plugin %s: strict decoding error: unknown field \"kubeConfigFile\"", p.Name)
		}
		if err := checkStaticDir(pc.StaticManifestsDir); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", p.Name, err)
		}
		*dir = pc.StaticManifestsDir
		if pc.KubeConfigFile == "" {
			continue
		}
		if !filepath.IsAbs(pc.KubeConfigFile) {
			return nil, fmt.Errorf("plugin %s: kubeConfigFile: Invalid value: %q: must be an absolute file path", p.Name, pc.KubeConfigFile)
		}
		if *auth, err = LoadWebhookAuth(pc.KubeConfigFile); err != nil {
			return nil, fmt.Errorf("plugin %s: %w", p.Name, err)
		}
	}
	return out, nil
}

// checkStaticDir refuses a staticManifestsDir that is not an absolute
// path to a directory, with upstream's words.
func checkStaticDir(dir string) error {
	if dir == "" {
		return nil
	}
	path := field.NewPath("staticManifestsDir")
	if !filepath.IsAbs(dir) {
		return field.Invalid(path, dir, "must be an absolute file path")
	}
	info, err := os.Stat(dir)
	if err != nil {
		return field.Invalid(path, dir, fmt.Sprintf("unable to read: %v", err))
	}
	if !info.IsDir() {
		return field.Invalid(path, dir, "must be a directory")
	}
	return nil
}

// strictYAML decodes YAML or JSON data into v, refusing unknown fields.
func strictYAML(data []byte, v any) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
