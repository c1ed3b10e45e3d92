package storage

import (
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Code says what kind of storage error happened.
type Code int

const (
	// CodeNotFound: the key does not exist (404).
	CodeNotFound Code = iota + 1
	// CodeExists: Create found the key already there (409 AlreadyExists).
	CodeExists
	// CodeConflict: a precondition (uid or resourceVersion) failed (409 Conflict).
	CodeConflict
	// CodeInvalidObj: the object can't be stored or read back (500, or 400
	// for bad input, at the API layer's discretion).
	CodeInvalidObj
	// CodeTooLargeResourceVersion: a read asked for a resourceVersion newer
	// than the store's (504 in kube-apiserver, "Too large resource version").
	CodeTooLargeResourceVersion
	// CodeExpired: the requested resourceVersion or continue token has been
	// compacted (410 Gone).
	CodeExpired
	// CodeInvalidRequest: malformed resourceVersion, continue token or
	// options (400).
	CodeInvalidRequest
)

func (c Code) String() string {
	switch c {
	case CodeNotFound:
		return "NotFound"
	case CodeExists:
		return "Exists"
	case CodeConflict:
		return "Conflict"
	case CodeInvalidObj:
		return "InvalidObj"
	case CodeTooLargeResourceVersion:
		return "TooLargeResourceVersion"
	case CodeExpired:
		return "Expired"
	case CodeInvalidRequest:
		return "InvalidRequest"
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is the error storage returns for every failure that has a meaning
// at the API; other errors (a closed or unavailable store) are wrapped kv
// errors.
type Error struct {
	Code            Code
	Key             string
	ResourceVersion int64
	Msg             string
	Err             error // the kv error underneath, if any
	// Continue, on the CodeExpired of a continued list, resumes the
	// list at the newest revision (kube-apiserver's inconsistent
	// continue token).
	Continue string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("%s: key %q", e.Code, e.Key)
	if e.ResourceVersion != 0 {
		msg += fmt.Sprintf(", resourceVersion %d", e.ResourceVersion)
	}
	if e.Msg != "" {
		msg += ": " + e.Msg
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// HasCode reports whether err is a storage *Error with code c.
func HasCode(err error, c Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}

func newErr(c Code, key string, rv int64, format string, args ...any) *Error {
	return &Error{Code: c, Key: key, ResourceVersion: rv, Msg: fmt.Sprintf(format, args...)}
}

// TooLargeResourceVersionError is the 504 kube-apiserver answers a read
// (or a watch, in an ERROR event) at a resourceVersion it has not reached
// (msg: "Too large resource version: N, current: M"); client-go
// recognizes it by its cause (ResourceVersionTooLarge: the reflector) and
// retries.
func TooLargeResourceVersionError(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusGatewayTimeout,
		Reason:  metav1.StatusReasonTimeout,
		Message: "Timeout: " + msg,
		Details: &metav1.StatusDetails{
			Causes:            []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}},
			RetryAfterSeconds: 1,
		},
	}}
}
