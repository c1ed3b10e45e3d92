package plain_test

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kplane-dev/kplane/internal/registry/plain"
	"github.com/kplane-dev/kplane/internal/storage"
)

type inner struct {
	Name string `json:"name"`
}

type sample struct {
	metav1.TypeMeta `json:",inline"`
	Meta            metav1.ObjectMeta  `json:"metadata,omitempty"`
	Text            string             `json:"text,omitempty"`
	Always          string             `json:"always"`
	Count           uint64             `json:"count,omitempty"`
	Flag            bool               `json:"flag,omitempty"`
	Ptr             *int32             `json:"ptr,omitempty"`
	Labels          map[string]string  `json:"labels,omitempty"`
	Required        map[string]string  `json:"required"`
	List            []inner            `json:"list,omitempty"`
	Seen            *metav1.Time       `json:"seen,omitempty"`
	At              metav1.MicroTime   `json:"at,omitempty"`
	Bytes           []byte             `json:"bytes,omitempty"`
	Nested          inner              `json:"nested,omitempty"`
	Times           map[string]float64 `json:"times,omitempty"`
}

// Map gives what encoding/json, the store's decoder and Plain give, or
// refuses where Plain refuses: values at each edge of what it vouches
// for.
func TestMapIsTheJSONRoundTrip(t *testing.T) {
	one := int32(1)
	base := func() sample {
		return sample{Always: "a", Required: map[string]string{}}
	}
	cases := map[string]func(*sample){
		"empty":                  func(*sample) {},
		"type meta":              func(s *sample) { s.APIVersion, s.Kind = "v1", "Sample" },
		"strings not UTF-8":      func(s *sample) { s.Text, s.Labels = "a\xffb\xfe\xfd", map[string]string{"k\xff": "v\xc3"} },
		"keys made one":          func(s *sample) { s.Labels = map[string]string{"\xff": "a", "\xfe": "b"} },
		"count in range":         func(s *sample) { s.Count = math.MaxInt64 },
		"count beyond int64":     func(s *sample) { s.Count = math.MaxInt64 + 1 },
		"flag and pointer":       func(s *sample) { s.Flag, s.Ptr = true, &one },
		"required map nil":       func(s *sample) { s.Required = nil },
		"empty list":             func(s *sample) { s.List = []inner{} },
		"list":                   func(s *sample) { s.List = []inner{{Name: "x"}, {}} },
		"time to the second":     func(s *sample) { s.Seen = &metav1.Time{Time: time.Unix(1764000000, 0)} },
		"time with nanoseconds":  func(s *sample) { s.Seen = &metav1.Time{Time: time.Unix(1764000000, 999)} },
		"pointer to a zero time": func(s *sample) { s.Seen = &metav1.Time{} },
		"time beyond year 9999":  func(s *sample) { s.Seen = &metav1.Time{Time: time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)} },
		"micro time":             func(s *sample) { s.At = metav1.NewMicroTime(time.Unix(1764000000, 123456789)) },
		"bytes":                  func(s *sample) { s.Bytes = []byte("x") },
		"floats":                 func(s *sample) { s.Times = map[string]float64{"a": 1.5} },
		"creation timestamp":     func(s *sample) { s.Meta.CreationTimestamp = metav1.Unix(1764000000, 0) },
		"zero creation timestamp": func(s *sample) {
			s.Meta.CreationTimestamp = metav1.Time{Time: time.Time{}.In(time.FixedZone("x", 3600))}
		},
		"managed fields": func(s *sample) {
			s.Meta.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.FieldsV1{}}}
			s.Meta.ManagedFields[0].FieldsV1.SetRawBytes([]byte(`{"f:a":{"k:{\"x\":1}":{}}}`))
		},
		"managed fields twice": func(s *sample) {
			s.Meta.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.FieldsV1{}}}
			s.Meta.ManagedFields[0].FieldsV1.SetRawBytes([]byte(`{"f:a":{},"f:a":{}}`))
		},
		"managed fields not a set": func(s *sample) {
			s.Meta.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.FieldsV1{}}}
			s.Meta.ManagedFields[0].FieldsV1.SetRawBytes([]byte(`{"f:a":[]}`))
		},
	}
	typ := plain.Of(reflect.TypeFor[sample]())
	taken := 0
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			s := base()
			change(&s)
			got, ok := typ.Map(reflect.ValueOf(s))
			data, err := json.Marshal(s)
			if err != nil {
				if ok {
					t.Fatalf("encoding/json fails (%v); Map gives %v", err, got)
				}
				return
			}
			want, decoded := storage.DecodeObjectNoDuplicates(data)
			vouched := decoded && typ.Plain(want)
			if ok != vouched {
				t.Fatalf("Map took it: %v; Plain vouches for %s: %v", ok, data, vouched)
			}
			if ok {
				taken++
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("Map gives\n%#v\nJSON %s decodes to\n%#v", got, data, want)
				}
			}
		})
	}
	if taken < len(cases)/2 {
		t.Fatalf("Map took %d of %d cases", taken, len(cases))
	}
}

type hidden struct {
	At     metav1.Time      `json:"at"`
	Fields *metav1.FieldsV1 `json:"fields,omitempty"`
}

type withHidden struct {
	hidden
	Name string `json:"name"`
}

// Fields promoted from an unexported embedded struct, which encoding/json
// writes, are read as well: times and field sets among them.
func TestMapReadsFieldsOfUnexportedEmbeddedStructs(t *testing.T) {
	v := withHidden{hidden: hidden{At: metav1.Unix(1764000000, 0), Fields: &metav1.FieldsV1{}}, Name: "x"}
	v.Fields.SetRawBytes([]byte(`{"f:a":{}}`))
	got, ok := plain.Of(reflect.TypeFor[withHidden]()).Map(reflect.ValueOf(v))
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := storage.DecodeObjectNoDuplicates(data)
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Map gives %v (%v), JSON %s", got, ok, data)
	}
}
