package transcode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	svmv1 "k8s.io/api/storagemigration/v1"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/randfill"
)

// want is what kube-apiserver would write: the generated Marshal of the
// object encoding/json decodes from data; ok is false when it does not
// decode.
func want(t reflect.Type, data []byte) ([]byte, bool) {
	obj := reflect.New(t).Interface()
	if json.Unmarshal(data, obj) != nil {
		return nil, false
	}
	b, err := obj.(marshaler).Marshal()
	if err != nil {
		panic(err)
	}
	return b, true
}

// kinds are the Go types of every kind (and list kind) in the groups
// kplane serves in protobuf.
func kinds(t *testing.T) []reflect.Type {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, rbacv1.AddToScheme, apiextensionsv1.AddToScheme,
		admissionregistrationv1.AddToScheme, eventsv1.AddToScheme, authenticationv1.AddToScheme, authorizationv1.AddToScheme,
		flowcontrolv1.AddToScheme, certificatesv1.AddToScheme, svmv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	var types []reflect.Type
	for gvk, typ := range scheme.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal {
			continue
		}
		if _, ok := reflect.New(typ).Interface().(marshaler); ok && !slices.Contains(types, typ) {
			types = append(types, typ)
		}
	}
	sort.Slice(types, func(i, j int) bool { return types[i].String() < types[j].String() })
	return types
}

// fillFuncs fill the types with their own JSON form with values their
// JSON holds as they are.
func fillFuncs(f *randfill.Filler) *randfill.Filler {
	return f.Funcs(
		func(t *metav1.Time, c randfill.Continue) {
			if c.Intn(4) > 0 {
				*t = metav1.Unix(c.Int63n(1<<35)-1<<34, 0)
			}
		},
		func(t *metav1.MicroTime, c randfill.Continue) {
			if c.Intn(4) > 0 {
				*t = metav1.NewMicroTime(time.Unix(c.Int63n(1<<35), c.Int63n(1e9)/1000*1000))
			}
		},
		func(d *metav1.Duration, c randfill.Continue) { d.Duration = time.Duration(c.Int63n(1e12)) },
		func(q *resource.Quantity, c randfill.Continue) {
			*q = resource.MustParse([]string{"0", "1", "100m", "1.5Gi", "2k", "1e3", "-7"}[c.Intn(7)])
		},
		func(v *intstr.IntOrString, c randfill.Continue) {
			if c.Intn(2) == 0 {
				*v = intstr.FromInt32(c.Int31())
			} else {
				*v = intstr.FromString(c.String(8))
			}
		},
		func(fv *metav1.FieldsV1, c randfill.Continue) {
			b, _ := json.Marshal(map[string]any{"f:" + c.String(4): map[string]any{}, ".": map[string]any{}})
			fv.SetRawBytes(b)
		},
		func(r *runtime.RawExtension, c randfill.Continue) {
			if c.Intn(2) == 0 {
				r.Raw, _ = json.Marshal(map[string]any{"a": c.Intn(10), "b": c.String(5)})
			}
		},
		func(v *apiextensionsv1.JSON, c randfill.Continue) {
			v.Raw, _ = json.Marshal(c.String(6))
		},
		func(p *apiextensionsv1.JSONSchemaProps, c randfill.Continue) {
			// A small schema: the type's own recursion is deep.
			p.Type = []string{"object", "string", "integer"}[c.Intn(3)]
			p.Description = c.String(10)
			if c.Intn(2) == 0 {
				p.Properties = map[string]apiextensionsv1.JSONSchemaProps{"x": {Type: "string", Format: c.String(3)}}
			}
			if c.Intn(2) == 0 {
				max := c.Float64()
				p.Maximum = &max
			}
			if c.Intn(2) == 0 {
				p.AdditionalProperties = &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true}
			}
		},
	)
}

