package core

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kplane-dev/kplane/internal/registry"
)

// eventsV1 is events.k8s.io/v1 Event, served over the core Events of host
// as upstream serves it: one resource in storage, stored as core/v1
// Events, so that an event written through either API is read through
// both (client-go's tools/events and controller-runtime's
// GetEventRecorder write this one; kubectl reads the core one). It links
// the two kinds.
func eventsV1(host *registry.Kind) *registry.Kind {
	guest := &registry.Kind{
		Group: "events.k8s.io", Versions: []string{"v1"}, Kind: "Event", ListKind: "EventList", Resource: "events", Singular: "event",
		ShortNames: []string{"ev"}, Namespaced: true, UnconditionalUpdate: true, CreateOnUpdate: true,
		Typed: func() runtime.Object { return &eventsv1.Event{} },
		ValidateFirst: func(obj *unstructured.Unstructured) field.ErrorList {
			return legacyEventErrors(obj, "reportingController")
		},
		Validate:       validateEventV1,
		ValidateUpdate: validateEventV1Update,
		Fields:         eventV1Fields,
		Columns:        eventV1Columns(host.Columns),
	}
	c := &registry.Cohabit{Host: host, Guest: guest, ToHost: eventToCore, ToGuest: eventToV1}
	host.Cohabit, guest.Cohabit = c, c
	return guest
}

// eventRenames pairs the top-level members that events.k8s.io/v1 names
// otherwise than core/v1 (v1 first). The rest are the same in both.
var eventRenames = [...][2]string{
	{"regarding", "involvedObject"},
	{"note", "message"},
	{"reportingController", "reportingComponent"},
	{"deprecatedSource", "source"},
	{"deprecatedFirstTimestamp", "firstTimestamp"},
	{"deprecatedLastTimestamp", "lastTimestamp"},
	{"deprecatedCount", "count"},
}

// coreNames and v1Names map a member of one shape to the other's name.
var coreNames, v1Names = func() (toCore, toV1 map[string]string) {
	toCore, toV1 = map[string]string{}, map[string]string{}
	for _, r := range eventRenames {
		toCore[r[0]], toV1[r[1]] = r[1], r[0]
	}
	return toCore, toV1
}()

// renamed is obj's top-level members under names (others as they are),
// sharing their values.
func renamed(obj map[string]any, names map[string]string) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if n, ok := names[k]; ok {
			k = n
		}
		out[k] = v
	}
	return out
}

// eventToCore and eventToV1 convert an Event between the two APIs, as
// upstream's conversions do: the members renamed, and the result shaped
// by the target's Go type (its empty members as that type writes them,
// such as a v1 Event's "deprecatedSource": {}), so that objects read the
// same as upstream's.
func eventToCore(obj *unstructured.Unstructured) *unstructured.Unstructured {
	return convertEvent(obj.Object, coreNames, "v1", &corev1.Event{})
}

func eventToV1(obj *unstructured.Unstructured) *unstructured.Unstructured {
	return convertEvent(obj.Object, v1Names, "events.k8s.io/v1", &eventsv1.Event{})
}

func convertEvent(obj map[string]any, names map[string]string, apiVersion string, typed runtime.Object) *unstructured.Unstructured {
	m := renamed(obj, names)
	m["apiVersion"] = apiVersion
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, typed); err == nil {
		if out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed); err == nil {
			out["apiVersion"], out["kind"] = apiVersion, "Event"
			return &unstructured.Unstructured{Object: out}
		}
	}
	// Members the Go type cannot take (stored by other means): renamed
	// alone.
	return &unstructured.Unstructured{Object: runtime.DeepCopyJSON(m)}
}

// eventV1Fields are the fields of events.k8s.io/v1's field selectors (a
// stored, core-shaped, Event's), as upstream's field label conversion
// takes them: the regarding object's, reason, reportingController and
// type.
func eventV1Fields(obj *unstructured.Unstructured) fields.Set {
	core := eventFields(obj)
	set := fields.Set{
		"reason":              core["reason"],
		"reportingController": core["reportingComponent"],
		"type":                core["type"],
	}
	for _, f := range []string{"kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"} {
		set["regarding."+f] = core["involvedObject."+f]
	}
	return set
}

