package registry

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/kv"
	"github.com/kplane-dev/kplane/internal/storage"
)

// msgModified ends the message of a 409 on a stale resourceVersion; with
// apierrors.NewConflict it makes kube-apiserver's exact sentence (seed 000).
const msgModified = "the object has been modified; please apply your changes to the latest version and try again"

// interpret turns a storage error into the Status error kube-apiserver
// gives for it (its storage/errors and InterpretXError helpers), naming
// the resource and object. Status errors pass through.
func interpret(err error, gr schema.GroupResource, name string) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	var se *storage.Error
	if !errors.As(err, &se) {
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			return apierrors.NewTimeoutError(err.Error(), 1)
		case errors.Is(err, kv.ErrUnavailable), errors.Is(err, kv.ErrClosed):
			return apierrors.NewServiceUnavailable(err.Error())
		}
		return apierrors.NewInternalError(err)
	}
	switch se.Code {
	case storage.CodeNotFound:
		return apierrors.NewNotFound(gr, name)
	case storage.CodeExists:
		return apierrors.NewAlreadyExists(gr, name)
	case storage.CodeConflict:
		return apierrors.NewConflict(gr, name, errors.New(se.Msg))
	case storage.CodeTooLargeResourceVersion:
		return storage.TooLargeResourceVersionError(se.Msg)
	case storage.CodeExpired:
		err := apierrors.NewResourceExpired(se.Msg)
		err.ErrStatus.Continue = se.Continue
		return err
	case storage.CodeInvalidRequest:
		return apierrors.NewBadRequest(se.Msg)
	case storage.CodeInvalidObj:
		if errors.Is(se, kv.ErrValueTooLarge) {
			return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
				"the object is too large to store: the limit is %d bytes", kv.DefaultMaxValueSize))
		}
		return apierrors.NewInternalError(se)
	}
	return apierrors.NewInternalError(se)
}
