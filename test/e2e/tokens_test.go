package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Service account tokens work as on a cluster:
//   - the real kubectl makes one (kubectl create token), and a kubeconfig
//     that holds only that token (no client certificate) works with
//     kubectl, as the service account's user, across a restart;
//   - client-go (protobuf) asks for one bound to a Secret and for another
//     audience, then asks what a metrics endpoint's auth filter
//     (controller-runtime's, kube-rbac-proxy) asks: a TokenReview for
//     its audience, then a SubjectAccessReview for the user it names;
//   - deleting the Secret, or the ServiceAccount, revokes the token;
//   - a Secret of type kubernetes.io/service-account-token gets a token
//     that works, and goes with its ServiceAccount.
func TestServiceAccountTokens(t *testing.T) {
	s := startServer(t)
	ctx := context.Background()
	s.mustKubectl(t, "create", "serviceaccount", "robot")
	token := strings.TrimSpace(s.mustKubectl(t, "create", "token", "robot", "--duration", "20m"))

	// A kubeconfig with the token alone.
	admin := s.config()
	tokenConfig := clientcmdapi.NewConfig()
	tokenConfig.Clusters["kplane"] = &clientcmdapi.Cluster{Server: admin.Host, CertificateAuthorityData: admin.CAData}
	tokenConfig.AuthInfos["robot"] = &clientcmdapi.AuthInfo{Token: token}
	tokenConfig.Contexts["robot"] = &clientcmdapi.Context{Cluster: "kplane", AuthInfo: "robot", Namespace: "default"}
	tokenConfig.CurrentContext = "robot"
	tokenKubeconfig := filepath.Join(t.TempDir(), "robot-kubeconfig")
	if err := clientcmd.WriteToFile(*tokenConfig, tokenKubeconfig); err != nil {
		t.Fatal(err)
	}
	asRobot := func(args ...string) (string, string, error) {
		return s.kubectl(append([]string{"--kubeconfig", tokenKubeconfig}, args...)...)
	}
	if out, errOut, err := asRobot("create", "configmap", "made-by-robot", "--from-literal=k=v"); err != nil {
		t.Fatalf("kubectl with the token: %v\n%s%s", err, out, errOut)
	}
	if out, _, err := asRobot("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"); err != nil || out != "system:serviceaccount:default:robot" {
		t.Errorf("kubectl auth whoami with the token: %q, %v", out, err)
	}
	s.restart() // the key that signed it is kept in the data directory
	if out, errOut, err := asRobot("get", "configmap", "made-by-robot", "-o", "name"); err != nil || out != "configmap/made-by-robot\n" {
		t.Errorf("after a restart: %q, %v %s", out, err, errOut)
	}

	// client-go, in protobuf as its typed clients speak it.
	cfg := s.config()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bound"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	req, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "robot", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences:      []string{"metrics"},
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Secret", APIVersion: "v1", Name: "bound"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if exp := *req.Spec.ExpirationSeconds; exp != 3600 || req.Status.Token == "" || req.Status.ExpirationTimestamp.Sub(req.CreationTimestamp.Time).Seconds() != 3600 {
		t.Errorf("token request answered %+v", req)
	}
	review := func(token string) authenticationv1.TokenReviewStatus {
		t.Helper()
		r, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{"metrics"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	st := review(req.Status.Token)
	if !st.Authenticated || st.User.Username != "system:serviceaccount:default:robot" || strings.Join(st.Audiences, ",") != "metrics" {
		t.Fatalf("token review: %+v", st)
	}
	sar, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: st.User.Username, UID: st.User.UID, Groups: st.User.Groups,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
		},
	}, metav1.CreateOptions{})
	if err != nil || !sar.Status.Allowed {
		t.Errorf("subject access review: %+v, %v", sar, err)
	}
	// The API server is not the metrics token's audience.
	robot := rest.AnonymousClientConfig(cfg)
	robot.BearerToken = req.Status.Token
	if _, err := kubernetes.NewForConfigOrDie(robot).CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("a token for another audience was taken by the API server")
	}

	if err := cs.CoreV1().Secrets("default").Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if st := review(req.Status.Token); st.Authenticated || !strings.Contains(st.Error, "service account token has been invalidated") {
		t.Errorf("after its Secret's deletion: %+v", st)
	}
	// A Secret of type kubernetes.io/service-account-token gets a
	// long-lived token, as kube-controller-manager fills it.
	s.mustKubectl(t, "apply", "-f", writeFile(t, "token-secret.yaml", `apiVersion: v1
kind: Secret
metadata:
  name: robot-token
  annotations:
    kubernetes.io/service-account.name: robot
type: kubernetes.io/service-account-token
`))
	var legacy string
	eventually(t, 10*time.Second, "the token secret filled", func() (bool, string) {
		out, _, _ := s.kubectl("get", "secret", "robot-token", "-o", "jsonpath={.data.token}")
		b, err := base64.StdEncoding.DecodeString(out)
		legacy = string(b)
		return err == nil && legacy != "", out
	})
	withLegacy := rest.AnonymousClientConfig(cfg)
	withLegacy.BearerToken = legacy
	if _, err := kubernetes.NewForConfigOrDie(withLegacy).CoreV1().ConfigMaps("default").Get(ctx, "made-by-robot", metav1.GetOptions{}); err != nil {
		t.Errorf("with the secret's token: %v", err)
	}

	s.mustKubectl(t, "delete", "serviceaccount", "robot")
	if _, errOut, err := asRobot("get", "configmaps"); err == nil || !strings.Contains(errOut, "Unauthorized") {
		t.Errorf("after its ServiceAccount's deletion: %v %s", err, errOut)
	}
	eventually(t, 10*time.Second, "the token secret deleted with its account", func() (bool, string) {
		_, errOut, err := s.kubectl("get", "secret", "robot-token")
		return err != nil && strings.Contains(errOut, "NotFound"), errOut
	})
}

