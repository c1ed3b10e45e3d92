package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/kv"
)

// Predicate selects objects by labels and fields. The zero value selects
// everything.
type Predicate struct {
	Label labels.Selector
	Field fields.Selector
	// Fields returns the fields a field selector may use; nil means
	// metadata.name and metadata.namespace, which every kind supports.
	Fields func(obj *unstructured.Unstructured) fields.Set
}

// Empty reports whether the predicate selects everything.
func (p Predicate) Empty() bool {
	return (p.Label == nil || p.Label.Empty()) && (p.Field == nil || p.Field.Empty())
}

// Matches reports whether obj is selected.
func (p Predicate) Matches(obj *unstructured.Unstructured) bool {
	if p.Label != nil && !p.Label.Empty() && !p.Label.Matches(labels.Set(obj.GetLabels())) {
		return false
	}
	if p.Field != nil && !p.Field.Empty() {
		var set fields.Set
		if p.Fields != nil {
			set = p.Fields(obj)
		} else {
			set = fields.Set{"metadata.name": obj.GetName(), "metadata.namespace": obj.GetNamespace()}
		}
		return p.Field.Matches(set)
	}
	return true
}

// Transform says what a client of this predicate sees of a change from
// prev to cur (either may be nil: a create has no prev, a delete no cur):
// an object that starts matching is ADDED, one that keeps matching is
// MODIFIED, one that stops matching or is deleted is DELETED with its last
// state (prev), and ok is false when the client sees nothing.
func (p Predicate) Transform(cur, prev *unstructured.Unstructured) (typ watch.EventType, obj *unstructured.Unstructured, ok bool) {
	curOK := cur != nil && p.Matches(cur)
	prevOK := prev != nil && p.Matches(prev)
	switch {
	case curOK && prevOK:
		return watch.Modified, cur, true
	case curOK:
		return watch.Added, cur, true
	case prevOK:
		return watch.Deleted, prev, true
	}
	return "", nil, false
}

// ListOptions qualify List, with the API's meaning ("API Concepts",
// "Semantics for get and list").
type ListOptions struct {
	// ResourceVersion and ResourceVersionMatch: unset is the latest state
	// (a consistent read); "0" is any state, here the latest; N with
	// NotOlderThan is the latest state once the store has reached N; N
	// with Exact is the state at revision N (CodeExpired if compacted).
	// N with neither is NotOlderThan, or Exact when Limit is set, as the
	// API defines for old clients.
	ResourceVersion      string
	ResourceVersionMatch metav1.ResourceVersionMatch
	// Limit caps the items of one page; Continue resumes a paged list. All
	// pages of a list read the same revision.
	Limit     int64
	Continue  string
	Predicate Predicate
	// MetadataOnly lets a List return objects with only apiVersion, kind
	// and metadata (without managedFields), for in-process callers that
	// read nothing else.
	MetadataOnly bool
}

// continueToken is the opaque state of a paged list: the revision every
// page reads, and the key (relative to the list's prefix) to resume at.
// It is kube-apiserver's token, field for field: a negative revision
// resumes at the newest one (the token a 410 of a compacted list gives).
type continueToken struct {
	APIVersion string `json:"v"`
	Revision   int64  `json:"rv"`
	Start      string `json:"start"`
}

