package apiserver

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// A record whose metadata is not in the plain form (a time to the
// half second, empty labels, an unknown member: what another writer of
// the store may have left) is written through a decode of the whole
// record: a table row's object and a PartialObjectMetadata are then
// what the typed encoding of its metadata gives, managedFields
// included, though the row's cells had only the members they read.
func TestPartialOfRecordsNotPlain(t *testing.T) {
	var cm *registry.Kind
	for _, k := range core.Kinds() {
		if k.Kind == "ConfigMap" {
			cm = k
		}
	}
	value := `{"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"creationTimestamp":"2026-11-23T10:00:00.5Z",` +
		`"labels":{},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}},"manager":"m","operation":"Update"}],` +
		`"name":"odd","namespace":"default","zzz":"x"}}`
	rec, err := storage.NewRecord("/configmaps/default/odd", []byte(value), 7)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := rec.AppendObjectMetaJSON(nil, 7); ok {
		t.Fatal("the odd metadata was taken as plain")
	}
	full, err := rec.Decode(7)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(partial(full))
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendPartial(nil, rec, 7, nil)
	if err != nil || string(got) != string(want) {
		t.Fatalf("PartialObjectMetadata: %s, %v\nwant %s", got, err, want)
	}

	members, all := cm.TableMembers("v1")
	row, err := recordRow(rec, members, all)
	if err != nil {
		t.Fatal(err)
	}
	tbl := newTable(cm, "v1", "", time.Date(2026, 11, 23, 10, 0, 10, 0, time.UTC))
	out, err := tbl.write(nil, recordsMeta(&storage.RecordList{ResourceVersion: 7}), 1, func(int) (tableRow, error) { return row, nil }, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	var table struct {
		Rows []struct {
			Cells  []any
			Object json.RawMessage
		}
	}
	if err := json.Unmarshal(out, &table); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(table.Rows) != 1 || !reflect.DeepEqual(table.Rows[0].Cells, []any{"odd", 1.0, "9s"}) || string(table.Rows[0].Object) != string(want) {
		t.Fatalf("table: %s\nwant the cells [odd 1 9s] and the object %s", out, want)
	}
}
