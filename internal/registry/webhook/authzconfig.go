package webhook

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/registry/crd/cel"
)

// AuthorizerConfig is one authorizer of an AuthorizationConfiguration
// (--authorization-config), in its order.
type AuthorizerConfig struct {
	// Type is Webhook, RBAC, AlwaysAllow or AlwaysDeny (Node and ABAC
	// are refused: kplane has neither).
	Type string
	// Name is the authorizer's: upstream's for the types but Webhook
	// (rbac, alwaysallow, ...), the file's for a webhook.
	Name string
	// Webhook is a webhook's configuration.
	Webhook *AuthorizationWebhookConfig
}

// SameAuthorizers reports whether a and b configure the same
// authorizers: a file whose bytes changed but whose configuration did
// not (a comment) is not made again.
func SameAuthorizers(a, b []AuthorizerConfig) bool {
	key := func(cs []AuthorizerConfig) string {
		type view struct {
			Type, Name string
			Webhook    *AuthorizationWebhookConfig
			Conditions []string
		}
		var vs []view
		for _, c := range cs {
			v := view{Type: c.Type, Name: c.Name}
			if c.Webhook != nil {
				w := *c.Webhook
				for _, m := range w.MatchConditions {
					v.Conditions = append(v.Conditions, m.Expression)
				}
				w.MatchConditions, w.Logger = nil, nil
				v.Webhook = &w
			}
			vs = append(vs, v)
		}
		data, _ := json.Marshal(vs)
		return string(data)
	}
	return key(a) == key(b)
}

// authorizationConfiguration is apiserver.config.k8s.io's
// AuthorizationConfiguration (v1; v1beta1 and v1alpha1 read the same).
type authorizationConfiguration struct {
	APIVersion  string `json:"apiVersion"`
	Kind        string `json:"kind"`
	Authorizers []struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		Webhook *struct {
			AuthorizedTTL                            metav1.Duration `json:"authorizedTTL"`
			CacheAuthorizedRequests                  *bool           `json:"cacheAuthorizedRequests"`
			UnauthorizedTTL                          metav1.Duration `json:"unauthorizedTTL"`
			CacheUnauthorizedRequests                *bool           `json:"cacheUnauthorizedRequests"`
			Timeout                                  metav1.Duration `json:"timeout"`
			SubjectAccessReviewVersion               string          `json:"subjectAccessReviewVersion"`
			MatchConditionSubjectAccessReviewVersion string          `json:"matchConditionSubjectAccessReviewVersion"`
			FailurePolicy                            string          `json:"failurePolicy"`
			ConnectionInfo                           struct {
				Type           string  `json:"type"`
				KubeConfigFile *string `json:"kubeConfigFile"`
			} `json:"connectionInfo"`
			MatchConditions []struct {
				Expression string `json:"expression"`
			} `json:"matchConditions"`
		} `json:"webhook"`
	} `json:"authorizers"`
}

// authorizerTypes are the types upstream knows, in its order (its
// NotSupported error lists them sorted).
var authorizerTypes = []string{"ABAC", "AlwaysAllow", "AlwaysDeny", "Node", "RBAC", "Webhook"}

// ReadAuthorizationConfig reads the AuthorizationConfiguration at path,
// strictly, defaulted and checked as kube-apiserver v1.37 reads its
// --authorization-config, with its errors: the webhooks' fields, their
// kubeconfigs (absolute paths to regular files) and their
// matchConditions (compiled); a type other than Webhook named as
// upstream names it (rbac, alwaysallow, alwaysdeny); each type but
// Webhook once. Node and ABAC, which kplane does not have, are refused.
// The webhooks' kubeconfigs are read when the authorizers are built.
func ReadAuthorizationConfig(path string) ([]AuthorizerConfig, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	entries, err := ParseAuthorizationConfig(data)
	return entries, data, err
}

