package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/kplane-dev/kplane/internal/registry"
)

// callError is a call that failed (upstream's ErrCallingWebhook): subject
// to the webhook's failurePolicy, unlike a refusal.
type callError struct {
	webhook string
	reason  error
	code    int32 // the HTTP code upstream's metrics give the failure
}

func (e *callError) Error() string {
	return fmt.Sprintf("failed calling webhook %q: %v", e.webhook, e.reason)
}

var errNoNamespaces = errors.New("namespaces are not served")

// maxResponse bounds a webhook's answer.
const maxResponse = 10 << 20

// call sends inv's webhook the AdmissionReview of a and reads its answer.
// A mutating webhook's patch is applied to a.Object (a new object:
// the one before is left as it was); changed reports whether the patch
// changed anything. Errors are a *callError, or the request's own error
// (a refusal, a dry run the webhook cannot take).
func (w *Webhooks) call(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes) (changed bool, err error) {
	h := inv.hook
	if a.DryRun {
		if h.sideEffects == nil {
			//lint:ignore ST1005 upstream's wording
			return false, &callError{h.name, errors.New("Webhook SideEffects is nil"), http.StatusBadRequest}
		}
		if s := *h.sideEffects; s != admissionregistrationv1.SideEffectClassNone && s != admissionregistrationv1.SideEffectClassNoneOnDryRun {
			return false, apierrors.NewBadRequest(fmt.Sprintf("admission webhook %q does not support dry run", h.name))
		}
	}
	version := reviewVersion(h.reviewVersions)
	if version == "" {
		return false, &callError{h.name, fmt.Errorf("could not create admission objects: %w",
			fmt.Errorf("webhook does not accept known AdmissionReview versions %v", h.reviewVersions)), http.StatusBadRequest}
	}
	obj, old, err := w.shownBoth(ctx, inv, a)
	if err != nil {
		return false, err
	}
	uid := types.UID(uuid.NewUUID())
	body, err := reviewRequest(ctx, version, uid, inv, a, obj, old)
	if err != nil {
		return false, &callError{h.name, fmt.Errorf("could not create admission objects: %w", err), http.StatusBadRequest}
	}
	target, serverName, err := h.location()
	if err != nil {
		return false, &callError{h.name, fmt.Errorf("could not get REST client: %w", err), http.StatusInternalServerError}
	}
	creds := w.auth(h).For(target.Host)
	client, err := w.clients.get(h.clientConfig.CABundle, serverName, creds)
	if err != nil {
		return false, &callError{h.name, fmt.Errorf("could not get REST client: %w", err), http.StatusInternalServerError}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(h.timeoutSeconds)*time.Second)
	defer cancel()
	if deadline, ok := ctx.Deadline(); ok {
		// As upstream's REST client: the time left, rounded up to a
		// second, as the timeout parameter.
		if left := time.Until(deadline); left > 0 {
			if t := left.Truncate(time.Second); t != left {
				left = t + time.Second
			}
			q := target.Query()
			q.Set("timeout", left.String())
			target.RawQuery = q.Encode()
		}
	}
	var review admissionv1.AdmissionReview
	err = post(ctx, client, target.String(), "kplane-admission", creds, body, &review)
	if err != nil {
		return false, &callError{h.name, fmt.Errorf("failed to call webhook: %w", err), callStatus(err)}
	}
	resp, err := verify(version, uid, h.mutating, &review)
	if err != nil {
		return false, &callError{h.name, fmt.Errorf("received invalid webhook response: %w", err), http.StatusServiceUnavailable}
	}
	for _, msg := range resp.Warnings {
		registry.AddWarning(ctx, msg)
	}
	if !resp.Allowed {
		return false, &rejection{refusal(h.name, resp.Result)}
	}
	if len(resp.Patch) == 0 {
		return false, nil
	}
	patch, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		return false, &callError{h.name, fmt.Errorf("received undecodable patch in webhook response: %w", err), http.StatusServiceUnavailable}
	}
	if len(patch) == 0 {
		return false, nil
	}
	if obj == nil {
		return false, apierrors.NewInternalError(fmt.Errorf("admission webhook %q attempted to modify the object, which is not supported for this operation", h.name))
	}
	if resp.PatchType != nil && *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		return false, &callError{h.name, fmt.Errorf("unsupported patch type %q", *resp.PatchType), refusal(h.name, resp.Result).ErrStatus.Code}
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	patched, err := patch.Apply(data)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	next := &unstructured.Unstructured{}
	if err := next.UnmarshalJSON(patched); err != nil {
		return false, apierrors.NewInternalError(err)
	}
	changed = !apiequality.Semantic.DeepEqual(obj.Object, next.Object)
	if inv.equivalent != nil {
		if next, err = w.shown(ctx, a.Kind, a.Version, next); err != nil {
			return false, err
		}
	}
	a.Object = next
	return changed, nil
}