// Random objects of every type transcode to the generated Marshal's
// bytes, in the JSON encoding/json writes (struct fields in declaration
// order) and in the form kplane stores (every object's keys sorted).
func TestTranscodeRandomObjects(t *testing.T) {
	types := kinds(t)
	if len(types) < 60 {
		t.Fatalf("only %d types", len(types))
	}
	total, refused := 0, 0
	for _, typ := range types {
		p := For(typ)
		if p == nil {
			t.Errorf("%s: no plan", typ)
			continue
		}
		f := fillFuncs(randfill.NewWithSeed(int64(len(typ.String()))).NilChance(0.3).NumElements(0, 3).MaxDepth(6))
		n, done := 0, 0
		for range 60 {
			obj := reflect.New(typ).Interface()
			f.Fill(obj)
			data, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			var generic any
			if err := json.Unmarshal(data, &generic); err != nil {
				t.Fatal(err)
			}
			stored, _ := json.Marshal(generic) // keys sorted
			for _, in := range [][]byte{data, stored} {
				w, ok := want(typ, in)
				if !ok {
					continue
				}
				n++
				got, ok := p.Append([]byte("prefix"), in)
				if !ok {
					if string(got) != "prefix" {
						t.Fatalf("%s: refused, and dst changed", typ)
					}
					continue
				}
				done++
				if !bytes.Equal(got[6:], w) || string(got[:6]) != "prefix" {
					t.Fatalf("%s: transcoded differs from the generated Marshal\nJSON %s\n got %x\nwant %x", typ, in, got[6:], w)
				}
			}
		}
		total += n
		refused += n - done
		if n > 0 && done*10 < n*9 {
			t.Errorf("%s: only %d of %d objects transcoded", typ, done, n)
		}
	}
	t.Logf("%d types, %d objects, %d refused", len(types), total, refused)
}

