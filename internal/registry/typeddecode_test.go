package registry_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/randfill"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/registry/crd"
)

// typedKinds are the built-in kinds, whose bodies decode through Go types.
func typedKinds() []*registry.Kind {
	var out []*registry.Kind
	seen := map[string]bool{}
	for _, k := range append(core.Kinds(), core.Namespace(), crd.Kind()) {
		if k.Typed != nil && !seen[k.Kind] {
			seen[k.Kind] = true
			out = append(out, k)
		}
	}
	return out
}

// typedKind is the built-in kind named kind.
func typedKind(tb testing.TB, kind string) *registry.Kind {
	for _, k := range typedKinds() {
		if k.Kind == kind {
			return k
		}
	}
	tb.Fatalf("no kind %s", kind)
	return nil
}

// checkDecode fails t when Decode's answer for data differs from the full
// decode's: the object, the strict errors, the error.
func checkDecode(t *testing.T, k *registry.Kind, data []byte) {
	t.Helper()
	got, gotStrict, gotErr := registry.Decode(k, data)
	want, wantStrict, wantErr := registry.DecodeFull(k, data)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%s %s: error %v, want %v", k.Kind, data, gotErr, wantErr)
	}
	if fmt.Sprint(gotStrict) != fmt.Sprint(wantStrict) {
		t.Fatalf("%s %s: strict errors %v, want %v", k.Kind, data, gotStrict, wantStrict)
	}
	if gotErr == nil && !reflect.DeepEqual(got.Object, want.Object) {
		t.Fatalf("%s %s:\n%s", k.Kind, data, strings.Join(differences("", got.Object, want.Object), "\n"))
	}
}