// reviewVersion is the first of a webhook's review versions kplane
// speaks (v1 or v1beta1, of AdmissionReview or ConversionReview), "" when
// none is.
func reviewVersion(versions []string) string {
	for _, v := range versions {
		if v == "v1" || v == "v1beta1" {
			return v
		}
	}
	return ""
}

// shown is obj (an object of a's kind, or its Cohabit's) as kind k shows
// it in version v: converted by k's conversion webhook if it has one. A
// conversion that fails is an internal error, as upstream's.
func (w *Webhooks) shown(ctx context.Context, k *registry.Kind, v string, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if obj == nil {
		return nil, nil
	}
	out, err := w.Registry.ConvertTo(ctx, k, v, obj)
	if err != nil {
		return nil, apierrors.NewInternalError(errors.New(err.Error()))
	}
	return out, nil
}

// shownBoth is a's object and old object as inv's webhook sees them: in
// the version of the rule that matched, for an equivalent match.
func (w *Webhooks) shownBoth(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes) (obj, old *unstructured.Unstructured, err error) {
	obj, old = a.Object, a.OldObject
	if inv.equivalent == nil {
		return obj, old, nil
	}
	if obj, err = w.shown(ctx, inv.equivalent, inv.resource.Version, obj); err != nil {
		return nil, nil, err
	}
	if old, err = w.shown(ctx, inv.equivalent, inv.resource.Version, old); err != nil {
		return nil, nil, err
	}
	return obj, old, nil
}

// location is where h is called, and the name its certificate must have.
func (h *hook) location() (*url.URL, string, error) { return location(h.clientConfig) }

// location is where a webhook of client configuration cc is called, and
// the name its certificate must have.
func location(cc admissionregistrationv1.WebhookClientConfig) (*url.URL, string, error) {
	if cc.URL != nil {
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return nil, "", err
		}
		return u, u.Hostname(), nil
	}
	if cc.Service == nil {
		return nil, "", errors.New("webhook has neither url nor service")
	}
	port := int32(443)
	if cc.Service.Port != nil {
		port = *cc.Service.Port
	}
	host := cc.Service.Name + "." + cc.Service.Namespace + ".svc"
	u := &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(int(port)))}
	if cc.Service.Path != nil {
		u.Path = *cc.Service.Path
	}
	return u, host, nil
}

// reviewRequest is the AdmissionReview of a, in version (v1 or v1beta1),
// showing obj and old.
func reviewRequest(ctx context.Context, version string, uid types.UID, inv *invocation, a *registry.AdmissionAttributes, obj, old *unstructured.Unstructured) ([]byte, error) {
	req, err := admissionRequest(ctx, inv, a, obj, old)
	if err != nil {
		return nil, err
	}
	req.UID = uid
	return json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/" + version, Kind: "AdmissionReview"},
		Request:  req,
	})
}