// Moving to another issuer, as on a cluster: restarted with a new
// --service-account-issuer first and the old one after it, kplane signs
// with the new one and publishes it, and the tokens already out keep
// working; --api-audiences, --service-account-jwks-uri and
// --service-account-max-token-expiration apply (kubectl shows the
// shortening's warning).
func TestServiceAccountIssuerMove(t *testing.T) {
	s := startServer(t)
	s.mustKubectl(t, "create", "serviceaccount", "robot")
	old := strings.TrimSpace(s.mustKubectl(t, "create", "token", "robot"))
	const next = "https://kplane.example.com"
	s.args = append(s.args, "--service-account-issuer", next, "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--api-audiences", "https://kubernetes.default.svc.cluster.local,api", "--service-account-jwks-uri", "https://keys.example.com/jwks",
		"--service-account-max-token-expiration", "1h")
	s.restart()
	asToken := func(token string) (string, error) {
		cfg := rest.AnonymousClientConfig(s.config())
		cfg.BearerToken = token
		out, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return out.Status.UserInfo.Username, nil
	}
	if who, err := asToken(old); err != nil || who != "system:serviceaccount:default:robot" {
		t.Errorf("the old issuer's token: %q, %v", who, err)
	}
	cmd := exec.Command("kubectl", "--kubeconfig", s.kubeconfig, "create", "token", "robot", "--duration", "2h")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl create token: %v %s", err, stderr.String())
	}
	if want := "Warning: requested expiration of 7200 seconds shortened to 3600 seconds\n"; stderr.String() != want {
		t.Errorf("kubectl's stderr %q, want %q", stderr.String(), want)
	}
	token := strings.TrimSpace(stdout.String())
	payload, err := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	var claims struct {
		Iss      string
		Aud      []string
		Exp, Iat int64
	}
	if err != nil || json.Unmarshal(payload, &claims) != nil || claims.Iss != next ||
		strings.Join(claims.Aud, " ") != "https://kubernetes.default.svc.cluster.local api" || claims.Exp-claims.Iat != 3600 {
		t.Errorf("the new token's claims: %s", payload)
	}
	if who, err := asToken(token); err != nil || who != "system:serviceaccount:default:robot" {
		t.Errorf("the new issuer's token: %q, %v", who, err)
	}
	doc, err := kubernetes.NewForConfigOrDie(s.config()).RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(context.Background())
	var discovery struct {
		Issuer  string
		JWKSURI string `json:"jwks_uri"`
	}
	if err != nil || json.Unmarshal(doc, &discovery) != nil || discovery.Issuer != next || discovery.JWKSURI != "https://keys.example.com/jwks" {
		t.Errorf("discovery: %s, %v", doc, err)
	}
}

