package apiserver

import (
	"encoding/json"
	"net/http"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// tableOf writes a kind's objects as a metav1.Table (kubectl get): NAME,
// the kind's columns, AGE. Each row carries the object's metadata as a
// PartialObjectMetadata (includeObject=Metadata, the default), the whole
// object (Object) or nothing (None). It writes the JSON that encoding
// the metav1.Table would give, row by row, so that a list's table goes
// out in pieces and each row's object comes from the record where there
// is one.
type tableOf struct {
	k       *registry.Kind
	include string
	now     time.Time
	cols    []registry.Column // the kind's, after NAME unless one is the name
}

func (s *Server) tableFor(k *registry.Kind, v string, r *http.Request) *tableOf {
	return newTable(k, v, r.URL.Query().Get("includeObject"), s.cfg.Registry.Now())
}

// newTable writes version v's table of kind k.
func newTable(k *registry.Kind, v, include string, now time.Time) *tableOf {
	cols := k.ColumnsOf(v)
	t := &tableOf{k: k, include: include, now: now, cols: cols}
	if !slices.ContainsFunc(cols, func(c registry.Column) bool { return c.Cell == registry.CellName }) {
		t.cols = append([]registry.Column{registry.NameColumn}, cols...)
	}
	return t
}

// tableRow is a row's object: decoded (obj) and, when the object is read
// from the store, its record at rev.
type tableRow struct {
	obj *unstructured.Unstructured
	rec *storage.Record
	rev int64
	// read: name and created are the object's name and
	// creationTimestamp, read from the record, and obj holds at most
	// the members the columns read (nil when they read none).
	read          bool
	name, created string
}

// recordRow is the row of a stored object: its record, its name and
// creationTimestamp for the row's first and last cells, and for the
// other cells the object decoded, all of it or only the members the
// columns read (registry.Kind.TableMembers), with that name and
// creationTimestamp as its metadata unless a column reads metadata.
// Columns that only count entries (a ConfigMap's DATA) decode nothing.
func recordRow(rec *storage.Record, members []string, all bool) (tableRow, error) {
	row := tableRow{rec: rec, rev: rec.Rev}
	if all {
		obj, err := rec.Decode(rec.Rev)
		row.obj = obj
		return row, err
	}
	row.read, row.name, row.created = true, rec.Name, rec.CreationTimestamp()
	if len(members) == 0 {
		return row, nil
	}
	m, err := rec.DecodeMembers(rec.Rev, members)
	if err != nil {
		return row, err
	}
	if _, ok := m["metadata"]; !ok {
		m["metadata"] = map[string]any{"name": row.name, "creationTimestamp": row.created}
	}
	row.obj = &unstructured.Unstructured{Object: m}
	return row, nil
}

// nameAndCreated returns the row's object's name and creation time.
func (tr tableRow) nameAndCreated() (string, time.Time) {
	if !tr.read {
		return tr.obj.GetName(), tr.obj.GetCreationTimestamp().Time
	}
	var created metav1.Time
	if err := created.UnmarshalQueryParameter(tr.created); err != nil {
		return tr.name, time.Time{} // as GetCreationTimestamp reads a malformed one
	}
	return tr.name, created.Time
}

// write appends the table of n rows, row(i) giving each, in pieces as
// RecordList.WriteJSON does (flushAt, flush; a nil flush never flushes),
// and returns the last piece.
func (t *tableOf) write(b []byte, lm metav1.ListMeta, n int, row func(i int) (tableRow, error), flushAt int, flush func([]byte) error) ([]byte, error) {
	head := metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ListMeta: lm,
		ColumnDefinitions: t.columns(), Rows: []metav1.TableRow{}}
	data, err := json.Marshal(&head)
	if err != nil {
		return nil, err
	}
	b = append(b, data[:len(data)-len("]}")]...) // rows are last
	if t.k.TableOrder != nil && n > 1 {
		if row, err = t.ordered(n, row); err != nil {
			return nil, err
		}
	}
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		tr, err := row(i)
		if err == nil {
			b, err = t.appendRow(b, tr)
		}
		if err != nil {
			return nil, err
		}
		if b, err = flushFull(b, flushAt, flush); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// ordered reads the n rows and returns them in the kind's order
// (registry.Kind.TableOrder), ties in their own.
func (t *tableOf) ordered(n int, row func(i int) (tableRow, error)) (func(i int) (tableRow, error), error) {
	rows := make([]tableRow, n)
	for i := range rows {
		var err error
		if rows[i], err = row(i); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(rows, func(a, b tableRow) int { return t.k.TableOrder(a.object(), b.object()) })
	return func(i int) (tableRow, error) { return rows[i], nil }, nil
}

// object is the row's object as TableOrder compares it: what the row
// decoded, with its name.
func (tr tableRow) object() *unstructured.Unstructured {
	if tr.obj != nil {
		return tr.obj
	}
	name, _ := tr.nameAndCreated()
	return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}}
}

