package core

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/storage"
)

// Each built-in column reads only the members it declares: its value from
// an object decoded with only those (as a list's table decodes it) is its
// value from the whole object. A column that counts entries
// (Column.Counts) is counted in the record, with nothing decoded.
func TestColumnsReadWhatTheyDeclare(t *testing.T) {
	value := `{"apiVersion":"v1","binaryData":{"b":"AA=="},"count":3,"data":{"a":"1","c":"2"},"firstTimestamp":"2026-11-20T10:00:00Z",` +
		`"involvedObject":{"fieldPath":"spec.containers{a}","kind":"Pod","name":"p"},"kind":"Any","lastTimestamp":"2026-11-22T10:00:00Z",` +
		`"message":" M ","metadata":{"creationTimestamp":"2026-11-23T10:00:00Z","labels":{"l":"v"},"name":"n"},` +
		`"reason":"R","roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"secrets":[{"name":"s"},{"name":"t"}],` +
		`"source":{"component":"c","host":"h"},"spec":{"holderIdentity":"h","resource":{"group":"example.com","resource":"widgets"},"validations":[{"expression":"true"}],"mutations":[{"patchType":"JSONPatch"}],` +
		`"paramKind":{"apiVersion":"v1","kind":"ConfigMap"},"policyName":"p","paramRef":{"name":"x","namespace":"ns"},` +
		`"signerName":"example.com/s","username":"alice","expirationSeconds":3600,"priorityLevelConfiguration":{"name":"pl"},"matchingPrecedence":500,` +
		`"distinguisherMethod":{"type":"ByUser"},"type":"Limited","limited":{"nominalConcurrencyShares":5,` +
		`"limitResponse":{"type":"Queue","queuing":{"queues":64,"handSize":6,"queueLengthLimit":50}}}},"status":{"hard":{"configmaps":"2","limits.cpu":"1"},"used":{"configmaps":"1"},"phase":"Active","conditions":[{"type":"Approved","status":"True"},{"type":"Running","status":"True"},{"type":"Dangling","status":"False"}],"certificate":"Y2VydA=="},` +
		`"subjects":[{"kind":"User","name":"u"},{"kind":"Group","name":"g"},{"kind":"ServiceAccount","name":"sa","namespace":"ns"}],"type":"Opaque"}`
	rec, err := storage.NewRecord("/any/n", []byte(value), 3)
	if err != nil {
		t.Fatal(err)
	}
	full, err := rec.Decode(3)
	if err != nil {
		t.Fatal(err)
	}
	// A guest's columns read objects of its own shape: the sample
	// converted.
	guestRec := func(k *registry.Kind) (*storage.Record, *unstructured.Unstructured) {
		obj := k.Cohabit.ToGuest(full)
		data, err := obj.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		r, err := storage.NewRecord("/any/n", data, 3)
		if err != nil {
			t.Fatal(err)
		}
		return r, obj
	}
	checked := 0
	for _, k := range Kinds() {
		rec, full := rec, full
		if k.IsGuest() {
			rec, full = guestRec(k)
		}
		members, all := k.TableMembers("v1")
		if all {
			if len(k.Columns) > 0 {
				t.Errorf("%s: a column reads the whole object", k.Kind)
			}
			continue
		}
		m, err := rec.DecodeMembers(3, members)
		if err != nil {
			t.Fatal(err)
		}
		part := &unstructured.Unstructured{Object: m}
		for _, c := range k.Columns {
			if c.Cell != registry.CellValue {
				continue // the table writes it from the record
			}
			want := c.Value(full)
			if c.Counts != nil {
				if n, ok := rec.CountEntries(c.Counts); !ok || !reflect.DeepEqual(int64(n), want) {
					t.Errorf("%s column %s: %d (%v) counted in %v, %#v from the whole object", k.Kind, c.Name, n, ok, c.Counts, want)
				}
				checked++
				continue
			}
			if got := c.Value(part); !reflect.DeepEqual(got, want) {
				t.Errorf("%s column %s: %#v from the members %v, %#v from the whole object", k.Kind, c.Name, got, members, want)
			}
			if reflect.DeepEqual(want, c.Value(&unstructured.Unstructured{Object: map[string]any{}})) {
				t.Errorf("%s column %s: the sample gives it no value", k.Kind, c.Name)
			}
			checked++
		}
	}
	if checked < 16 {
		t.Fatalf("%d columns checked", checked)
	}
}
