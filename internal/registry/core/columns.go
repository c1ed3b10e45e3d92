package core

import (
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The built-in kinds' Table columns, as kube-apiserver v1.37's printers
// have them (pkg/printers/internalversion): the same names, types,
// priorities, descriptions (the API types' documentation) and cells, so
// that kubectl get prints the same table. Kinds without a printer there
// (Roles, ClusterRoles) get its default table: NAME and CREATED AT.

var (
	namespaceColumns = []registry.Column{
		{Name: "Status", Type: "string", Description: "The status of the namespace", Value: str("status", "phase"), Reads: []string{"status"}},
		registry.AgeColumn,
	}
	configMapColumns = []registry.Column{
		{Name: "Data", Type: "string", Description: corev1.ConfigMap{}.SwaggerDoc()["data"], Value: dataCount, Reads: dataMembers, Counts: dataMembers},
		registry.AgeColumn,
	}
	secretColumns = []registry.Column{
		{Name: "Type", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["type"], Value: str("type"), Reads: []string{"type"}},
		{Name: "Data", Type: "string", Description: corev1.Secret{}.SwaggerDoc()["data"], Value: dataCount, Reads: dataMembers, Counts: dataMembers},
		registry.AgeColumn,
	}
	serviceAccountColumns = []registry.Column{registry.AgeColumn}
	leaseColumns          = []registry.Column{
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"], Value: str("spec", "holderIdentity"), Reads: []string{"spec"}},
		registry.AgeColumn,
	}
	roleColumns = []registry.Column{registry.CreatedColumn}
)

// eventColumns are upstream's, wide: a series' last observation and count
// before the event's own, the first timestamp before eventTime, and the
// name last.
func eventColumns() []registry.Column {
	doc := corev1.Event{}.SwaggerDoc()
	name := registry.NameColumn
	name.Priority = 1
	return []registry.Column{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"], Value: eventLastSeen,
			Reads: []string{"lastTimestamp", "firstTimestamp", "eventTime", "series"}},
		{Name: "Type", Type: "string", Description: doc["type"], Value: str("type"), Reads: []string{"type"}},
		{Name: "Reason", Type: "string", Description: doc["reason"], Value: str("reason"), Reads: []string{"reason"}},
		{Name: "Object", Type: "string", Description: doc["involvedObject"], Value: eventObject, Reads: []string{"involvedObject"}},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"],
			Value: str("involvedObject", "fieldPath"), Reads: []string{"involvedObject"}},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"], Value: eventSource,
			Reads: []string{"source", "reportingComponent", "reportingInstance"}},
		{Name: "Message", Type: "string", Description: doc["message"], Reads: []string{"message"}, Value: func(o *unstructured.Unstructured) any {
			m, _ := o.Object["message"].(string)
			return strings.TrimSpace(m)
		}},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"], Value: eventFirstSeen,
			Reads: []string{"firstTimestamp", "eventTime"}},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"], Value: eventCount, Reads: []string{"count", "series"}},
		name,
	}
}

func eventFirstSeen(o *unstructured.Unstructured) any {
	if t := timestamp(o.Object["firstTimestamp"]); !t.IsZero() {
		return since(t)
	}
	return since(timestamp(o.Object["eventTime"]))
}

func eventLastSeen(o *unstructured.Unstructured) any {
	if series, ok := o.Object["series"].(map[string]any); ok {
		return since(timestamp(series["lastObservedTime"]))
	}
	if t := timestamp(o.Object["lastTimestamp"]); !t.IsZero() {
		return since(t)
	}
	return eventFirstSeen(o)
}

// eventCount is the series' count, else the event's, else 1: a singleton
// event of the new API sets none.
func eventCount(o *unstructured.Unstructured) any {
	if series, ok := o.Object["series"].(map[string]any); ok {
		n, _ := series["count"].(int64)
		return n
	}
	if n, _ := o.Object["count"].(int64); n != 0 {
		return n
	}
	return int64(1)
}

func eventObject(o *unstructured.Unstructured) any {
	ref, _ := o.Object["involvedObject"].(map[string]any)
	kind, _ := ref["kind"].(string)
	name, _ := ref["name"].(string)
	if name == "" {
		return strings.ToLower(kind)
	}
	return fmt.Sprintf("%s/%s", strings.ToLower(kind), name)
}

// eventSource is the source's component and host, or the reporting
// controller and instance where they are empty: "component, host".
func eventSource(o *unstructured.Unstructured) any {
	src, _ := o.Object["source"].(map[string]any)
	first := func(a any, b any) string {
		if s, _ := a.(string); s != "" {
			return s
		}
		s, _ := b.(string)
		return s
	}
	component := first(src["component"], o.Object["reportingComponent"])
	if host := first(src["host"], o.Object["reportingInstance"]); host != "" {
		return component + ", " + host
	}
	return component
}

// timestamp reads an RFC 3339 time (a metav1.Time or MicroTime); zero if
// there is none.
func timestamp(v any) time.Time {
	s, _ := v.(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// since is upstream's translateTimestampSince.
func since(t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(time.Since(t))
}

// bindingColumns are a RoleBinding's or ClusterRoleBinding's: the role,
// and, wide, its subjects by kind.
func bindingColumns(kind string) []registry.Column {
	// Upstream's printer describes the role with v1beta1's documentation.
	doc := rbacv1beta1.RoleBinding{}.SwaggerDoc()["roleRef"]
	if kind == "ClusterRoleBinding" {
		doc = rbacv1beta1.ClusterRoleBinding{}.SwaggerDoc()["roleRef"]
	}
	of := "the " + strings.ToLower(kind[:1]) + kind[1:]
	return []registry.Column{
		{Name: "Role", Type: "string", Description: doc, Reads: []string{"roleRef"}, Value: func(o *unstructured.Unstructured) any {
			ref, _ := o.Object["roleRef"].(map[string]any)
			k, _ := ref["kind"].(string)
			n, _ := ref["name"].(string)
			return k + "/" + n
		}},
		registry.AgeColumn,
		{Name: "Users", Type: "string", Priority: 1, Description: "Users in " + of, Reads: []string{"subjects"}, Value: subjects(rbacv1.UserKind)},
		{Name: "Groups", Type: "string", Priority: 1, Description: "Groups in " + of, Reads: []string{"subjects"}, Value: subjects(rbacv1.GroupKind)},
		{Name: "ServiceAccounts", Type: "string", Priority: 1, Description: "ServiceAccounts in " + of, Reads: []string{"subjects"}, Value: subjects(rbacv1.ServiceAccountKind)},
	}
}

// subjects lists a binding's subjects of one kind, comma-separated (a
// service account as namespace/name).
func subjects(kind string) func(*unstructured.Unstructured) any {
	return func(o *unstructured.Unstructured) any {
		list, _ := o.Object["subjects"].([]any)
		var names []string
		for _, s := range list {
			s, _ := s.(map[string]any)
			if k, _ := s["kind"].(string); k != kind {
				continue
			}
			name, _ := s["name"].(string)
			if kind == rbacv1.ServiceAccountKind {
				ns, _ := s["namespace"].(string)
				name = ns + "/" + name
			}
			names = append(names, name)
		}
		return strings.Join(names, ", ")
	}
}
