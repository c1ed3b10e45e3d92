package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// writeError answers err as a metav1.Status, as kube-apiserver's
// responsewriters.ErrorNegotiated does.
func writeError(w http.ResponseWriter, err error) {
	st := statusOf(err)
	writeJSON(w, int(st.Code), st)
}

// refuse answers r with err before it is routed (authentication,
// impersonation, authorization), indented for curl and browsers on every
// path, as upstream's refusals are.
func refuse(w http.ResponseWriter, r *http.Request, err error) {
	if !prettyRequested(r) {
		writeError(w, err)
		return
	}
	pw := &prettyWriter{ResponseWriter: w}
	writeError(pw, err)
	pw.finish()
}

// errNoConversion answers a request in a version other than the storage
// version of a custom resource whose CRD asks for a conversion webhook.
// kplane calls no webhook, so the request fails as kube-apiserver's fails
// when the webhook cannot be reached (500), and nothing is read or written
// in another version's shape.
func errNoConversion(k *registry.Kind, version string) error {
	return apierrors.NewInternalError(fmt.Errorf("conversion webhook for %s failed: kplane does not call conversion webhooks; use the storage version, %s",
		k.GroupVersionKind(version), k.StorageVersion()))
}

func statusOf(err error) *metav1.Status {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		status = apierrors.NewInternalError(err)
	}
	st := status.Status()
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	return &st
}

// encodeJSON encodes v. Objects and lists take the fast encoder, and a
// shared watch-cache object its cached bytes, so nothing is re-encoded or
// re-scanned per client.
func encodeJSON(v any) ([]byte, error) {
	switch x := v.(type) {
	case *storage.Shared:
		data, err := x.MarshalJSON()
		return bytes.TrimSuffix(data, []byte("\n")), err
	case *storage.RecordJSON:
		return x.JSON()
	case *unstructured.Unstructured:
		return storage.AppendJSON(make([]byte, 0, 2048), x.Object)
	case *unstructured.UnstructuredList:
		return storage.AppendList(make([]byte, 0, 2048*(1+len(x.Items))), x)
	}
	return json.Marshal(v)
}

// writeJSON writes v as JSON with the given code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := encodeJSON(v)
	if err != nil {
		code = http.StatusInternalServerError
		data, _ = json.Marshal(statusOf(apierrors.NewInternalError(err)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(data)
	w.Write([]byte("\n"))
}

// writeJSONTyped writes v as JSON, keeping a Content-Type already set.
func writeJSONTyped(w http.ResponseWriter, code int, v any) {
	data, err := encodeJSON(v)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.WriteHeader(code)
	w.Write(data)
}
