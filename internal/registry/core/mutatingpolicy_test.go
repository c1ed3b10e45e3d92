package core_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// mutatingPolicyRecords are kube-apiserver v1.37.2's answers to creates
// and updates of the mutating policy kinds, read off it with dryRun=All
// (testdata/mutatingadmissionpolicies-kube-apiserver-v1.37.2.json): the
// whole 422 Status, or none where it accepted the write.
type mutatingPolicyRecords struct {
	Creates []struct {
		Kind, What string
		Body       json.RawMessage
		Status     json.RawMessage
	}
	Updates []struct {
		Kind, What string
		Old, New   json.RawMessage
		Status     json.RawMessage
	}
}

func readMutatingPolicyRecords(t *testing.T) mutatingPolicyRecords {
	t.Helper()
	data, err := os.ReadFile("testdata/mutatingadmissionpolicies-kube-apiserver-v1.37.2.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec mutatingPolicyRecords
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Creates) < 30 || len(rec.Updates) < 8 {
		t.Fatalf("%d creates, %d updates", len(rec.Creates), len(rec.Updates))
	}
	return rec
}

// checkInvalid compares the 422 a write of obj refused with errs would
// get with want, upstream's Status ("null" or empty: no errors).
func checkInvalid(t *testing.T, k *registry.Kind, obj *unstructured.Unstructured, errs field.ErrorList, want json.RawMessage) {
	t.Helper()
	if len(want) == 0 || string(want) == "null" {
		if len(errs) > 0 {
			t.Errorf("refused, want accepted: %q", errorStrings(errs))
		}
		return
	}
	if len(errs) == 0 {
		t.Fatalf("accepted, want %s", want)
	}
	status := k.Invalid(obj.GetName(), errs).ErrStatus // as the registry refuses it
	status.Kind, status.APIVersion = "Status", "v1"
	got, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("status:\n got  %s\n want %s", got, want)
	}
}

// A create of each body is refused with kube-apiserver v1.37.2's 422,
// its causes in its order and words and its message, or accepted where
// it accepted it: every family of checks of both kinds, a repeated error
// given once. The metadata, which the registry checks, is valid in each
// (but for the reserved suffix).
func TestMutatingAdmissionPolicyCreatesAsKubeAPIServer(t *testing.T) {
	for _, c := range readMutatingPolicyRecords(t).Creates {
		t.Run(c.Kind+"/"+c.What, func(t *testing.T) {
			k := policyKind(t, c.Kind)
			obj := objectOf(t, k, string(c.Body))
			k.PrepareForCreate(obj)
			checkInvalid(t, k, obj, k.Validate(obj), c.Status)
		})
	}
}

// An update of each stored object is refused or accepted as
// kube-apiserver v1.37.2 did it: the create's checks but the reserved
// suffix, the matchConditions compiled again when they or the paramKind
// changed.
func TestMutatingAdmissionPolicyUpdatesAsKubeAPIServer(t *testing.T) {
	for _, c := range readMutatingPolicyRecords(t).Updates {
		t.Run(c.Kind+"/"+c.What, func(t *testing.T) {
			k := policyKind(t, c.Kind)
			old := objectOf(t, k, string(c.Old))
			k.PrepareForCreate(old)
			if errs := k.Validate(old); len(errs) > 0 {
				t.Fatalf("the stored object: %q", errorStrings(errs))
			}
			next := objectOf(t, k, string(c.New))
			k.PrepareForUpdate(next, old)
			checkInvalid(t, k, next, k.ValidateUpdate(next, old), c.Status)
		})
	}
}

// Stored, a mutating policy or binding starts at generation 1 and has no
// status (upstream's storage has no /status); a change of its spec bumps
// the generation, one of its metadata does not. Neither kind creates on
// update or takes an update without a resourceVersion.
func TestMutatingAdmissionPolicyStorage(t *testing.T) {
	reg := newRegistry(t, memoryStore(t), nil)
	ctx := context.Background()
	for _, c := range []struct {
		resource, body, change string
	}{
		{"mutatingadmissionpolicies", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicy","metadata":{"name":"p"},
			"spec":{"matchConstraints":{"resourceRules":[{"apiGroups":["x"],"apiVersions":["v1"],"operations":["*"],"resources":["y"]}]},
			"reinvocationPolicy":"Never","mutations":[{"patchType":"ApplyConfiguration","applyConfiguration":{"expression":"Object{}"}}]}}`, `{"spec":{"reinvocationPolicy":"IfNeeded"}}`},
		{"mutatingadmissionpolicybindings", `{"apiVersion":"admissionregistration.k8s.io/v1","kind":"MutatingAdmissionPolicyBinding",
			"metadata":{"name":"b"},"spec":{"policyName":"p"}}`, `{"spec":{"policyName":"q"}}`},
	} {
		res, ok := reg.Get(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: c.resource})
		if !ok {
			t.Fatalf("%s not served", c.resource)
		}
		k := res.Kind()
		if k.Status || !k.Generation || k.CreateOnUpdate || k.UnconditionalUpdate || k.Namespaced {
			t.Errorf("%s: %+v", c.resource, k)
		}
		obj := objectOf(t, k, c.body)
		out, err := res.Create(ctx, "v1", "", obj, registry.WriteOptions{FieldManager: "test"})
		if err != nil {
			t.Fatalf("%s: %v", c.resource, err)
		}
		if _, has := out.Object["status"]; has || out.GetGeneration() != 1 {
			t.Errorf("%s created: generation %d, status %v", c.resource, out.GetGeneration(), out.Object["status"])
		}
		patch := func(body string) *unstructured.Unstructured {
			out, _, err := res.Patch(ctx, "v1", "", obj.GetName(), []byte(body), registry.PatchOptions{Type: types.MergePatchType,
				WriteOptions: registry.WriteOptions{FieldManager: "test"}})
			if err != nil {
				t.Fatalf("%s %s: %v", c.resource, body, err)
			}
			return out
		}
		if out := patch(`{"metadata":{"labels":{"a":"b"}}}`); out.GetGeneration() != 1 {
			t.Errorf("%s: a label: generation %d", c.resource, out.GetGeneration())
		}
		if out := patch(c.change); out.GetGeneration() != 2 {
			t.Errorf("%s: a spec change: generation %d", c.resource, out.GetGeneration())
		}
		other := obj.DeepCopy()
		other.SetName("other")
		if _, err := res.Update(ctx, "v1", "", "other", other, registry.WriteOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: an update of an object that does not exist: %v", c.resource, err)
		}
		again := obj.DeepCopy()
		again.SetResourceVersion("")
		if _, err := res.Update(ctx, "v1", "", obj.GetName(), again, registry.WriteOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("%s: an update without a resourceVersion: %v", c.resource, err)
		}
	}
}