// ParseAuthorizationConfig is ReadAuthorizationConfig of a file's bytes.
func ParseAuthorizationConfig(data []byte) ([]AuthorizerConfig, error) {
	// An empty file is the default configuration, which has no
	// authorizers (refused below).
	var c authorizationConfiguration
	if len(data) > 0 {
		var typ struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(data, &typ); err != nil {
			return nil, fmt.Errorf("failed to load AuthorizationConfiguration from file: %s", strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "))
		}
		switch {
		case typ.Kind == "":
			return nil, fmt.Errorf("failed to load AuthorizationConfiguration from file: Object 'Kind' is missing in '%s'", data)
		case typ.Kind != "AuthorizationConfiguration" || !slices.Contains([]string{"apiserver.config.k8s.io/v1", "apiserver.config.k8s.io/v1beta1", "apiserver.config.k8s.io/v1alpha1"}, typ.APIVersion):
			return nil, fmt.Errorf("failed to load AuthorizationConfiguration from file: no kind %q is registered for version %q in scheme \"pkg/runtime/scheme.go:111\"", typ.Kind, typ.APIVersion)
		}
		if err := strictConfig(data, &c); err != nil {
			return nil, fmt.Errorf("failed to load AuthorizationConfiguration from file: %w", err)
		}
	}

	var errs field.ErrorList
	var out []AuthorizerConfig
	if len(c.Authorizers) == 0 {
		errs = append(errs, field.Required(field.NewPath("authorizers"), "at least one authorization mode must be defined"))
	}
	seenTypes, seenNames := map[string]bool{}, map[string]bool{}
	for i, a := range c.Authorizers {
		p := field.NewPath("authorizers").Index(i)
		switch {
		case a.Type == "":
			errs = append(errs, field.Required(p.Child("type"), ""))
			continue
		case !slices.Contains(authorizerTypes, a.Type):
			errs = append(errs, field.NotSupported(p.Child("type"), a.Type, authorizerTypes))
			continue
		case seenTypes[a.Type] && a.Type != "Webhook":
			errs = append(errs, field.Duplicate(p.Child("type"), a.Type))
			continue
		}
		seenTypes[a.Type] = true
		switch {
		case a.Name == "":
			errs = append(errs, field.Required(p.Child("name"), ""))
		case seenNames[a.Name]:
			errs = append(errs, field.Duplicate(p.Child("name"), a.Name))
		default:
			if msgs := validation.IsDNS1123Subdomain(a.Name); len(msgs) > 0 {
				errs = append(errs, field.Invalid(p.Child("name"), a.Name, "authorizer name is invalid: "+strings.Join(msgs, ", ")))
			}
		}
		seenNames[a.Name] = true
		entry := AuthorizerConfig{Type: a.Type, Name: a.Name}
		if a.Type != "Webhook" {
			if a.Webhook != nil {
				errs = append(errs, field.Invalid(p.Child("webhook"), "non-null", "may only be specified when type=Webhook"))
			}
			out = append(out, entry)
			continue
		}
		w := a.Webhook
		if w == nil {
			errs = append(errs, field.Required(p.Child("webhook"), "required when type=Webhook"))
			continue
		}
		// Upstream's defaults.
		if w.AuthorizedTTL.Duration == 0 {
			w.AuthorizedTTL.Duration = 5 * time.Minute
		}
		if w.UnauthorizedTTL.Duration == 0 {
			w.UnauthorizedTTL.Duration = 30 * time.Second
		}
		switch {
		case w.Timeout.Duration == 0:
			errs = append(errs, field.Required(p.Child("timeout"), ""))
		case w.Timeout.Duration > 30*time.Second || w.Timeout.Duration < 0:
			errs = append(errs, field.Invalid(p.Child("timeout"), w.Timeout.Duration.String(), "must be > 0s and <= 30s"))
		}
		if w.AuthorizedTTL.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child("authorizedTTL"), w.AuthorizedTTL.Duration.String(), "must be > 0s"))
		}
		if w.UnauthorizedTTL.Duration < 0 {
			errs = append(errs, field.Invalid(p.Child("unauthorizedTTL"), w.UnauthorizedTTL.Duration.String(), "must be > 0s"))
		}
		switch w.SubjectAccessReviewVersion {
		case "":
			errs = append(errs, field.Required(p.Child("subjectAccessReviewVersion"), ""))
		case "v1", "v1beta1":
		default:
			errs = append(errs, field.NotSupported(p.Child("subjectAccessReviewVersion"), w.SubjectAccessReviewVersion, []string{"v1", "v1beta1"}))
		}
		switch w.MatchConditionSubjectAccessReviewVersion {
		case "":
			if len(w.MatchConditions) > 0 {
				errs = append(errs, field.Required(p.Child("matchConditionSubjectAccessReviewVersion"), "required if match conditions are specified"))
			}
		case "v1":
		default:
			errs = append(errs, field.NotSupported(p.Child("matchConditionSubjectAccessReviewVersion"), w.MatchConditionSubjectAccessReviewVersion, []string{"v1"}))
		}
		switch w.FailurePolicy {
		case "":
			errs = append(errs, field.Required(p.Child("failurePolicy"), ""))
		case "NoOpinion", "Deny":
		default:
			errs = append(errs, field.NotSupported(p.Child("failurePolicy"), w.FailurePolicy, []string{"NoOpinion", "Deny"}))
		}
		kubeconfig := ""
		switch ci := w.ConnectionInfo; ci.Type {
		case "":
			errs = append(errs, field.Required(p.Child("connectionInfo", "type"), ""))
		case "InClusterConfig":
			if ci.KubeConfigFile != nil {
				errs = append(errs, field.Invalid(p.Child("connectionInfo", "kubeConfigFile"), *ci.KubeConfigFile, "can only be set when type=KubeConfigFile"))
				break
			}
			// kplane is the cluster: there is no in-cluster service account
			// to call a webhook with.
			errs = append(errs, field.Invalid(p.Child("connectionInfo", "type"), ci.Type, "kplane has no in-cluster configuration: use type=KubeConfigFile"))
		case "KubeConfigFile":
			switch {
			case ci.KubeConfigFile == nil || *ci.KubeConfigFile == "":
				errs = append(errs, field.Required(p.Child("connectionInfo", "kubeConfigFile"), ""))
			case !filepath.IsAbs(*ci.KubeConfigFile):
				errs = append(errs, field.Invalid(p.Child("connectionInfo", "kubeConfigFile"), *ci.KubeConfigFile, "must be an absolute path"))
			default:
				if info, err := os.Stat(*ci.KubeConfigFile); err != nil {
					errs = append(errs, field.Invalid(p.Child("connectionInfo", "kubeConfigFile"), *ci.KubeConfigFile, fmt.Sprintf("error loading file: %v", err)))
				} else if !info.Mode().IsRegular() {
					errs = append(errs, field.Invalid(p.Child("connectionInfo", "kubeConfigFile"), *ci.KubeConfigFile, "must be a regular file"))
				} else {
					kubeconfig = *ci.KubeConfigFile
				}
			}
		default:
			// Shown as upstream's internal type shows.
			shown := struct {
				Type           string
				KubeConfigFile *string
			}{ci.Type, ci.KubeConfigFile}
			errs = append(errs, field.NotSupported(p.Child("connectionInfo", "type"), shown, []string{"InClusterConfig", "KubeConfigFile"}))
		}
		conditions, condErrs := compileAuthorizationMatchConditions(p, w.MatchConditions)
		errs = append(errs, condErrs...)
		cfg := &AuthorizationWebhookConfig{
			KubeConfigFile: kubeconfig, Version: w.SubjectAccessReviewVersion, Timeout: w.Timeout.Duration,
			AuthorizedTTL: w.AuthorizedTTL.Duration, UnauthorizedTTL: w.UnauthorizedTTL.Duration,
			FailurePolicyDeny: w.FailurePolicy == "Deny", MatchConditions: conditions, Name: a.Name,
		}
		if w.CacheAuthorizedRequests != nil && !*w.CacheAuthorizedRequests {
			cfg.AuthorizedTTL = 0
		}
		if w.CacheUnauthorizedRequests != nil && !*w.CacheUnauthorizedRequests {
			cfg.UnauthorizedTTL = 0
		}
		entry.Webhook = cfg
		out = append(out, entry)
	}
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	// As kube-apiserver, a type but Webhook has its mode's name, and
	// kplane has no Node or ABAC authorizer.
	var more []error
	for _, a := range out {
		switch {
		case a.Type == "Webhook":
		case a.Type == "Node" || a.Type == "ABAC":
			more = append(more, fmt.Errorf("authorizer type %s is not one kplane has: it has AlwaysAllow, AlwaysDeny, RBAC and Webhook", a.Type))
		case a.Name != strings.ToLower(a.Type):
			more = append(more, fmt.Errorf("expected name %s for authorizer %s instead of %s", strings.ToLower(a.Type), a.Type, a.Name))
		}
	}
	if len(more) > 0 {
		return nil, utilerrors.NewAggregate(more)
	}
	return out, nil
}