// admissionRequest is the request inv's webhook is sent about a, showing
// obj and old, without a uid.
func admissionRequest(ctx context.Context, inv *invocation, a *registry.AdmissionAttributes, obj, old *unstructured.Unstructured) (*admissionv1.AdmissionRequest, error) {
	raw := func(o runtime.Object) (runtime.RawExtension, error) {
		if o == nil {
			return runtime.RawExtension{}, nil
		}
		data, err := json.Marshal(o)
		return runtime.RawExtension{Raw: data}, err
	}
	objRaw, err := raw(nilIfEmpty(obj))
	if err != nil {
		return nil, err
	}
	oldRaw, err := raw(nilIfEmpty(old))
	if err != nil {
		return nil, err
	}
	optsRaw, err := raw(a.Options)
	if err != nil {
		return nil, err
	}
	u, _ := registry.UserFrom(ctx)
	user := authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: map[string]authenticationv1.ExtraValue{}}
	for k, v := range u.Extra {
		user.Extra[k] = v
	}
	dry := a.DryRun
	namespace := requestNamespace(a)
	return &admissionv1.AdmissionRequest{
		Kind:               gvk(inv.kind),
		Resource:           gvr(inv.resource),
		SubResource:        a.Subresource,
		RequestKind:        ptr(gvk(a.GroupVersionKind())),
		RequestResource:    ptr(gvr(a.GroupVersionResource())),
		RequestSubResource: a.Subresource,
		Name:               a.Name,
		Namespace:          namespace,
		Operation:          admissionv1.Operation(a.Operation),
		UserInfo:           user,
		Object:             objRaw,
		OldObject:          oldRaw,
		DryRun:             &dry,
		Options:            optsRaw,
	}, nil
}

// requestNamespace is the namespace upstream's admission attributes give
// a: a Namespace's own name for a request to a Namespace (its request
// info's for most verbs; for a create the create handler's, which has
// none for a name generateName gives).
func requestNamespace(a *registry.AdmissionAttributes) string {
	if a.Kind.Group == "" && a.Kind.Resource == "namespaces" && !a.GeneratedName {
		return a.Name
	}
	return a.Namespace
}

func nilIfEmpty(o *unstructured.Unstructured) runtime.Object {
	if o == nil {
		return nil
	}
	return o
}

func gvk(k schema.GroupVersionKind) metav1.GroupVersionKind {
	return metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func gvr(r schema.GroupVersionResource) metav1.GroupVersionResource {
	return metav1.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}
}

func ptr[T any](v T) *T { return &v }

// post sends body to target and decodes the review it answers into
// review. A non-2xx answer is the error upstream's REST client makes of
// it.
func post(ctx context.Context, client *http.Client, target, userAgent string, creds *Credentials, body []byte, review any) error {
	data, _, err := postRaw(ctx, client, target, userAgent, creds, body)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, review)
}

// postRaw sends body to target and returns the 2xx answer's body and
// content type, or the error upstream's REST client makes of any other.
func postRaw(ctx context.Context, client *http.Client, target, userAgent string, creds *Credentials, body []byte) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	creds.apply(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	req.Header.Set("User-Agent", userAgent)
	resp, err := client.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return nil, "", err
	}
	contentType := resp.Header.Get("Content-Type")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var st metav1.Status
		if json.Unmarshal(data, &st) == nil && st.Kind == "Status" {
			return nil, "", &apierrors.StatusError{ErrStatus: st}
		}
		msg := string(data)
		if strings.HasPrefix(contentType, "text/") {
			msg = strings.TrimSpace(msg) // as upstream's REST client shows a text answer
		}
		return nil, "", apierrors.NewGenericServerResponse(resp.StatusCode, http.MethodPost, schema.GroupResource{}, "", msg, 0, true)
	}
	return data, contentType, nil
}

// verify checks a webhook's answer as upstream does, by the review
// version sent.
func verify(version string, uid types.UID, mutating bool, r *admissionv1.AdmissionReview) (*admissionv1.AdmissionResponse, error) {
	resp := r.Response
	if resp == nil {
		return nil, errors.New("webhook response was absent")
	}
	if version == "v1beta1" {
		out := *resp
		if !mutating || len(out.Patch) == 0 {
			out.Patch, out.PatchType = nil, nil
		} else {
			out.PatchType = ptr(admissionv1.PatchTypeJSONPatch)
		}
		return &out, nil
	}
	if resp.UID != uid {
		return nil, fmt.Errorf("expected response.uid=%q, got %q", uid, resp.UID)
	}
	if want := "admission.k8s.io/v1, Kind=AdmissionReview"; r.GroupVersionKind().String() != want {
		return nil, fmt.Errorf("expected webhook response of %v, got %v", want, r.GroupVersionKind().String())
	}
	if mutating {
		switch {
		case len(resp.Patch) > 0 && resp.PatchType == nil:
			return nil, errors.New("webhook returned response.patch but not response.patchType")
		case len(resp.Patch) == 0 && resp.PatchType != nil:
			return nil, errors.New("webhook returned response.patchType but not response.patch")
		case resp.PatchType != nil && *resp.PatchType == "":
			return nil, fmt.Errorf("webhook returned invalid response.patchType of %q", *resp.PatchType)
		}
		return resp, nil
	}
	if len(resp.Patch) > 0 {
		return nil, errors.New("validating webhook may not return response.patch")
	}
	if resp.PatchType != nil {
		return nil, errors.New("validating webhook may not return response.patchType")
	}
	return resp, nil
}