func (t *tableOf) columns() []metav1.TableColumnDefinition {
	defs := make([]metav1.TableColumnDefinition, len(t.cols))
	for i, c := range t.cols {
		defs[i] = metav1.TableColumnDefinition{
			Name: c.Name, Type: c.Type, Format: c.Format, Description: c.Description, Priority: c.Priority}
	}
	return defs
}

// appendRow appends a metav1.TableRow's JSON: its cells, and its object
// (a RawExtension, written as null when there is none).
func (t *tableOf) appendRow(b []byte, tr tableRow) ([]byte, error) {
	obj := tr.obj
	name, created := tr.nameAndCreated()
	b = append(b, `{"cells":[`...)
	for i, c := range t.cols {
		if i > 0 {
			b = append(b, ',')
		}
		switch c.Cell {
		case registry.CellName:
			b = storage.AppendString(b, name)
		case registry.CellAge:
			b = storage.AppendString(b, humanAge(t.now, created))
		case registry.CellCreated:
			b = storage.AppendString(b, created.UTC().Format(time.RFC3339))
		default:
			v, err := cell(c, tr)
			if err == nil {
				b, err = storage.AppendJSON(b, v)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	b = append(b, `],"object":`...)
	var err error
	switch t.include {
	case "None":
		b = append(b, "null"...)
	case "Object":
		if tr.rec != nil {
			b, err = tr.rec.AppendJSON(b, tr.rev)
		} else {
			b, err = storage.AppendJSON(b, obj.Object)
		}
	default:
		if tr.rec != nil {
			obj = nil // maybe not all of it: the record is decoded if need be
		}
		b, err = appendPartial(b, tr.rec, tr.rev, obj)
	}
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// cell is column c's value in row tr. A column that counts entries
// counts a stored object's where they lie (registry.Column.Counts): its
// row has not decoded them.
func cell(c registry.Column, tr tableRow) (any, error) {
	if c.Counts == nil || tr.rec == nil {
		obj := tr.obj
		if obj == nil {
			obj = &unstructured.Unstructured{Object: map[string]any{}} // reads nothing (TableMembers)
		}
		return c.Value(obj), nil
	}
	if n, ok := tr.rec.CountEntries(c.Counts); ok {
		return int64(n), nil
	}
	m, err := tr.rec.DecodeMembers(tr.rev, c.Counts)
	if err != nil {
		return nil, err
	}
	return c.Value(&unstructured.Unstructured{Object: m}), nil
}

func humanAge(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// partialPrefix opens a PartialObjectMetadata's JSON, up to its metadata.
const partialPrefix = `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":`

// appendPartial appends the PartialObjectMetadata of a stored object:
// written from its record's metadata (rec at rev) where that is plain,
// else encoded from obj (or, when obj is nil, from the record decoded).
func appendPartial(b []byte, rec *storage.Record, rev int64, obj *unstructured.Unstructured) ([]byte, error) {
	if rec != nil {
		if out, ok := rec.AppendObjectMetaJSON(append(b, partialPrefix...), rev); ok {
			return append(out, '}'), nil
		}
		if obj == nil {
			var err error
			if obj, err = rec.Decode(rev); err != nil {
				return nil, err
			}
		}
	}
	data, err := json.Marshal(partial(obj))
	if err != nil {
		return nil, err
	}
	return append(b, data...), nil
}

// partial is obj's metadata as a PartialObjectMetadata, as encoded when
// the stored metadata is not plain.
func partial(obj *unstructured.Unstructured) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}}
	runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"metadata": obj.Object["metadata"]}, p)
	p.Kind, p.APIVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	return p
}

// writeMetaList appends a PartialObjectMetadataList of the records, in
// pieces as RecordList.WriteJSON does, and returns the last piece.
func writeMetaList(b []byte, l *storage.RecordList, flushAt int, flush func([]byte) error) ([]byte, error) {
	lm, err := json.Marshal(recordsMeta(l))
	if err != nil {
		return nil, err
	}
	b = append(b, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":`...)
	b = append(b, lm...)
	if len(l.Items) == 0 {
		return append(b, `,"items":null}`...), nil // as the Go type writes no items
	}
	b = append(b, `,"items":[`...)
	for i, rec := range l.Items {
		if i > 0 {
			b = append(b, ',')
		}
		if b, err = appendPartial(b, rec, rec.Rev, nil); err != nil {
			return nil, err
		}
		if b, err = flushFull(b, flushAt, flush); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}
