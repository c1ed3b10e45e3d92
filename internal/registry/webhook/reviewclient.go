package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

// reviewClient posts reviews (SubjectAccessReviews, TokenReviews) to
// the webhook a kubeconfig names, as upstream's generic webhook client:
// to its cluster's server URL with ?timeout=, the user's credentials,
// retried with backoff.
type reviewClient struct {
	target    string
	client    *http.Client
	creds     *Credentials
	backoff   wait.Backoff
	userAgent string
	// retry says whether a failed call is made again (nil: retryable).
	retry func(error) bool
}

// defaultBackoff is upstream's webhooks' retry backoff: up to five calls,
// 500 ms apart and then 1.5 times longer each time, with jitter.
var defaultBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// newReviewClient reads the kubeconfig at path; calls are bounded by
// timeout (0: 30 s) and retried by backoff (zero: defaultBackoff).
func newReviewClient(path string, timeout time.Duration, backoff wait.Backoff, userAgent string) (*reviewClient, error) {
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	if backoff.Steps == 0 {
		backoff = defaultBackoff
	}
	server, caBundle, serverName, creds, insecure, err := loadCluster(path)
	if err != nil {
		return nil, err
	}
	var clients clientCache
	client, err := clients.get(caBundle, serverName, creds)
	if err != nil {
		return nil, err
	}
	if insecure {
		t := client.Transport
		if et, ok := t.(*execTransport); ok {
			t = et.base
		}
		t.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	}
	client.Timeout = timeout
	// As upstream's REST client, the call asks the webhook to answer
	// within the timeout.
	target, _ := url.Parse(server)
	q := target.Query()
	q.Set("timeout", timeout.String())
	target.RawQuery = q.Encode()
	return &reviewClient{target: target.String(), client: client, creds: creds, backoff: backoff, userAgent: userAgent}, nil
}

// post sends body (and a newline, as upstream's encoder ends it) and
// hands each 2xx answer to decode; a call that fails in a way worth
// retrying (retryable) is made again as the backoff allows. called, if
// set, is told of each call: how long it took and how it ended. The
// error is the last call's.
func (c *reviewClient) post(ctx context.Context, body []byte, decode func(data []byte, contentType string) error, called func(time.Duration, error)) error {
	body = append(body, '\n')
	var callErr error
	waitErr := wait.ExponentialBackoffWithContext(ctx, c.backoff, func(ctx context.Context) (bool, error) {
		start := time.Now()
		var data []byte
		var contentType string
		data, contentType, callErr = postRaw(ctx, c.client, c.target, c.userAgent, c.creds, body)
		if callErr == nil {
			callErr = decode(data, contentType)
		}
		if called != nil {
			called(time.Since(start), callErr)
		}
		retry := c.retry
		if retry == nil {
			retry = retryable
		}
		switch {
		case callErr == nil:
			return true, nil
		case retry(callErr):
			return false, nil
		}
		return false, callErr
	})
	if callErr == nil && waitErr != nil {
		return fmt.Errorf("webhook call failed: %s", waitErr.Error())
	}
	return callErr
}

// decodeReview reads a webhook's answer of the kind sent, as upstream's
// REST client decodes it, with its errors: one of another kind or
// version is refused; one without apiVersion and kind is taken as of the
// version sent (group/version). into receives it.
func decodeReview(data []byte, contentType, group, version, kind string, into any) error {
	if len(data) == 0 {
		return fmt.Errorf("0-length response with status code: 200 and content type: %s", contentType)
	}
	var typ struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
	}
	if err := json.Unmarshal(data, &typ); err != nil {
		return fmt.Errorf("couldn't get version/kind; json parse error: %w", err)
	}
	sent := group + "/" + version
	if typ.APIVersion != "" || typ.Kind != "" {
		switch other := strings.TrimPrefix(typ.APIVersion, group+"/"); {
		case typ.Kind == kind && typ.APIVersion != sent && (other == "v1" || other == "v1beta1"):
			return fmt.Errorf("converting (%s.%s) to (%s.%s): unknown conversion", other, kind, version, kind)
		case typ.Kind != kind || typ.APIVersion != sent:
			return fmt.Errorf("no kind %q is registered for version %q in scheme \"pkg/runtime/scheme.go:111\"", typ.Kind, typ.APIVersion)
		}
	}
	return json.Unmarshal(data, into)
}

// loadCluster reads the current context of the kubeconfig at path: its
// cluster's server, certificate authority and TLS server name, and its
// user's credentials; insecure: its insecure-skip-tls-verify (the
// server's certificate not checked).
func loadCluster(path string) (server string, caBundle []byte, serverName string, creds *Credentials, insecure bool, err error) {
	if _, err := os.Stat(path); err != nil {
		return "", nil, "", nil, false, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, "", nil, false, err
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(data, &kc); err != nil {
		return "", nil, "", nil, false, fmt.Errorf("%s: %w", path, err)
	}
	file := relativeTo(filepath.Dir(path))
	if kc.CurrentContext == "" {
		// client-go's words for a kubeconfig that names no cluster to use.
		return "", nil, "", nil, false, errors.New("invalid configuration: no configuration has been provided, try setting KUBERNETES_MASTER environment variable")
	}
	var clusterName, userName string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == kc.CurrentContext {
			clusterName, userName, found = c.Context.Cluster, c.Context.User, true
		}
	}
	if !found {
		return "", nil, "", nil, false, fmt.Errorf("%s: current-context %q is not among its contexts", path, kc.CurrentContext)
	}
	var cluster *kubeconfCluster
	for i := range kc.Clusters {
		if kc.Clusters[i].Name == clusterName {
			cluster = &kc.Clusters[i].Cluster
		}
	}
	if cluster == nil {
		return "", nil, "", nil, false, fmt.Errorf("%s: context %q names cluster %q, which it does not hold", path, kc.CurrentContext, clusterName)
	}
	u, err := url.Parse(cluster.Server)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return "", nil, "", nil, false, fmt.Errorf("%s: cluster %q: server %q must be an https URL", path, clusterName, cluster.Server)
	}
	caBundle = cluster.CertificateAuthorityData
	if len(caBundle) == 0 && cluster.CertificateAuthority != "" {
		if caBundle, err = os.ReadFile(file(cluster.CertificateAuthority)); err != nil {
			return "", nil, "", nil, false, err
		}
	}
	if cluster.InsecureSkipTLSVerify && (len(caBundle) > 0 || cluster.CertificateAuthority != "") {
		// client-go's words.
		return "", nil, "", nil, false, errors.New("specifying a root certificates file with the insecure flag is not allowed")
	}
	serverName = cluster.TLSServerName
	if serverName == "" {
		serverName = u.Hostname()
	}
	for _, user := range kc.Users {
		if user.Name == userName && userName != "" {
			if creds, err = credentials(user.Name, user.User, file); err != nil {
				return "", nil, "", nil, false, fmt.Errorf("%s: user %q: %w", path, user.Name, err)
			}
		}
	}
	return cluster.Server, caBundle, serverName, creds, cluster.InsecureSkipTLSVerify, nil
}

// retryable reports whether a failed call is worth trying again, as
// upstream's webhooks judge: the connection was reset or lost, or the
// webhook answered 500, 504 or 429, or asked to be called again later.
func retryable(err error) bool {
	if utilnet.IsConnectionReset(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		apierrors.IsInternalError(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) {
		return true
	}
	_, later := apierrors.SuggestsClientDelay(err)
	return later
}
