package flowcontrol

import (
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"

	"github.com/kplane-dev/kplane/internal/registry"
)

// schema is a FlowSchema as the classifier uses it.
type schema struct {
	name, uid  string
	precedence int32
	level      string // its PriorityLevelConfiguration's name
	// distinguisher is how its flows are told apart: ByUser, ByNamespace
	// or "" (one flow).
	distinguisher flowcontrolv1.FlowDistinguisherMethodType
	rules         []flowcontrolv1.PolicyRulesWithSubjects
}

// before orders schemas for matching: lowest matchingPrecedence first,
// then by name, as upstream.
func before(a, b *schema) int {
	if a.precedence != b.precedence {
		if a.precedence < b.precedence {
			return -1
		}
		return 1
	}
	return strings.Compare(a.name, b.name)
}

// matches reports whether one of s's rules takes request a: one of its
// subjects names a's user, and one of its resource rules (for a resource
// request) or non-resource rules (for the others) covers what a asks.
func (s *schema) matches(a *registry.Attributes) bool {
	for i := range s.rules {
		r := &s.rules[i]
		if !slices.ContainsFunc(r.Subjects, func(sub flowcontrolv1.Subject) bool { return subjectNames(sub, a.User) }) {
			continue
		}
		if a.ResourceRequest {
			if slices.ContainsFunc(r.ResourceRules, func(rule flowcontrolv1.ResourcePolicyRule) bool { return resourceRuleCovers(rule, a) }) {
				return true
			}
		} else if slices.ContainsFunc(r.NonResourceRules, func(rule flowcontrolv1.NonResourcePolicyRule) bool {
			return listHas(rule.Verbs, a.Verb, flowcontrolv1.VerbAll) && pathCovered(rule.NonResourceURLs, a.Path)
		}) {
			return true
		}
	}
	return false
}

// subjectNames reports whether sub names u: a user by name, a group u is
// in, or a service account (a name of "*" for each of the namespace's).
// "*" names every user or group.
func subjectNames(sub flowcontrolv1.Subject, u registry.User) bool {
	switch sub.Kind {
	case flowcontrolv1.SubjectKindUser:
		return sub.User != nil && (sub.User.Name == flowcontrolv1.NameAll || sub.User.Name == u.Name)
	case flowcontrolv1.SubjectKindGroup:
		return sub.Group != nil && (sub.Group.Name == flowcontrolv1.NameAll || slices.Contains(u.Groups, sub.Group.Name))
	case flowcontrolv1.SubjectKindServiceAccount:
		if sub.ServiceAccount == nil {
			return false
		}
		rest, ok := strings.CutPrefix(u.Name, "system:serviceaccount:"+sub.ServiceAccount.Namespace+":")
		return ok && (sub.ServiceAccount.Name == flowcontrolv1.NameAll || rest == sub.ServiceAccount.Name)
	}
	return false
}

// resourceRuleCovers reports whether rule covers resource request a. A
// request without a namespace (of a cluster-scoped resource, or across
// all namespaces) is covered only by a rule with clusterScope.
func resourceRuleCovers(rule flowcontrolv1.ResourcePolicyRule, a *registry.Attributes) bool {
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if !listHas(rule.Verbs, a.Verb, flowcontrolv1.VerbAll) || !listHas(rule.Resources, resource, flowcontrolv1.ResourceAll) ||
		!listHas(rule.APIGroups, a.APIGroup, flowcontrolv1.APIGroupAll) {
		return false
	}
	if a.Namespace == "" {
		return rule.ClusterScope
	}
	return listHas(rule.Namespaces, a.Namespace, flowcontrolv1.NamespaceEvery)
}

// listHas reports whether list holds x, or is the wildcard alone (as
// validation requires it to be).
func listHas(list []string, x, wildcard string) bool {
	return len(list) == 1 && list[0] == wildcard || slices.Contains(list, x)
}

// pathCovered reports whether one of the patterns covers path: "*"
// covers every path, and a pattern covers itself and every path under
// it ("/healthz" and "/healthz/*" both cover "/healthz/etcd").
func pathCovered(patterns []string, path string) bool {
	for _, p := range patterns {
		if p == flowcontrolv1.NonResourceAll || p == path {
			return true
		}
		prefix := strings.TrimSuffix(p, "*")
		if !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}