// With --service-account-signing-key-file (an RSA key, as kubeadm makes
// sa.key) and --service-account-key-file, tokens are RS256 under the
// key's id, a token of the other key (another server that shares it)
// authenticates, and /openid/v1/jwks publishes both keys; a file without
// a private key stops kplane with kube-apiserver's words.
func TestServiceAccountKeyFlags(t *testing.T) {
	dir := t.TempDir()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	signing := filepath.Join(dir, "sa.key")
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	otherDER, _ := x509.MarshalPKIXPublicKey(&other.PublicKey)
	otherPub := filepath.Join(dir, "other.pub")
	for file, block := range map[string]*pem.Block{signing: {Type: "PRIVATE KEY", Bytes: der}, otherPub: {Type: "PUBLIC KEY", Bytes: otherDER}} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := startServer(t, "--service-account-signing-key-file", signing, "--service-account-key-file", otherPub)
	s.mustKubectl(t, "create", "serviceaccount", "robot")
	token := strings.TrimSpace(s.mustKubectl(t, "create", "token", "robot"))
	pubDER, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	sum := sha256.Sum256(pubDER)
	kid := base64.RawURLEncoding.EncodeToString(sum[:])
	header, _ := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[0])
	if string(header) != `{"alg":"RS256","kid":"`+kid+`"}` {
		t.Errorf("token header %s", header)
	}
	var jwks struct {
		Keys []struct{ Kty, Kid, Alg string } `json:"keys"`
	}
	if err := json.Unmarshal([]byte(s.mustKubectl(t, "get", "--raw", "/openid/v1/jwks")), &jwks); err != nil || len(jwks.Keys) != 2 ||
		jwks.Keys[0].Kty != "EC" || jwks.Keys[1].Kid != kid || jwks.Keys[1].Alg != "RS256" {
		t.Errorf("JWKS: %+v, %v", jwks, err)
	}
	cs := kubernetes.NewForConfigOrDie(s.config())
	review := func(token string) *authenticationv1.TokenReview {
		t.Helper()
		r, err := cs.AuthenticationV1().TokenReviews().Create(context.Background(), &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := review(token); !r.Status.Authenticated || r.Status.User.Username != "system:serviceaccount:default:robot" {
		t.Errorf("the server's own token: %+v", r.Status)
	}

	// The same claims signed by the other key, as a server sharing it
	// would sign them (ES256, its key id).
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(token, ".")[1])
	otherSum := sha256.Sum256(otherDER)
	h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"` + base64.RawURLEncoding.EncodeToString(otherSum[:]) + `"}`))
	signed := h + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	r, sig, err := ecdsa.Sign(rand.Reader, other, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 64)
	r.FillBytes(raw[:32])
	sig.FillBytes(raw[32:])
	if r := review(signed + "." + base64.RawURLEncoding.EncodeToString(raw)); !r.Status.Authenticated {
		t.Errorf("the other key's token: %+v", r.Status)
	}

	out, err := exec.Command(kplaneBinary(t), "serve", "--storage", "memory", "--data-dir", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--service-account-signing-key-file", otherPub).CombinedOutput()
	want := "failed to parse service-account-issuer-key-file: error reading private key file " + otherPub + ": data does not contain a valid RSA or ECDSA private key"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("serve with a public key to sign with: %v\n%s", err, out)
	}
}
