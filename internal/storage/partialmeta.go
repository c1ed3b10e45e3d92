package storage

import (
	"strconv"
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
	if s.peek() != '[' {
		return nil, false
	}
	s.pos++
	l := []string{}
	if s.peek() == ']' {
		s.pos++
		return l, true
	}
	for {
		if s.peek() != '"' {
			return nil, false
		}
		v, err := s.str()
		if err != nil {
			return nil, false
		}
		l = append(l, v)
		switch s.peek() {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return l, true
		default:
			return nil, false
		}
	}
}
