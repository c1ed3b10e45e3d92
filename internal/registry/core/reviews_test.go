package core_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
	"github.com/kplane-dev/kplane/internal/registry/core"
	"github.com/kplane-dev/kplane/internal/storage"
)

// asking answers what answer says and keeps the last question.
type asking struct {
	last   registry.Attributes
	answer func(registry.Attributes) (registry.Decision, string, error)
}

// RulesFor cannot list, as a webhook's.
func (a *asking) RulesFor(context.Context, registry.User, string) ([]rbacv1.PolicyRule, bool, error) {
	return nil, true, errors.New("cannot list rules")
}

func (a *asking) Authorize(_ context.Context, attrs registry.Attributes) (registry.Decision, string, error) {
	a.last = attrs
	return a.answer(attrs)
}

// An access review answers by kplane's authorizer: its decision (denied
// too), reason and error. The question is the review's: an empty version
// is every version, and its selectors are taken from rawSelector or
// requirements, those that are not valid left out and said so in the
// evaluation error, in upstream's words. A rules review of an authorizer
// that cannot list rules is incomplete.
func TestAccessReviewsAskTheAuthorizer(t *testing.T) {
	authz := &asking{}
	reg := registry.New(registry.Config{Store: storage.New(memoryStore(t))})
	kinds := core.InstallAuthorizer(core.Kinds(), registry.Union{{Name: "default", Authorizer: authz}})
	registry.SetTypeConverters(kinds...)
	for _, k := range kinds {
		if err := reg.Add(k); err != nil {
			t.Fatal(err)
		}
	}
	ctx := registry.WithUser(context.Background(), registry.User{Name: "admin", Groups: []string{"system:masters"}})
	sars, _ := reg.Get(schema.GroupResource{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"})
	review := func(t *testing.T, resourceAttributes string) map[string]any {
		t.Helper()
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON([]byte(`{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"bob","resourceAttributes":` + resourceAttributes + `}}`)); err != nil {
			t.Fatal(err)
		}
		out, err := sars.Create(ctx, "v1", "", obj, registry.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		status, _ := out.Object["status"].(map[string]any)
		return status
	}
	down := errors.New("webhook down")
	for _, c := range []struct {
		decision  registry.Decision
		reason    string
		err       error
		attrs     string
		status    string
		selectors string // the question's, as JSON
	}{
		{registry.Allow, "ok", nil, `{"verb":"get","resource":"pods"}`, `{"allowed":true,"reason":"ok"}`, `null null`},
		{registry.Deny, "no", nil, `{"verb":"get","resource":"pods"}`, `{"allowed":false,"denied":true,"reason":"no"}`, `null null`},
		{registry.NoOpinion, "dunno", down, `{"verb":"get","resource":"pods"}`, `{"allowed":false,"evaluationError":"webhook down","reason":"default: dunno"}`, `null null`},
		{registry.NoOpinion, "", nil, `{"verb":"list","resource":"pods","labelSelector":{"rawSelector":"a=b,c notin (d)"},"fieldSelector":{"rawSelector":"spec.nodeName=n"}}`,
			`{"allowed":false}`,
			`[{"key":"spec.nodeName","operator":"In","values":["n"]}] [{"key":"a","operator":"In","values":["b"]},{"key":"c","operator":"NotIn","values":["d"]}]`},
		{registry.NoOpinion, "", nil, `{"verb":"list","resource":"pods","labelSelector":{"rawSelector":"a in ("},"fieldSelector":{"rawSelector":"x"}}`,
			`{"allowed":false,"evaluationError":"spec.resourceAttributes.fieldSelector ignored due to parse error; spec.resourceAttributes.labelSelector ignored due to parse error"}`, `null null`},
		{registry.NoOpinion, "", down, `{"verb":"list","resource":"pods",` +
			`"labelSelector":{"requirements":[{"key":"a","operator":"Exists"},{"key":"b","operator":"Gt","values":["1"]}]},` +
			`"fieldSelector":{"requirements":[{"key":"spec.nodeName","operator":"NotIn","values":["n"]},{"key":"x","operator":"Exists"},{"key":"y","operator":"In","values":["1","2"]}]}}`,
			`{"allowed":false,"evaluationError":"webhook down; spec.resourceAttributes.fieldSelector partially ignored due to parse error; spec.resourceAttributes.labelSelector partially ignored due to parse error"}`,
			`[{"key":"spec.nodeName","operator":"NotIn","values":["n"]}] [{"key":"a","operator":"Exists"}]`},
	} {
		authz.answer = func(registry.Attributes) (registry.Decision, string, error) { return c.decision, c.reason, c.err }
		status := review(t, c.attrs)
		got, _ := json.Marshal(status)
		field, _ := json.Marshal(authz.last.FieldSelector)
		label, _ := json.Marshal(authz.last.LabelSelector)
		if string(got) != c.status || string(field)+" "+string(label) != c.selectors || authz.last.APIVersion != "*" || authz.last.User.Name != "bob" {
			t.Errorf("%s: status %s, asked %s %s version %q, want %s, %s", c.attrs, got, field, label, authz.last.APIVersion, c.status, c.selectors)
		}
	}

	rules, _ := reg.Get(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"})
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": map[string]any{"namespace": "dev"}}}
	out, err := rules.Create(registry.WithUser(context.Background(), registry.User{Name: "bob"}), "v1", "", obj, registry.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(out.Object["status"]); string(got) != `{"evaluationError":"cannot list rules","incomplete":true,"nonResourceRules":[],"resourceRules":[]}` {
		t.Errorf("rules review of an authorizer without rules: %s", got)
	}
}
