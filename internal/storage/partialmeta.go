package storage

import (
	"strconv"
	"time"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// PartialMetadata returns the object's apiVersion, kind and metadata
// without managedFields as a PartialObjectMetadata with resourceVersion
// rev: what metadata-only watchers in the process (the garbage
// collector) are sent. It holds what the unstructured accessors read from
// the decoded object (metaFromUnstructured), and reads it by one scan of
// the stored metadata where that is plain (strings, integers, maps and
// lists of strings), three times cheaper than decoding the metadata into
// a map; anything else goes through the decode.
func (r *Record) PartialMetadata(rev int64) (*metav1.PartialObjectMetadata, error) {
	out := &metav1.PartialObjectMetadata{}
	var zero unique.Handle[string]
	if r.apiVersion != zero {
		out.APIVersion = r.apiVersion.Value()
	}
	if r.kind != zero {
		out.Kind = r.kind.Value()
	}
	if r.metaEnd != 0 && scanMeta(r.Value[r.metaStart:r.metaEnd], &out.ObjectMeta) {
		out.ResourceVersion = strconv.FormatInt(rev, 10)
		return out, nil
	}
	obj, err := r.DecodeMetadata(rev)
	if err != nil {
		return nil, err
	}
	out.TypeMeta = metav1.TypeMeta{APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind()}
	out.ObjectMeta = metaFromUnstructured(obj)
	return out, nil
}

// metaFromUnstructured is obj's metadata without managedFields as the
// unstructured accessors read it (a value of the wrong type reads as
// unset).
func metaFromUnstructured(obj *unstructured.Unstructured) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: obj.GetName(), GenerateName: obj.GetGenerateName(), Namespace: obj.GetNamespace(),
		//lint:ignore SA1019 a stored object's selfLink is served as it is
		SelfLink: obj.GetSelfLink(), UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion(),
		Generation: obj.GetGeneration(), CreationTimestamp: obj.GetCreationTimestamp(),
		DeletionTimestamp: obj.GetDeletionTimestamp(), DeletionGracePeriodSeconds: obj.GetDeletionGracePeriodSeconds(),
		Labels: obj.GetLabels(), Annotations: obj.GetAnnotations(), OwnerReferences: obj.GetOwnerReferences(),
		Finalizers: obj.GetFinalizers(),
	}
}

// scanMeta reads metadata's JSON into m, false when a member is not in the
// plain form it reads (the caller then decodes).
func scanMeta(data []byte, m *metav1.ObjectMeta) bool {
	s := scanner{data: data}
	plain := true
	err := s.object(func(key string) error {
		switch key {
		case "name", "generateName", "namespace", "selfLink", "uid", "creationTimestamp", "deletionTimestamp":
			if s.peek() != '"' {
				plain = false
				return errSyntax
			}
			v, err := s.str()
			if err != nil {
				return err
			}
			switch key {
			case "name":
				m.Name = v
			case "generateName":
				m.GenerateName = v
			case "namespace":
				m.Namespace = v
			case "selfLink":
				//lint:ignore SA1019 a stored object's selfLink is served as it is
				m.SelfLink = v
			case "uid":
				m.UID = types.UID(v)
			case "creationTimestamp":
				if err := m.CreationTimestamp.UnmarshalQueryParameter(v); err != nil {
					plain = false
					return err
				}
			case "deletionTimestamp":
				t := &metav1.Time{}
				if err := t.UnmarshalQueryParameter(v); err != nil {
					plain = false
					return err
				}
				if !t.IsZero() { // the accessor reads a zero time as unset
					m.DeletionTimestamp = t
				}
			}
			return nil
		case "generation", "deletionGracePeriodSeconds":
			start := s.pos
			if err := s.skip(); err != nil {
				return err
			}
			n, err := strconv.ParseInt(string(s.data[start:s.pos]), 10, 64)
			if err != nil {
				plain = false
				return err
			}
			if key == "generation" {
				m.Generation = n
			} else {
				m.DeletionGracePeriodSeconds = &n
			}
			return nil
		case "labels", "annotations":
			sm, ok := s.stringMap()
			if !ok {
				plain = false
				return errSyntax
			}
			if key == "labels" {
				m.Labels = sm
			} else {
				m.Annotations = sm
			}
			return nil
		case "finalizers":
			l, ok := s.stringList()
			if !ok {
				plain = false
				return errSyntax
			}
			m.Finalizers = l
			return nil
		case "ownerReferences":
			plain = false // the accessor's reading: through the decode
			return errSyntax
		default:
			// managedFields, a stored resourceVersion, members ObjectMeta
			// does not have: the accessors ignore them too.
			return s.skip()
		}
	})
	return plain && err == nil && s.pos == len(data)
}

// stringMap reads an object of strings.
func (s *scanner) stringMap() (map[string]string, bool) {
	if s.peek() != '{' {
		return nil, false
	}
	m := map[string]string{}
	err := s.object(func(key string) error {
		if s.peek() != '"' {
			return errSyntax
		}
		v, err := s.str()
		m[key] = v
		return err
	})
	return m, err == nil
}

// stringList reads an array of strings.
func (s *scanner) stringList() ([]string, bool) {
	l := []string{}
	err := s.array(func() error {
		if s.peek() != '"' {
			return errSyntax
		}
		v, err := s.str()
		l = append(l, v)
		return err
	})
	return l, err == nil
}