// cm is a ConfigMap's JSON with the given members after its metadata.
func cm(rest string) string {
	return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"7",` +
		`"creationTimestamp":"2026-11-26T01:02:03Z","managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1",` +
		`"time":"2026-11-26T01:02:03Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:k":{}}}}]}` + rest + `}`
}

// Hand-made JSON: what a plan writes, and what it refuses.
func TestTranscodeCases(t *testing.T) {
	cmType := reflect.TypeFor[corev1.ConfigMap]()
	podType := reflect.TypeFor[corev1.Pod]()
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		name string
		typ  reflect.Type
		json string
		ok   bool
	}{
		{"plain", cmType, cm(`,"data":{"a":"1","b":""},"binaryData":{"x":"AAE="},"immutable":true`), true},
		{"whitespace", cmType, " {\n \"data\" : { \"a\" : \"1\" } ,\"kind\":\"ConfigMap\" }\n", true},
		{"empty", cmType, `{}`, true},
		{"nulls", cmType, `{"metadata":null,"data":null,"immutable":null,"binaryData":null}`, true},
		{"long values move their lengths", cmType, cm(`,"data":{"` + long + `":"` + long + `"}`), true},
		{"escapes", cmType, `{"data":{"a\u00e9\n":"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00<\u2028"}}`, true},
		{"escaped key of a field", cmType, `{"d\u0061ta":{"a":"b"}}`, true},
		{"unicode", cmType, `{"data":{"é":"日本語"}}`, true},
		{"unknown members", cmType, `{"spec":{"x":[1,2.5e3,true,null,{"y":"z"}]},"data":{"a":"b"}}`, true},
		{"time with fraction and offset", cmType, `{"metadata":{"creationTimestamp":"2026-11-26T01:02:03.9+02:00"}}`, true},
		{"zero time", cmType, `{"metadata":{"creationTimestamp":"0001-01-01T00:00:00Z"}}`, true},
		{"time before 1970", cmType, `{"metadata":{"creationTimestamp":"1901-02-03T04:05:06Z"}}`, true},
		{"pod", podType, `{"metadata":{"name":"p","labels":{"a":"b","c":"d"},"ownerReferences":[{"apiVersion":"v1","kind":"X","name":"n","uid":"u","controller":true}]},` +
			`"spec":{"containers":[{"name":"c","image":"i","ports":[{"containerPort":80,"protocol":"TCP"}],"resources":{"limits":{"cpu":"100m","memory":"1Gi"}},` +
			`"livenessProbe":{"httpGet":{"path":"/","port":"http"},"periodSeconds":-3}}],"securityContext":{"supplementalGroups":[1,2,9223372036854775807]},` +
			`"volumes":[{"name":"v","configMap":{"name":"c","defaultMode":420}}],"terminationGracePeriodSeconds":-9223372036854775808},` +
			`"status":{"phase":"Running","startTime":"2026-11-26T01:02:03Z"}}`, true},

		{"map keys out of order", cmType, `{"data":{"b":"1","a":"2"}}`, false},
		{"map key twice", cmType, `{"data":{"a":"1","a":"2"}}`, false},
		{"member twice", cmType, `{"data":{"a":"1"},"data":{"b":"2"}}`, false},
		{"member matched without case", cmType, `{"Data":{"a":"1"}}`, false},
		{"member matched by folding", cmType, `{"metadata":{"\u212aind":"x","name":"n"}}`, true}, // no field "kind" in ObjectMeta: unknown
		{"TypeMeta folded", cmType, `{"KIND":"ConfigMap"}`, true},
		{"TypeMeta of another type", cmType, `{"apiVersion":{}}`, false},
		{"TypeMeta folded, of another type", cmType, `{"ApiVersion":1}`, false},
		{"TypeMeta null", cmType, `{"apiVersion":null}`, true},
		{"null in a map", cmType, `{"data":{"a":null,"b":"c"},"binaryData":{"x":null,"y":""}}`, true},
		{"null in a list", cmType, `{"metadata":{"finalizers":["a",null]}}`, true},
		{"null object in a list", cmType, `{"metadata":{"ownerReferences":[null]}}`, false},
		{"number for a string", cmType, `{"data":{"a":1}}`, false},
		{"string for a bool", cmType, `{"immutable":"true"}`, false},
		{"int32 out of range", podType, `{"spec":{"volumes":[{"name":"v","configMap":{"defaultMode":2147483648}}]}}`, false},
		{"int with a fraction", podType, `{"spec":{"volumes":[{"name":"v","configMap":{"defaultMode":4.0}}]}}`, false},
		{"bad time", cmType, `{"metadata":{"creationTimestamp":"2026-02-30T00:00:00Z"}}`, false},
		{"bad base64", cmType, `{"binaryData":{"x":"A"}}`, false},
		{"lone surrogate", cmType, `{"data":{"a":"\ud83d"}}`, false},
		{"invalid UTF-8", cmType, "{\"data\":{\"a\":\"\xff\"}}", false},
		{"malformed", cmType, `{"data":{"a":"1"}`, false},
		{"trailing", cmType, `{"data":{"a":"1"}} x`, false},
		{"not an object", cmType, `[]`, false},
		{"bad number", cmType, `{"x":01}`, false},
		{"control character", cmType, "{\"data\":{\"a\":\"\x01\"}}", false},
		{"too deep", cmType, `{"x":` + strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1) + `}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := For(tc.typ)
			got, ok := p.Append(nil, []byte(tc.json))
			w, decodes := want(tc.typ, []byte(tc.json))
			if ok != tc.ok {
				t.Fatalf("transcoded: %v, want %v (encoding/json decodes it: %v)", ok, tc.ok, decodes)
			}
			if !ok {
				return
			}
			if !decodes {
				t.Fatal("transcoded what encoding/json refuses")
			}
			if !bytes.Equal(got, w) {
				t.Fatalf("differs from the generated Marshal\n got %x\nwant %x", got, w)
			}
		})
	}
}

// A JSON object kplane serves, as bench objects are: a 1 KiB ConfigMap.
var benchConfigMap = []byte(`{"apiVersion":"v1","data":{"payload":"` + strings.Repeat("x", 1024) + `"},"kind":"ConfigMap","metadata":{"creationTimestamp":"2026-11-25T23:00:00Z","labels":{"app":"kplane-bench"},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:payload":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}},"manager":"kplane-bench","operation":"Update","time":"2026-11-25T23:00:00Z"}],"name":"bench-1","namespace":"default","resourceVersion":"12","uid":"6f0c8c4e-3b8f-4a43-9d1e-1a2b3c4d5e6f"}}`)

