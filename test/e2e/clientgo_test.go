package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

var fooGVR = schema.GroupVersionResource{Group: "webapp.my.domain", Version: "v1", Resource: "foos"}

func newFoo(name, value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "webapp.my.domain/v1", "kind": "Foo",
		"spec": map[string]any{"foo": value},
	}}
	u.SetName(name)
	return u
}

func TestClientGoTyped(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		cs := kubernetes.NewForConfigOrDie(s.config())
		cms := cs.CoreV1().ConfigMaps("default")
		cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Data: map[string]string{"k": "1"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.UID == "" || cm.CreationTimestamp.IsZero() || cm.ResourceVersion == "" {
			t.Fatalf("created object lacks system fields: %+v", cm.ObjectMeta)
		}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
			t.Fatalf("second create: %v, want AlreadyExists", err)
		}

		// An update with the current resourceVersion wins; replaying it is
		// a conflict; a no-op update keeps the resourceVersion.
		cm.Data["k"] = "2"
		upd, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if upd.ResourceVersion == cm.ResourceVersion {
			t.Fatal("update kept the resourceVersion")
		}
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); !apierrors.IsConflict(err) ||
			!strings.Contains(err.Error(), `Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again`) {
			t.Fatalf("stale update: %v", err)
		}
		same, err := cms.Update(ctx, upd, metav1.UpdateOptions{})
		if err != nil || same.ResourceVersion != upd.ResourceVersion {
			t.Fatalf("no-op update: %v, resourceVersion %s → %s", err, upd.ResourceVersion, same.ResourceVersion)
		}
		// ConfigMaps allow unconditional updates.
		upd.ResourceVersion = ""
		upd.Data["k"] = "3"
		if _, err := cms.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("unconditional update of a ConfigMap: %v", err)
		}

		// Invalid input is 422 with causes, and nothing is stored.
		_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "Bad_Name"}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "metadata.name") {
			t.Fatalf("invalid name: %v", err)
		}
		// A missing namespace is 404.
		_, err = cs.CoreV1().ConfigMaps("nope").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `namespaces "nope" not found`) {
			t.Fatalf("create in a missing namespace: %v", err)
		}

		// Lists: label selectors, field selectors, pages.
		for i := 0; i < 7; i++ {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("p", i),
				Labels: map[string]string{"tier": []string{"web", "db"}[i%2]}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}
		list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "tier in (db), !missing"})
		if err != nil || len(list.Items) != 3 {
			t.Fatalf("label selector: %v, %d items", err, len(list.Items))
		}
		list, err = cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=p4"})
		if err != nil || len(list.Items) != 1 || list.Items[0].Name != "p4" {
			t.Fatalf("field selector: %v, %+v", err, list.Items)
		}
		if _, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "spec.nope=1"}); !apierrors.IsBadRequest(err) {
			t.Fatalf("unsupported field selector: %v, want 400", err)
		}
		var names []string
		opts := metav1.ListOptions{Limit: 3, LabelSelector: "tier"}
		pages := 0
		var rv string
		for {
			page, err := cms.List(ctx, opts)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if rv == "" {
				rv = page.ResourceVersion
			} else if page.ResourceVersion != rv {
				t.Fatalf("page %d read at %s, the first at %s", pages, page.ResourceVersion, rv)
			}
			for _, it := range page.Items {
				names = append(names, it.Name)
			}
			if page.Continue == "" {
				break
			}
			opts.Continue = page.Continue
		}
		if pages != 3 || len(names) != 7 {
			t.Fatalf("paged list: %d pages, %v", pages, names)
		}

		// Secrets fold stringData into data.
		sec, err := cs.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"},
			StringData: map[string]string{"pw": "hunter2"}}, metav1.CreateOptions{})
		if err != nil || string(sec.Data["pw"]) != "hunter2" || sec.Type != corev1.SecretTypeOpaque {
			t.Fatalf("secret: %v %+v", err, sec)
		}
	})
}