// rejection is a webhook's refusal, told apart from other errors for the
// metrics; the client gets its status.
type rejection struct{ *apierrors.StatusError }

func (r *rejection) Unwrap() error { return r.StatusError }

// callStatus is the code upstream's metrics give a call that failed: the
// webhook's answer's, or 503 when there was none.
func callStatus(err error) int32 {
	var st *apierrors.StatusError
	if errors.As(err, &st) {
		return st.ErrStatus.Code
	}
	return http.StatusServiceUnavailable
}

// refusal is a webhook's refusal as upstream reports it: the webhook's
// status, at least 400 and Failure, its message prefixed with the
// webhook's name.
func refusal(name string, result *metav1.Status) *apierrors.StatusError {
	st := metav1.Status{Status: metav1.StatusFailure}
	if result != nil {
		st = *result
	}
	if st.Code < http.StatusBadRequest {
		st.Code = http.StatusBadRequest
	}
	if st.Status == "" || st.Status == metav1.StatusSuccess {
		st.Status = metav1.StatusFailure
	}
	denied := fmt.Sprintf("admission webhook %q denied the request", name)
	switch {
	case st.Message != "":
		st.Message = denied + ": " + st.Message
	case st.Reason != "":
		st.Message = denied + ": " + string(st.Reason)
	default:
		st.Message = denied + " without explanation"
	}
	return &apierrors.StatusError{ErrStatus: st}
}

// get returns the client for webhooks trusting caBundle (the system's
// roots when empty), expecting serverName, and presenting creds' client
// certificate if it has one.
func (c *clientCache) get(caBundle []byte, serverName string, creds *Credentials) (*http.Client, error) {
	key := clientKey{string(caBundle), serverName, creds}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.clients[key]; ok {
		return cl, nil
	}
	cfg := &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("unable to load root certificates: unable to parse bytes as PEM block")
		}
		cfg.RootCAs = pool
	}
	if creds != nil && creds.cert != nil {
		cfg.Certificates = []tls.Certificate{*creds.cert}
	}
	var transport http.RoundTripper = &http.Transport{
		TLSClientConfig:     cfg,
		ForceAttemptHTTP2:   true,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
	}
	if creds != nil && creds.exec != nil {
		cfg.GetClientCertificate = clientCertificate
		transport = &execTransport{plugin: creds.exec, base: transport, cluster: func(req *http.Request) *execCluster {
			c := &execCluster{Server: req.URL.Scheme + "://" + req.URL.Host, CertificateAuthorityData: caBundle}
			if serverName != req.URL.Hostname() {
				c.TLSServerName = serverName
			}
			return c
		}}
	}
	cl := &http.Client{Transport: transport}
	if c.clients == nil {
		c.clients = map[clientKey]*http.Client{}
	}
	c.clients[key] = cl
	return cl, nil
}

// keep drops the clients no webhook of set uses, closing their idle
// connections.
func (c *clientCache) keep(set *hookSet, auth func(*hook) *WebhookAuth) {
	used := map[clientKey]bool{}
	for _, hooks := range [][]*hook{set.mutating, set.validating} {
		for _, h := range hooks {
			if u, name, err := h.location(); err == nil {
				used[clientKey{string(h.clientConfig.CABundle), name, auth(h).For(u.Host)}] = true
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, cl := range c.clients {
		if !used[k] {
			cl.CloseIdleConnections()
			delete(c.clients, k)
		}
	}
}