// BenchmarkTranscode is a 1 KiB ConfigMap's message from its JSON.
func BenchmarkTranscode(b *testing.B) { benchTranscode(b, benchConfigMap) }

func benchTranscode(b *testing.B, data []byte) {
	p := For(reflect.TypeFor[corev1.ConfigMap]())
	var buf []byte
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		var ok bool
		if buf, ok = p.Append(buf[:0], data); !ok {
			b.Fatal("refused")
		}
	}
}

// benchConfigMapText is benchConfigMap holding 1 KiB of configuration
// text: a newline, which JSON escapes, every 40 bytes or so.
var benchConfigMapText = func() []byte {
	var sb strings.Builder
	for i := 0; sb.Len() < 1024; i++ {
		fmt.Fprintf(&sb, "  key_%d: value-%d # a comment about it\n", i, i*7)
	}
	text, err := json.Marshal(sb.String()[:1024])
	if err != nil {
		panic(err)
	}
	return bytes.Replace(benchConfigMap, []byte(`"`+strings.Repeat("x", 1024)+`"`), text, 1)
}()

// BenchmarkTranscodeText is BenchmarkTranscode on configuration text.
func BenchmarkTranscodeText(b *testing.B) { benchTranscode(b, benchConfigMapText) }

// BenchmarkDecodeMarshal is the same message the long way, for
// comparison: encoding/json into the Go type, then its Marshal.
func BenchmarkDecodeMarshal(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchConfigMap)))
	for b.Loop() {
		var cm corev1.ConfigMap
		if err := json.Unmarshal(benchConfigMap, &cm); err != nil {
			b.Fatal(err)
		}
		if _, err := cm.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}

// hasControl finds a byte below 0x20 wherever it is, among any others.
func TestHasControl(t *testing.T) {
	for n := range 40 {
		for at := -1; at < n; at++ {
			b := bytes.Repeat([]byte{0xff}, n)
			for i := range b {
				b[i] = byte(0x20 + (i*37)%0xe0) // 0x20–0xff
			}
			if at >= 0 {
				b[at] = byte(at % 0x20)
			}
			if got := hasControl(b); got != (at >= 0) {
				t.Fatalf("%d bytes, control at %d: hasControl = %v", n, at, got)
			}
		}
	}
}

// FuzzTranscode: for any bytes, a plan never panics, and what it writes
// is what encoding/json and the generated Marshal write.
// go test ./internal/apiserver/transcode -fuzz FuzzTranscode -fuzztime 60s
func FuzzTranscode(f *testing.F) {
	f.Add(benchConfigMap)
	f.Add(benchConfigMapText)
	f.Add([]byte(cm(`,"data":{"a":"1","b":""},"binaryData":{"x":"AAE="},"immutable":true`)))
	f.Add([]byte(`{"data":{"a\u00e9\n":"\"\\\/\b\f\n\r\t\u0041\u00e9\ud83d\ude00<\u2028"}}`))
	f.Add([]byte(`{"metadata":{"creationTimestamp":"2026-11-26T01:02:03.9+02:00","finalizers":["a",null]},"data":{"a":null}}`))
	types := []reflect.Type{reflect.TypeFor[corev1.ConfigMap](), reflect.TypeFor[corev1.Event](), reflect.TypeFor[coordinationv1.Lease]()}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, typ := range types {
			got, ok := For(typ).Append(nil, data)
			if !ok {
				continue
			}
			w, decodes := want(typ, data)
			if !decodes {
				t.Fatalf("%s: transcoded what encoding/json refuses: %q", typ, data)
			}
			if !bytes.Equal(got, w) {
				t.Fatalf("%s: differs from the generated Marshal for %q\n got %x\nwant %x", typ, data, got, w)
			}
		}
	})
}