// AppendObjectMetaJSON appends the object's metadata, managedFields
// included, with resourceVersion rev: JSON that means what encoding the
// metav1.ObjectMeta decoded from it would (its members in the stored
// order, not the Go type's), as a PartialObjectMetadata or a Table row
// carries it. ok is false when the stored metadata is not in the plain
// form that makes the two the same (a member ObjectMeta lacks, an empty
// value its encoding leaves out, a time in another form than the one it
// writes), and b is returned as it was: the caller decodes instead.
// Whether the form is plain is found once per record.
func (r *Record) AppendObjectMetaJSON(b []byte, rev int64) ([]byte, bool) {
	form := r.metaForm.Load()
	if form == metaFormUnknown {
		form = metaFormOther
		if r.metaEnd != 0 && r.at >= r.metaStart && r.at < r.metaEnd && plainObjectMeta(r.Value[r.metaStart:r.metaEnd]) {
			form = metaFormPlain
		}
		r.metaForm.Store(form)
	}
	if form != metaFormPlain {
		return b, false
	}
	return spliceRV(b, r.Value[r.metaStart:r.metaEnd], int(r.at-r.metaStart), r.sep, rev), true
}

// The values of Record.metaForm.
const (
	metaFormUnknown = iota
	metaFormPlain
	metaFormOther
)

// plainObjectMeta reports whether data, a stored metadata object without
// a resourceVersion, holds only ObjectMeta's members, each in the form
// encoding/json writes it from the Go type: strings and string maps and
// lists not empty (omitempty drops them), integers as integers, times as
// metav1.Time writes them (RFC 3339 in UTC to the second), a
// creationTimestamp (the type writes null without one), and owner
// references and managedFields entries in the same terms.
func plainObjectMeta(data []byte) bool {
	s := scanner{data: data}
	created := false
	err := s.objectBytes(func(key string) error {
		var ok bool
		switch key {
		case "name", "generateName", "namespace", "selfLink", "uid":
			ok = s.nonEmptyString()
		case "generation":
			ok = s.integer(false)
		case "deletionGracePeriodSeconds":
			ok = s.integer(true)
		case "creationTimestamp":
			ok, created = s.time(), true
		case "deletionTimestamp":
			ok = s.time()
		case "labels", "annotations":
			ok = s.nonEmpty('{', func() bool {
				_, _, err := s.strEnd()
				return err == nil
			})
		case "finalizers":
			ok = s.nonEmpty('[', func() bool {
				_, _, err := s.strEnd()
				return err == nil
			})
		case "ownerReferences":
			ok = s.nonEmpty('[', s.ownerReference)
		case "managedFields":
			ok = s.nonEmpty('[', s.managedFieldsEntry)
		}
		if !ok {
			return errSyntax
		}
		return nil
	})
	return err == nil && created && s.pos == len(data)
}

// nonEmptyString reads a string that is not "".
func (s *scanner) nonEmptyString() bool {
	start, _, err := s.strEnd()
	return err == nil && s.pos-start > 2
}

// integer reads an integer written as strconv writes an int64, not 0
// unless zero is set.
func (s *scanner) integer(zero bool) bool {
	if c := s.peek(); c != '-' && (c < '0' || c > '9') {
		return false
	}
	start := s.pos
	if s.skip() != nil {
		return false
	}
	lit := s.data[start:s.pos]
	n, err := strconv.ParseInt(string(lit), 10, 64)
	return err == nil && (n != 0 || zero) && string(strconv.AppendInt(nil, n, 10)) == string(lit)
}

// time reads a time in the form metav1.Time writes: RFC 3339, UTC, whole
// seconds, not the zero time (written as null).
func (s *scanner) time() bool {
	if s.peek() != '"' {
		return false
	}
	b, _, plain, err := s.strBytes()
	if err != nil || !plain || len(b) != len(time.RFC3339)-5 {
		return false
	}
	t, err := time.Parse(time.RFC3339, bytesString(b))
	return err == nil && !t.IsZero() && t.Format(time.RFC3339) == bytesString(b)
}

// nonEmpty reads an object (open '{', each member's value read by
// member) or an array ('[', each element read by member) with at least
// one member or element.
func (s *scanner) nonEmpty(open byte, member func() bool) bool {
	if s.peek() != open {
		return false
	}
	if open == '{' {
		n := 0
		err := s.objectBytes(func(string) error {
			n++
			if !member() {
				return errSyntax
			}
			return nil
		})
		return err == nil && n > 0
	}
	s.pos++
	if s.peek() == ']' {
		return false
	}
	for {
		if !member() {
			return false
		}
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return false
		}
	}
}

// ownerReference reads an owner reference as metav1.OwnerReference
// writes it: apiVersion, kind, name and uid always, as strings, and
// controller and blockOwnerDeletion as booleans when set.
func (s *scanner) ownerReference() bool {
	var required int
	err := s.objectBytes(func(key string) error {
		switch key {
		case "apiVersion", "kind", "name", "uid":
			required++
			if _, _, err := s.strEnd(); err != nil {
				return err
			}
			return nil
		case "controller", "blockOwnerDeletion":
			if !s.boolean() {
				return errSyntax
			}
			return nil
		}
		return errSyntax
	})
	return err == nil && required == 4
}

// managedFieldsEntry reads an entry as metav1.ManagedFieldsEntry writes
// it: its strings not empty, its time as metav1.Time writes it, and
// fieldsV1 an object (written back as it is).
func (s *scanner) managedFieldsEntry() bool {
	err := s.objectBytes(func(key string) error {
		ok := false
		switch key {
		case "manager", "operation", "apiVersion", "fieldsType", "subresource":
			ok = s.nonEmptyString()
		case "time":
			ok = s.time()
		case "fieldsV1":
			ok = s.peek() == '{' && s.skip() == nil
		}
		if !ok {
			return errSyntax
		}
		return nil
	})
	return err == nil
}

// boolean reads true or false.
func (s *scanner) boolean() bool {
	for _, lit := range []string{"true", "false"} {
		if s.peek() == lit[0] && len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
			s.pos += len(lit)
			return true
		}
	}
	return false
}