func encodeContinue(rev int64, start string) string {
	b, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", Revision: rev, Start: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

// ContinueAfter returns the continue token of a page of the list of prefix
// read at revision rev whose last item is at key: the token this Store's
// List returns, so that a watch cache and the Store can serve the pages of
// one list in turn.
func ContinueAfter(prefix string, rev int64, key string) string {
	return encodeContinue(rev, strings.TrimPrefix(key, prefix)+"\x00")
}

// DecodeContinue reads the continue token of a list of prefix with opts:
// the revision every page reads (negative: the newest), and the key the
// next page starts at. A malformed token, or one with a resourceVersion
// other than "" and "0", is CodeInvalidRequest, in kube-apiserver's
// words and order.
func DecodeContinue(prefix string, opts ListOptions) (rev int64, start string, err error) {
	invalid := func(format string, a ...any) error {
		return newErr(CodeInvalidRequest, prefix, 0, "invalid continue token: continue key is not valid"+format, a...)
	}
	b, err := base64.RawURLEncoding.DecodeString(opts.Continue)
	if err != nil {
		return 0, "", invalid(": %v", err)
	}
	var t continueToken
	if err := json.Unmarshal(b, &t); err != nil {
		return 0, "", invalid(": %v", err)
	}
	switch {
	case t.APIVersion != "meta.k8s.io/v1":
		return 0, "", invalid(": server does not recognize this encoded version %v", t.APIVersion)
	case t.Revision == 0:
		return 0, "", invalid(": incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	case t.Start == "":
		return 0, "", invalid(": encoded start key empty (version meta.k8s.io/v1)")
	}
	// The start key may not climb out of the prefix: it must be a clean
	// path below it.
	key := t.Start
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if path.Clean(key) != key {
		return 0, "", invalid(": %v", t.Start)
	}
	if opts.ResourceVersion != "" && opts.ResourceVersion != "0" {
		return 0, "", newErr(CodeInvalidRequest, prefix, 0, "specifying resource version is not allowed when using continue")
	}
	return t.Revision, prefix + key[1:], nil
}

// expiredList is the 410 of a list of prefix at rev, compacted: for a
// continued list (start is the key it resumes at), with a token that
// resumes it at the newest revision, as kube-apiserver's.
func expiredList(prefix string, rev int64, continued bool, start string, err error) *Error {
	if !continued {
		return &Error{Code: CodeExpired, Key: prefix, ResourceVersion: rev, Msg: msgExpiredExact, Err: err}
	}
	return &Error{Code: CodeExpired, Key: prefix, ResourceVersion: rev, Msg: msgInconsistentContinue, Err: err,
		Continue: encodeContinue(-1, strings.TrimPrefix(start, prefix))}
}

// CheckListRevision returns nil when the store can still be read at rev,
// and otherwise the error a list of prefix at rev with opts would return:
// CodeExpired once rev is compacted (with kube-apiserver's message for a
// continued or an exact list), CodeTooLargeResourceVersion beyond the
// current revision. A watch cache checks it before serving an old
// revision from its own history, so that its lists expire with the
// store's.
func (s *Store) CheckListRevision(ctx context.Context, prefix, start string, rev int64, opts ListOptions) error {
	_, err := s.kv.Range(ctx, prefix, kv.RangeOptions{Revision: rev})
	if errors.Is(err, kv.ErrCompacted) {
		return expiredList(prefix, rev, opts.Continue != "", start, err)
	}
	if err != nil {
		return interpret(prefix, rev, err)
	}
	return nil
}

// Messages kube-apiserver gives for 410 Gone on lists; clients show them.
const (
	msgInconsistentContinue = "The provided continue parameter is too old to display a consistent list result. " +
		"You can start a new list without the continue parameter, or use the continue token in this response " +
		"to retrieve the remainder of the results. Continuing with the provided token results in an " +
		"inconsistent list - objects that were created, modified, or deleted between the time the first " +
		"chunk was returned and now may show up in the list."
	msgExpiredExact = "The resourceVersion for the provided list is too old."
)

// List reads the objects under prefix, which must end in "/".
func (s *Store) List(ctx context.Context, prefix string, opts ListOptions) (*unstructured.UnstructuredList, error) {
	l, err := s.ListRecords(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	if opts.MetadataOnly {
		return l.DecodeMetadata()
	}
	return l.Decode()
}

// ListRecords is List without the decode: the objects as stored, for a
// caller that serves their JSON (or keeps them, as the watch cache does).
// Selectors are matched on a scan of each value (Predicate.MatchesRecord).
func (s *Store) ListRecords(ctx context.Context, prefix string, opts ListOptions) (*RecordList, error) {
	if !strings.HasSuffix(prefix, "/") {
		return nil, newErr(CodeInvalidRequest, prefix, 0, "a list prefix must end in /")
	}
	rv, err := ParseResourceVersion(opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	var (
		readRev  int64 // 0: the current revision
		minRev   int64
		start    = prefix
		resume   string // where a continued list resumes
		fromCont = opts.Continue != ""
	)
	switch {
	case fromCont:
		if readRev, start, err = DecodeContinue(prefix, opts); err != nil {
			return nil, err
		}
		readRev = max(readRev, 0) // negative: the newest
		resume = start
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchExact:
		if rv == 0 {
			return nil, newErr(CodeInvalidRequest, prefix, 0, "resourceVersionMatch \"Exact\" requires a resourceVersion other than \"0\"")
		}
		readRev = rv
	case opts.ResourceVersionMatch == metav1.ResourceVersionMatchNotOlderThan:
		if opts.ResourceVersion == "" {
			return nil, newErr(CodeInvalidRequest, prefix, 0, "resourceVersionMatch \"NotOlderThan\" requires a resourceVersion")
		}
		minRev = rv
	case opts.ResourceVersionMatch != "":
		return nil, newErr(CodeInvalidRequest, prefix, 0, "unknown resourceVersionMatch %q", opts.ResourceVersionMatch)
	case rv > 0 && opts.Limit > 0:
		readRev = rv
	default:
		minRev = rv
	}

	list := &RecordList{}
	end := kv.PrefixEnd(prefix)
	for {
		batch := opts.Limit
		selective := batch > 0 && !opts.Predicate.Empty()
		if selective {
			// Selective lists read ahead so a page needs few round trips.
			batch = max(batch, 256)
		}
		// A selective page has no remainingItemCount, so its reads need
		// no count: without NoCount, each batch would count every key to
		// the end of the prefix, and a page of rare matches in a large
		// resource would take quadratic time.
		r, err := s.kv.Range(ctx, start, kv.RangeOptions{End: end, Revision: readRev, Limit: batch, NoCount: selective})
		if err != nil {
			switch {
			case errors.Is(err, kv.ErrCompacted):
				return nil, expiredList(prefix, readRev, fromCont, resume, err)
			case errors.Is(err, kv.ErrFutureRevision):
				cur, _ := s.Revision(ctx) // 0 if that fails too, as upstream
				return nil, newErr(CodeTooLargeResourceVersion, prefix, readRev, "Too large resource version: %d, current: %d", readRev, cur)
			}
			return nil, interpret(prefix, readRev, err)
		}
		if readRev == 0 {
			readRev = r.Revision
			if minRev > readRev {
				return nil, newErr(CodeTooLargeResourceVersion, prefix, minRev, "Too large resource version: %d, current: %d", minRev, readRev)
			}
		}
		for i := range r.KVs {
			rec, err := NewRecord(r.KVs[i].Key, r.KVs[i].Value, r.KVs[i].ModRevision)
			if err != nil {
				return nil, err
			}
			if !opts.Predicate.MatchesRecord(rec) {
				continue
			}
			list.Items = append(list.Items, rec)
			if opts.Limit > 0 && int64(len(list.Items)) == opts.Limit {
				more := i < len(r.KVs)-1 || r.More
				if !more {
					break
				}
				var remaining *int64
				if opts.Predicate.Empty() {
					n := r.Count - int64(i) - 1
					remaining = &n
				}
				list.ResourceVersion, list.Remaining = readRev, remaining
				list.Continue = encodeContinue(readRev, strings.TrimPrefix(r.KVs[i].Key, prefix)+"\x00")
				return list, nil
			}
		}
		if !r.More {
			break
		}
		start = r.KVs[len(r.KVs)-1].Key + "\x00"
	}
	list.ResourceVersion = readRev
	return list, nil
}