// strictConfig decodes a YAML or JSON configuration file into v as
// upstream's strict decoder does: fields it does not know are an error
// naming their paths.
func strictConfig(data []byte, v any) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return err
	}
	strict, err := sigsjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return errors.New("strict decoding error: " + strings.Join(msgs, ", "))
	}
	return nil
}

// compileAuthorizationMatchConditions compiles a webhook's
// matchConditions, with upstream's errors at their fields.
func compileAuthorizationMatchConditions(p *field.Path, conditions []struct {
	Expression string `json:"expression"`
}) ([]*cel.AuthorizationMatchCondition, field.ErrorList) {
	if len(conditions) > 64 {
		return nil, field.ErrorList{field.TooMany(p.Child("matchConditions"), len(conditions), 64)}
	}
	var errs field.ErrorList
	var out []*cel.AuthorizationMatchCondition
	seen := map[string]bool{}
	for i, c := range conditions {
		fp := p.Child("matchConditions").Index(i).Child("expression")
		switch {
		case strings.TrimSpace(c.Expression) == "":
			errs = append(errs, field.Required(fp, ""))
			continue
		case seen[c.Expression]:
			errs = append(errs, field.Duplicate(fp, c.Expression))
			continue
		}
		seen[c.Expression] = true
		compiled, err := cel.CompileAuthorizationMatchCondition(c.Expression)
		if err != nil {
			errs = append(errs, field.Invalid(fp, c.Expression, err.Error()))
			continue
		}
		out = append(out, compiled)
	}
	return out, errs
}