// differences lists where got and want differ.
func differences(path string, got, want any) []string {
	gm, ok1 := got.(map[string]any)
	wm, ok2 := want.(map[string]any)
	if ok1 && ok2 {
		var out []string
		for k := range gm {
			if _, ok := wm[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: got %#v, want none", path, k, gm[k]))
			}
		}
		for k := range wm {
			if _, ok := gm[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: got none, want %#v", path, k, wm[k]))
			} else {
				out = append(out, differences(path+"."+k, gm[k], wm[k])...)
			}
		}
		return out
	}
	gl, ok1 := got.([]any)
	wl, ok2 := want.([]any)
	if ok1 && ok2 && len(gl) == len(wl) {
		var out []string
		for i := range gl {
			out = append(out, differences(fmt.Sprintf("%s[%d]", path, i), gl[i], wl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(got, want) {
		return []string{fmt.Sprintf("%s: got %#v, want %#v", path, got, want)}
	}
	return nil
}

// Bodies of every built-in kind, as a client would send them (random Go
// objects, and those objects as the API writes them back), and mutations
// of those: each one decodes to the same object, strict errors and error
// whether or not the one-pass decode takes it.
func TestPlainDecodeMatchesTheFullDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	// Every body is also decoded as a custom resource's (no Go type):
	// one pass when it has no duplicate member and plain metadata.
	widgets := &registry.Kind{Group: "x.io", Versions: []string{"v1"}, Kind: "Widget"}
	customTaken := 0
	check := func(t *testing.T, k *registry.Kind, body []byte) {
		t.Helper()
		checkDecode(t, k, body)
		checkDecode(t, widgets, body)
		if registry.CustomPlain(body) {
			customTaken++
		}
	}
	defer func() {
		t.Logf("custom resources: the one-pass decode took %d bodies", customTaken)
		if customTaken < 500 {
			t.Errorf("custom resources: the one-pass decode took %d bodies, want more", customTaken)
		}
	}()
	for _, k := range typedKinds() {
		t.Run(k.Kind, func(t *testing.T) {
			f := randfill.NewWithSeed(int64(len(k.Kind))).NilChance(0.6).NumElements(0, 2).MaxDepth(5)
			taken := 0
			for range 150 {
				obj := k.Typed()
				f.Fill(obj)
				body, err := json.Marshal(obj)
				if err != nil {
					t.Fatal(err)
				}
				check(t, k, body)
				// As the API writes it back: mostly plain.
				full, _, err := registry.DecodeFull(k, body)
				if err != nil {
					continue
				}
				full.SetAPIVersion(k.GroupVersionKind("v1").GroupVersion().String())
				full.SetKind(k.Kind)
				canonical, err := json.Marshal(full.Object)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := registry.PlainDecode(k, canonical); ok {
					taken++
				}
				check(t, k, canonical)
				for range 8 {
					m := map[string]any{}
					if err := json.Unmarshal(canonical, &m); err != nil {
						t.Fatal(err)
					}
					mutate(rng, m)
					mutated, err := json.Marshal(m)
					if err != nil {
						t.Fatal(err)
					}
					check(t, k, mutated)
				}
			}
			t.Logf("%s: the one-pass decode took %d of 150 canonical bodies", k.Kind, taken)
			if taken == 0 {
				t.Errorf("the one-pass decode took none")
			}
		})
	}
}

// mutate changes one member somewhere in m: another value, of another
// type or empty, an unknown member, a member name in other case.
func mutate(rng *rand.Rand, m map[string]any) {
	var maps []map[string]any
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			maps = append(maps, x)
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(m)
	target := maps[rng.IntN(len(maps))]
	keys := make([]string, 0, len(target))
	for k := range target {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	values := []any{"", "x", 0, 1, -1, 1.5, 1e20, int64(1) << 40, true, false, nil,
		map[string]any{}, []any{}, []any{"a"}, map[string]any{"a": "b"},
		"2026-01-02T03:04:05Z", "2026-01-02T03:04:05.5Z", "2026-01-02T04:04:05+01:00"}
	switch {
	case len(keys) == 0 || rng.IntN(6) == 0:
		target[fmt.Sprintf("unknown%d", rng.IntN(3))] = values[rng.IntN(len(values))]
	case rng.IntN(6) == 0 && keys[0] != "":
		k := keys[0]
		target[strings.ToUpper(k[:1])+k[1:]] = target[k]
		delete(target, k)
	default:
		target[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
	}
}

// Hand-written bodies at the edges the one-pass decode must leave to the
// full decode, or take with the same answer.
func TestPlainDecodeEdges(t *testing.T) {
	configMap, lease, event := typedKind(t, "ConfigMap"), typedKind(t, "Lease"), typedKind(t, "Event")
	for _, tc := range []struct {
		kind  *registry.Kind
		body  string
		plain bool // the one-pass decode takes it
	}{
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","creationTimestamp":null,"labels":{"app":"x"}},"data":{"k":"v"}}`, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","creationTimestamp":"2026-01-02T03:04:05Z"},"immutable":true}`, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","creationTimestamp":"2026-01-02T04:04:05+01:00"}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":""}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"immutable":false}`, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"immutable":null}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":5}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":null}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"Data":{"k":"v"}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"unknown":1}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","name":"b"}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"binaryData":{"k":"AAE="}}`, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"binaryData":{"k":"AAE"}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"binaryData":{"k":"AAF="}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"binaryData":{"k":"A-E="}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"binaryData":{"k":null}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"binaryData":{"k":""}}`, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","generation":5}}`, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","generation":5.0}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","generation":1e2}}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","deletionGracePeriodSeconds":0}}`, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":null}`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap"} `, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{}} `, true},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap"}x`, false},
		{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"\u00e9\ud800"}}`, true},
		// An update as client-go sends it: the object read, with its managedFields.
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"n","uid":"9b1c2f1e-1111-2222-3333-444455556666","resourceVersion":"123","creationTimestamp":"2026-11-25T05:06:39Z","managedFields":[{"manager":"kplane-bench","operation":"Update","apiVersion":"v1","time":"2026-11-25T05:06:39Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:n":{}}}}]},"data":{"n":"5"}}`, true},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{ "f:data" : { "." :{} } }}]}}`, true},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{}}]}}`, true},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":null}]}}`, false},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:data":"x"}}]}}`, false},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:data":{"i":1.0}}}]}}`, false},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":[]}]}}`, false},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","time":"2026-11-25T06:06:39+01:00"}]}}`, false},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","fieldsV1":{"f:a":{},"f:a":{}}}]}}`, false},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","time":"0001-01-01T00:00:00Z"}]}}`, false},
		{configMap, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","time":null}]}}`, false},
		{event, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a"},"involvedObject":{},"source":{},"firstTimestamp":"0001-01-01T00:00:00Z","lastTimestamp":null,"eventTime":null,"reportingComponent":"","reportingInstance":""}`, false},
		{lease, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a"},"spec":{"holderIdentity":"h","leaseDurationSeconds":15,"leaseTransitions":2147483648}}`, false},
		{lease, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a"},"spec":{"holderIdentity":"h","leaseDurationSeconds":15}}`, true},
		{lease, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a"},"spec":{"renewTime":"2026-01-02T03:04:05.000000Z"}}`, true},
		{lease, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a"},"spec":{"renewTime":"2026-01-02T03:04:05Z"}}`, false},
		{lease, `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a"},"spec":{"renewTime":null}}`, false},
		{event, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"R","message":"m","source":{"component":"c"},"firstTimestamp":"2026-01-02T03:04:05Z","lastTimestamp":null,"count":1,"type":"Normal","eventTime":null,"reportingComponent":"","reportingInstance":""}`, true},
		{event, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a"},"involvedObject":{},"source":{},"firstTimestamp":null,"lastTimestamp":null,"eventTime":"2026-01-02T03:04:05.123456Z","reportingComponent":"","reportingInstance":""}`, true},
		{event, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a"},"involvedObject":{},"source":{},"eventTime":"2026-01-02T03:04:05.123Z","reportingComponent":"","reportingInstance":""}`, false},
		{event, `{"apiVersion":"v1","kind":"Event","metadata":{"name":"a"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"R","message":"m","source":{"component":"c"},"firstTimestamp":"2026-01-02T03:04:05Z","lastTimestamp":null,"count":1,"type":"Normal","eventTime":null,"reportingComponent":"c","reportingInstance":""}`, true},
	} {
		_, plain := registry.PlainDecode(tc.kind, []byte(tc.body))
		if plain != tc.plain {
			t.Errorf("%s: taken %v, want %v", tc.body, plain, tc.plain)
		}
		checkDecode(t, tc.kind, []byte(tc.body))
	}
}

// Bodies with managedFields as clients send them back in an update, and
// odd ones: random field sets (objects, with now and then another value
// at a leaf), times in and out of UTC, null and empty members. Each
// decodes as the full decode does, and the plain ones are taken.
func TestPlainDecodeManagedFields(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	configMap := typedKind(t, "ConfigMap")
	widgets := &registry.Kind{Group: "x.io", Versions: []string{"v1"}, Kind: "Widget"}
	leaves := []any{"x", int64(1), 1.5, nil, []any{}, true}
	var tree func(depth int) any
	tree = func(depth int) any {
		if depth > 0 && rng.IntN(40) == 0 {
			return leaves[rng.IntN(len(leaves))]
		}
		m := map[string]any{}
		if depth < 4 {
			for range rng.IntN(4) {
				m[[]string{"f:data", ".", "f:metadata", `k:{"name":"a"}`, "v:5", "i:0", "f:é"}[rng.IntN(7)]] = tree(depth + 1)
			}
		}
		return m
	}
	times := []any{"2026-11-25T05:06:39Z", "2026-11-25T06:06:39+01:00", "2026-11-25T05:06:39.5Z", nil, "", "0001-01-01T00:00:00Z"}
	taken := 0
	for i := range 3000 {
		var entries []any
		for range 1 + rng.IntN(3) {
			e := map[string]any{"manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1"}
			switch rng.IntN(4) {
			case 0: // none
			case 1:
				e["time"] = times[rng.IntN(len(times))]
			default:
				e["time"] = times[0]
			}
			if rng.IntN(8) > 0 {
				e["fieldsV1"] = tree(0)
			}
			if rng.IntN(10) == 0 {
				e["subresource"] = "status"
			}
			entries = append(entries, e)
		}
		body, err := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprint("a", i), "managedFields": entries}, "data": map[string]any{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := registry.PlainDecode(configMap, body); ok {
			taken++
		}
		checkDecode(t, configMap, body)
		checkDecode(t, widgets, body) // a custom resource's metadata too
	}
	t.Logf("the one-pass decode took %d of 3000", taken)
	if taken < 500 {
		t.Errorf("the one-pass decode took %d of 3000 bodies with managedFields, want more", taken)
	}
}

// FuzzPlainDecode: any body of a ConfigMap or a Lease decodes to what the
// full decode makes of it (go test -fuzz FuzzPlainDecode for more than
// the seeds).
func FuzzPlainDecode(f *testing.F) {
	configMap, lease := typedKind(f, "ConfigMap"), typedKind(f, "Lease")
	for _, s := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","creationTimestamp":null,"labels":{"app":"x"}},"data":{"k":"v"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","generation":5,"creationTimestamp":"2026-01-02T03:04:05Z"},"immutable":false}`,
		`{"metadata":{"name":"a","name":"b"},"data":{"k":null}}`,
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"a"},"spec":{"holderIdentity":"h","leaseDurationSeconds":15,"renewTime":"2026-01-02T03:04:05.000000Z"}}`,
	} {
		f.Add(false, []byte(s))
		f.Add(true, []byte(s))
	}
	f.Fuzz(func(t *testing.T, isLease bool, data []byte) {
		k := configMap
		if isLease {
			k = lease
		}
		checkDecode(t, k, data)
	})
}