func TestClientGoDynamic(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)
		dc := dynamic.NewForConfigOrDie(s.config())
		foos := dc.Resource(fooGVR).Namespace("default")
		foo, err := foos.Create(ctx, newFoo("f", "bar"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if foo.GetGeneration() != 1 {
			t.Fatalf("generation %d, want 1", foo.GetGeneration())
		}
		// Custom resources refuse updates without a resourceVersion, the
		// error naming the resource, as kube-apiserver's does.
		noRV := foo.DeepCopy()
		noRV.SetResourceVersion("")
		_, err = foos.Update(ctx, noRV, metav1.UpdateOptions{})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `foos.webapp.my.domain "f" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`) {
			t.Fatalf("update without resourceVersion: %v", err)
		}
		// Status: the main resource ignores it, /status changes only it
		// (on a kind whose status schema has fields: Foo's has none, so
		// its status fields would be pruned).
		installGadgetCRD(t, s)
		foos = dc.Resource(gadgetGVR).Namespace("default")
		foo, err = foos.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "e2e.kplane.dev/v1", "kind": "Gadget", "metadata": map[string]any{"name": "f"}, "spec": map[string]any{"foo": "bar"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		withStatus := foo.DeepCopy()
		unstructured.SetNestedField(withStatus.Object, "ignored", "status", "note")
		unstructured.SetNestedField(withStatus.Object, "baz", "spec", "foo")
		upd, err := foos.Update(ctx, withStatus, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, found, _ := unstructured.NestedFieldNoCopy(upd.Object, "status", "note"); found || upd.GetGeneration() != 2 {
			t.Fatalf("main resource update: status kept %v, generation %d", found, upd.GetGeneration())
		}
		st := upd.DeepCopy()
		unstructured.SetNestedField(st.Object, "ready", "status", "note")
		unstructured.SetNestedField(st.Object, "ignored", "spec", "foo")
		st, err = foos.UpdateStatus(ctx, st, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if v, _, _ := unstructured.NestedString(st.Object, "spec", "foo"); v != "baz" || st.GetGeneration() != 2 {
			t.Fatalf("status update: spec.foo %q, generation %d", v, st.GetGeneration())
		}
		if v, _, _ := unstructured.NestedString(st.Object, "status", "note"); v != "ready" {
			t.Fatalf("status update: status.note %q", v)
		}
		// Delete answers with a Status; the object is gone.
		if err := foos.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := foos.Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("get after delete: %v", err)
		}
	})
}

// TestInformer checks that a SharedInformer ends with exactly the server's
// state after a burst of writes, and again after a forced 410: the server
// restarts while a write lands in its store, so the informer's watch
// resumes from a resourceVersion the new watch cache cannot serve, gets
// 410 Gone, and relists.
func TestInformer(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		{
			cs := kubernetes.NewForConfigOrDie(s.config())
			factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
			inf := factory.Core().V1().ConfigMaps().Informer()
			stop := make(chan struct{})
			defer close(stop)
			factory.Start(stop)
			if !cache.WaitForCacheSync(stop, inf.HasSynced) {
				t.Fatal("informer never synced")
			}
			burst(t, cs, 8, 40)
			converged(t, cs, inf)

			// Write behind the API's back while it is down, then restart on
			// the same port.
			lastRV := inf.LastSyncResourceVersion()
			if err := s.stop(); err != nil {
				t.Fatal(err)
			}
			s.writeBehind(t, "/configmaps/default/behind", `{"apiVersion":"v1","kind":"ConfigMap",`+
				`"metadata":{"name":"behind","namespace":"default","uid":"u-behind","creationTimestamp":"2026-01-01T00:00:00Z"},"data":{"v":"x"}}`)
			s.start(s.addr)
			converged(t, cs, inf)
			if _, ok, _ := inf.GetStore().GetByKey("default/behind"); !ok {
				t.Fatal("the informer missed the object written while the server was down")
			}
			// The informer's resourceVersion is no longer servable: a watch
			// from it gets 410 Gone. (Whether the informer itself saw the
			// 410 or relisted first depends on its reflector's backoff.)
			w, err := cs.CoreV1().ConfigMaps("default").Watch(t.Context(), metav1.ListOptions{ResourceVersion: lastRV})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case ev := <-w.ResultChan():
				st, ok := ev.Object.(*metav1.Status)
				if ev.Type != watch.Error || !ok || st.Code != 410 {
					t.Fatalf("a watch from the informer's resourceVersion %s: %s %v, want a 410 ERROR", lastRV, ev.Type, ev.Object)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("a watch from the informer's resourceVersion %s got nothing", lastRV)
			}
			w.Stop()
			t.Logf("informer saw 410 and relisted: %v", strings.Contains(s.log.String(), "code=410"))
			burst(t, cs, 4, 20)
			converged(t, cs, inf)
		}
	})
}

