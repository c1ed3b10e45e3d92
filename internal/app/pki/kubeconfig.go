package pki

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"sigs.k8s.io/yaml"
)

// The kubeconfig schema, cut down to what WriteKubeconfig fills in. Local
// structs instead of client-go's clientcmd/api keep client-go (and its large
// dependency tree) out of the server binary. []byte fields marshal as base64,
// which is how kubeconfig encodes *-data fields.
type kubeconfig struct {
	APIVersion     string         `json:"apiVersion"`
	Kind           string         `json:"kind"`
	Clusters       []namedCluster `json:"clusters"`
	Users          []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type namedCluster struct {
	Name    string  `json:"name"`
	Cluster cluster `json:"cluster"`
}

type cluster struct {
	Server                   string `json:"server"`
	CertificateAuthorityData []byte `json:"certificate-authority-data"`
}

type namedUser struct {
	Name string   `json:"name"`
	User authInfo `json:"user"`
}

type authInfo struct {
	ClientCertificateData []byte `json:"client-certificate-data"`
	ClientKeyData         []byte `json:"client-key-data"`
}

type namedContext struct {
	Name    string      `json:"name"`
	Context kubeContext `json:"context"`
}

type kubeContext struct {
	Cluster string `json:"cluster"`
	User    string `json:"user"`
}

// WriteKubeconfig writes a kubeconfig (cluster "kplane", user "kplane-admin",
// context "kplane", current-context kplane) that reaches serverURL with the
// CA and admin credential embedded, so it works from any directory and
// survives the data dir moving.
//
// The file holds the admin key, so it is mode 0600 and written atomically
// (temp file in the same dir, fsync, rename over path, fsync the dir): a
// crash never leaves a truncated kubeconfig behind. It replaces path
// entirely; it does not merge into an existing kubeconfig.
func WriteKubeconfig(path, serverURL string, b *Bundle) error {
	if b == nil || len(b.CACertPEM) == 0 || len(b.AdminCertPEM) == 0 || len(b.AdminKeyPEM) == 0 {
		return errors.New("pki: kubeconfig needs a CA and an admin credential")
	}
	// Only https makes sense: the kubeconfig carries a client certificate.
	if u, err := url.Parse(serverURL); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("pki: kubeconfig server %q is not an https URL", serverURL)
	}
	data, err := yaml.Marshal(kubeconfig{
		APIVersion: "v1",
		Kind:       "Config",
		Clusters: []namedCluster{{Name: "kplane", Cluster: cluster{
			Server: serverURL, CertificateAuthorityData: b.CACertPEM,
		}}},
		Users: []namedUser{{Name: "kplane-admin", User: authInfo{
			ClientCertificateData: b.AdminCertPEM, ClientKeyData: b.AdminKeyPEM,
		}}},
		Contexts:       []namedContext{{Name: "kplane", Context: kubeContext{Cluster: "kplane", User: "kplane-admin"}}},
		CurrentContext: "kplane",
	})
	if err != nil {
		return fmt.Errorf("pki: kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return writeFileAtomic(path, data, 0o600)
}