// eventV1Columns are the core Event's columns, upstream's printer for
// both APIs, over events.k8s.io/v1 Events: each cell reads the object
// with its members under their core names.
func eventV1Columns(host []registry.Column) []registry.Column {
	out := make([]registry.Column, len(host))
	for i, c := range host {
		if c.Value != nil {
			value := c.Value
			c.Value = func(o *unstructured.Unstructured) any {
				return value(&unstructured.Unstructured{Object: renamed(o.Object, coreNames)})
			}
			reads := make([]string, len(c.Reads))
			for j, m := range c.Reads {
				if n, ok := v1Names[m]; ok {
					m = n
				}
				reads[j] = m
			}
			c.Reads = reads
		}
		out[i] = c
	}
	return out
}

// validateEventV1 checks a create through events.k8s.io/v1 (obj as
// stored, core-shaped) as upstream's does after the legacy checks (the
// kind's ValidateFirst) and the metadata's: the new API's strict checks,
// which name core/v1's fields.
func validateEventV1(obj *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	var ev corev1.Event
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &ev); err != nil {
		return append(errs, field.InternalError(nil, err))
	}
	errs = append(errs, eventSeriesErrors(ev.Series)...)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", "has invalid value: "+ev.Type))
	}
	unset := func(name string, set bool) {
		if set {
			errs = append(errs, field.Invalid(field.NewPath(name), "", "needs to be unset"))
		}
	}
	unset("firstTimestamp", !ev.FirstTimestamp.IsZero())
	unset("lastTimestamp", !ev.LastTimestamp.IsZero())
	unset("count", ev.Count != 0)
	unset("source", ev.Source.Component != "" || ev.Source.Host != "")
	return errs
}

// eventSeriesErrors check a new-API event's series.
func eventSeriesErrors(s *corev1.EventSeries) field.ErrorList {
	var errs field.ErrorList
	if s == nil {
		return nil
	}
	if s.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if s.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return errs
}

// validateEventV1Update checks an update through events.k8s.io/v1 as
// upstream's does after the legacy and metadata checks: a changed
// series, and every field but the series and metadata immutable.
// Immutable values are shown as upstream shows its internal types' (JSON
// with Go field names).
func validateEventV1Update(obj, old *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	var ev, was corev1.Event
	for _, d := range []struct {
		from map[string]any
		to   *corev1.Event
	}{{obj.Object, &ev}, {old.Object, &was}} {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.from, d.to); err != nil {
			return append(errs, field.InternalError(nil, err))
		}
	}
	if !apiequality.Semantic.DeepEqual(ev.Series, was.Series) {
		errs = append(errs, eventSeriesErrors(ev.Series)...)
	}
	immutable := func(name string, now, before, shown any) {
		if !apiequality.Semantic.DeepEqual(now, before) {
			errs = append(errs, field.Invalid(field.NewPath(name), shown, "field is immutable"))
		}
	}
	immutable("involvedObject", ev.InvolvedObject, was.InvolvedObject, internalReference(&ev.InvolvedObject))
	immutable("reason", ev.Reason, was.Reason, ev.Reason)
	immutable("message", ev.Message, was.Message, ev.Message)
	immutable("source", ev.Source, was.Source, internalSource(ev.Source))
	immutable("firstTimestamp", ev.FirstTimestamp, was.FirstTimestamp, ev.FirstTimestamp)
	immutable("lastTimestamp", ev.LastTimestamp, was.LastTimestamp, ev.LastTimestamp)
	immutable("count", ev.Count, was.Count, ev.Count)
	immutable("type", ev.Type, was.Type, ev.Type)
	immutable("eventTime", ev.EventTime, was.EventTime, ev.EventTime)
	immutable("action", ev.Action, was.Action, ev.Action)
	var related any = json.RawMessage("null")
	if ev.Related != nil {
		related = internalReference(ev.Related)
	}
	immutable("related", ev.Related, was.Related, related)
	immutable("reportingController", ev.ReportingController, was.ReportingController, ev.ReportingController)
	immutable("reportingInstance", ev.ReportingInstance, was.ReportingInstance, ev.ReportingInstance)
	return errs
}

// internalRef and internalEventSource have the fields of upstream's
// internal ObjectReference and EventSource, in their order and without
// JSON names: an error's value is shown as their JSON.
type internalRef struct {
	Kind, Namespace, Name string
	UID                   types.UID
	APIVersion            string
	ResourceVersion       string
	FieldPath             string
}

type internalEventSource struct{ Component, Host string }

func internalReference(r *corev1.ObjectReference) internalRef {
	return internalRef{r.Kind, r.Namespace, r.Name, r.UID, r.APIVersion, r.ResourceVersion, r.FieldPath}
}

func internalSource(s corev1.EventSource) internalEventSource {
	return internalEventSource{s.Component, s.Host}
}