// burst runs creates, updates and deletes from several clients.
func burst(t *testing.T, cs kubernetes.Interface, clients, each int) {
	t.Helper()
	cms := cs.CoreV1().ConfigMaps("default")
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	prefix := fmt.Sprint("b", time.Now().UnixNano()%100000, "-")
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				name := fmt.Sprintf("%s%d-%d", prefix, c, i)
				cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "0"}}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				switch i % 3 {
				case 1:
					cm.Data["v"] = "1"
					if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
						errs <- err
						return
					}
				case 2:
					if err := cms.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}
		}(c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// converged waits until the informer's store holds exactly what a fresh
// list returns: the same names at the same resourceVersions.
func converged(t *testing.T, cs kubernetes.Interface, inf cache.SharedIndexInformer) {
	t.Helper()
	eventually(t, 30*time.Second, "informer matches the server", func() (bool, string) {
		list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		var want, got []string
		for _, it := range list.Items {
			want = append(want, it.Name+"@"+it.ResourceVersion)
		}
		for _, o := range inf.GetStore().List() {
			cm := o.(*corev1.ConfigMap)
			got = append(got, cm.Name+"@"+cm.ResourceVersion)
		}
		sort.Strings(want)
		sort.Strings(got)
		return fmt.Sprint(want) == fmt.Sprint(got), fmt.Sprintf("server %d objects, informer %d", len(want), len(got))
	})
}

// TestMetadataClient: client-go's metadata client (what controller-runtime
// uses for metadata-only watches and the garbage collectors of operators)
// lists, gets and follows ConfigMaps, and a custom resource, as
// PartialObjectMetadata in protobuf that hold
// exactly the objects' metadata, managedFields included, and its
// informer ends with the server's state after a burst of writes.
func TestMetadataClient(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		cs := kubernetes.NewForConfigOrDie(s.config())
		mc := metadata.NewForConfigOrDie(s.config())
		cmGVR := corev1.SchemeGroupVersion.WithResource("configmaps")
		owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		yes := true
		for i := range 5 {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				GenerateName: "meta-", Labels: map[string]string{"i": fmt.Sprint(i)}, Annotations: map[string]string{"html": "<a&b>"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &yes}},
			}, Data: map[string]string{"k": strings.Repeat("v", i)}}
			if i%2 == 0 {
				cm.Finalizers = []string{"example.com/hold"}
			}
			if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		typed, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		metas, err := mc.Resource(cmGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if metas.ResourceVersion != typed.ResourceVersion || len(metas.Items) != len(typed.Items) {
			t.Fatalf("metadata list: %d items at %s, the typed list %d at %s", len(metas.Items), metas.ResourceVersion, len(typed.Items), typed.ResourceVersion)
		}
		for i, it := range metas.Items {
			// In protobuf, as kube-apiserver answers the metadata client,
			// a list's items carry no kind (in JSON each item has one).
			if it.Kind != "" || it.APIVersion != "" || !equality.Semantic.DeepEqual(it.ObjectMeta, typed.Items[i].ObjectMeta) {
				t.Fatalf("item %d: %s %s %+v\nwant the typed object's metadata %+v", i, it.APIVersion, it.Kind, it.ObjectMeta, typed.Items[i].ObjectMeta)
			}
			one, err := mc.Resource(cmGVR).Namespace("default").Get(ctx, it.Name, metav1.GetOptions{})
			if err != nil || !equality.Semantic.DeepEqual(one.ObjectMeta, it.ObjectMeta) {
				t.Fatalf("get %s: %v %+v", it.Name, err, one)
			}
		}

		factory := metadatainformer.NewFilteredSharedInformerFactory(mc, 0, "default", nil)
		inf := factory.ForResource(cmGVR).Informer()
		stop := make(chan struct{})
		defer close(stop)
		factory.Start(stop)
		if !cache.WaitForCacheSync(stop, inf.HasSynced) {
			t.Fatal("metadata informer never synced")
		}
		burst(t, cs, 4, 20)
		for _, it := range metas.Items { // deletions held by a finalizer: MODIFIED with a deletionTimestamp
			if len(it.Finalizers) > 0 {
				if err := cs.CoreV1().ConfigMaps("default").Delete(ctx, it.Name, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		eventually(t, 30*time.Second, "metadata informer matches the server", func() (bool, string) {
			list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			want := map[string]metav1.ObjectMeta{}
			for _, it := range list.Items {
				want[it.Name] = it.ObjectMeta
			}
			got := inf.GetStore().List()
			if len(got) != len(want) {
				return false, fmt.Sprintf("server %d objects, informer %d", len(want), len(got))
			}
			for _, o := range got {
				p := o.(*metav1.PartialObjectMetadata)
				if w, ok := want[p.Name]; !ok || !equality.Semantic.DeepEqual(p.ObjectMeta, w) {
					return false, fmt.Sprintf("%s: informer %+v, server %+v", p.Name, p.ObjectMeta, w)
				}
			}
			return true, ""
		})

		// A custom resource's metadata comes the same way (in protobuf,
		// as kube-apiserver sends it for every kind): a list, a get and
		// a watch event hold the dynamic client's metadata.
		installFooCRD(t, s)
		dc := dynamic.NewForConfigOrDie(s.config())
		w, err := mc.Resource(fooGVR).Namespace("default").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		foo, err := dc.Resource(fooGVR).Namespace("default").Create(ctx, newFoo("meta-foo", "x"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := metav1.ObjectMeta{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(foo.Object["metadata"].(map[string]any), &want); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if ev.Type != watch.Added || !ok || !equality.Semantic.DeepEqual(p.ObjectMeta, want) {
				t.Fatalf("watch: %s %#v\nwant ADDED with %+v", ev.Type, ev.Object, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no watch event for the Foo")
		}
		fooMetas, err := mc.Resource(fooGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		if err != nil || len(fooMetas.Items) != 1 || !equality.Semantic.DeepEqual(fooMetas.Items[0].ObjectMeta, want) {
			t.Fatalf("list: %v %+v\nwant one item with %+v", err, fooMetas, want)
		}
		one, err := mc.Resource(fooGVR).Namespace("default").Get(ctx, "meta-foo", metav1.GetOptions{})
		if err != nil || !equality.Semantic.DeepEqual(one.ObjectMeta, want) {
			t.Fatalf("get: %v %+v\nwant %+v", err, one, want)
		}
	})
}
