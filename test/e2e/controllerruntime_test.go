package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	webappv1 "github.com/kplane-dev/kplane/examples/foo-operator/api/v1"
	"github.com/kplane-dev/kplane/examples/foo-operator/controller"
)

func init() { ctrl.SetLogger(logr.Discard()) }

func scheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := webappv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// startManager runs a controller-runtime manager until the test ends.
func startManager(t *testing.T, s *server, opts ctrl.Options, setup func(ctrl.Manager) error) ctrl.Manager {
	t.Helper()
	opts.Scheme = scheme(t)
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(s.config(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		if err := setup(mgr); err != nil {
			t.Fatal(err)
		}
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return mgr
}

func TestControllerRuntimeManager(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		mgr := startManager(t, s, ctrl.Options{
			LeaderElection: true, LeaderElectionID: "kplane-e2e", LeaderElectionNamespace: "default",
		}, nil)
		select {
		case <-mgr.Elected():
		case <-time.After(30 * time.Second):
			t.Fatal("the manager was never elected leader")
		}
		cs := kubernetes.NewForConfigOrDie(s.config())
		lease, err := cs.CoordinationV1().Leases("default").Get(ctx, "kplane-e2e", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
			t.Fatalf("lease without a holder: %+v", lease.Spec)
		}
		// The lease is renewed: its renewTime moves.
		first := lease.Spec.RenewTime.DeepCopy()
		eventually(t, 30*time.Second, "lease renewed", func() (bool, string) {
			l, err := cs.CoordinationV1().Leases("default").Get(ctx, "kplane-e2e", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return l.Spec.RenewTime.After(first.Time), fmt.Sprint(l.Spec.RenewTime)
		})

		// The cached client: writes go to the server, reads come from the
		// informer cache once it has seen them.
		c := mgr.GetClient()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cached", Namespace: "default"}, Data: map[string]string{"a": "1"}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "cached read", func() (bool, string) {
			var got corev1.ConfigMap
			err := c.Get(ctx, client.ObjectKeyFromObject(cm), &got)
			return err == nil && got.ResourceVersion == cm.ResourceVersion, fmt.Sprint(err)
		})
		var leases coordinationv1.LeaseList
		if err := c.List(ctx, &leases, client.InNamespace("default")); err != nil || len(leases.Items) != 1 {
			t.Fatalf("cached list of leases: %v, %d", err, len(leases.Items))
		}
	})
}

// TestMixedClients is seed 001: a controller-runtime client writes the new
// resourceVersion back into the object it was given; a client-go typed
// client returns a new object and leaves its argument alone.
func TestMixedClients(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		cr, err := client.New(s.config(), client.Options{Scheme: scheme(t)})
		if err != nil {
			t.Fatal(err)
		}
		cs := kubernetes.NewForConfigOrDie(s.config())
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mixed", Namespace: "default"}, Data: map[string]string{"v": "1"}}
		if err := cr.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		created := cm.ResourceVersion
		cm.Data["v"] = "2"
		if err := cr.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if cm.ResourceVersion == created {
			t.Fatal("controller-runtime Update did not write the new resourceVersion into its argument")
		}
		viaCR := cm.ResourceVersion

		arg := cm.DeepCopy()
		arg.Data["v"] = "3"
		out, err := cs.CoreV1().ConfigMaps("default").Update(ctx, arg, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if arg.ResourceVersion != viaCR || out.ResourceVersion == viaCR {
			t.Fatalf("client-go Update: argument at %s (want unchanged %s), result at %s", arg.ResourceVersion, viaCR, out.ResourceVersion)
		}
		// The argument is now stale: reusing it is seed 000's conflict.
		arg.Data["v"] = "4"
		if err := cr.Update(ctx, arg); err == nil {
			t.Fatal("update from a stale object succeeded")
		}
	})
}

// TestFooOperator runs seed 000's Foo operator in each mode against kplane
// and counts reconciles and conflicts.
func TestFooOperator(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)
		cr, err := client.New(s.config(), client.Options{Scheme: scheme(t)})
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range controller.Modes() {
			t.Run(string(mode), func(t *testing.T) {
				ns := "mode-" + string(mode)
				if err := cr.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
					t.Fatal(err)
				}
				foo := &webappv1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "foo-sample", Namespace: ns}, Spec: webappv1.FooSpec{Foo: "bar"}}
				if err := cr.Create(ctx, foo); err != nil {
					t.Fatal(err)
				}
				counters := &controller.Counters{}
				mctx, stop := context.WithCancel(ctx)
				defer stop()
				runOperator(t, s, mctx, mode, ns, counters)
				switch mode {
				case controller.ModeSingle, controller.ModeIdempotent:
					settled(t, counters)
					got := &webappv1.Foo{}
					if err := cr.Get(ctx, client.ObjectKeyFromObject(foo), got); err != nil || got.Spec.Foo != controller.ValueHello {
						t.Fatalf("spec.foo %q, %v; want %q", got.Spec.Foo, err, controller.ValueHello)
					}
					if mode == controller.ModeIdempotent && counters.Snapshot().Errors != 0 {
						t.Fatalf("the idempotent reconciler returned errors: %+v", counters.Snapshot())
					}
				case controller.ModeTwoUpdates:
					// Two writes per pass: it never settles, and the lagging
					// cache makes some updates conflict (409).
					eventually(t, 60*time.Second, "reconciling on with conflicts", func() (bool, string) {
						c := counters.Snapshot()
						return c.Reconciles >= 20 && c.Conflicts >= 1 && c.Errors >= 1, fmt.Sprintf("%+v", c)
					})
				case controller.ModeRetry:
					// RetryOnConflict with a fresh read: every pass succeeds,
					// and it still reconciles on (two real changes per pass).
					eventually(t, 60*time.Second, "reconciling on without errors", func() (bool, string) {
						c := counters.Snapshot()
						return c.Reconciles >= 20 && c.Updates >= 40, fmt.Sprintf("%+v", c)
					})
					if c := counters.Snapshot(); c.Errors != 0 {
						t.Fatalf("RetryOnConflict still returned errors: %+v", c)
					}
				case controller.ModeMergePatch:
					// The same two writes as merge patches: no resourceVersion,
					// so the lagging cache causes no 409 at all; two real
					// changes per pass still keep it reconciling.
					eventually(t, 60*time.Second, "reconciling on with patches", func() (bool, string) {
						c := counters.Snapshot()
						return c.Reconciles >= 20 && c.Patches >= 40, fmt.Sprintf("%+v", c)
					})
					if c := counters.Snapshot(); c.Conflicts != 0 || c.Errors != 0 || c.Updates != 0 {
						t.Fatalf("merge patches conflicted or failed: %+v", c)
					}
				}
				stop()
				t.Logf("mode %s: %+v", mode, counters.Snapshot())
			})
		}
	})
}

func runOperator(t *testing.T, s *server, mctx context.Context, mode controller.Mode, ns string, counters *controller.Counters) {
	t.Helper()
	opts := ctrl.Options{Scheme: scheme(t), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}}
	mgr, err := ctrl.NewManager(s.config(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &controller.FooReconciler{Client: mgr.GetClient(), Mode: mode, Counters: counters}
	if err := r.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// settled waits until the reconciler has stopped: no reconcile for a
// whole second after at least one.
func settled(t *testing.T, counters *controller.Counters) {
	t.Helper()
	last, since := int64(-1), time.Now()
	eventually(t, 60*time.Second, "the reconciler settles", func() (bool, string) {
		c := counters.Snapshot()
		if c.Reconciles != last {
			last, since = c.Reconciles, time.Now()
		}
		return c.Reconciles > 0 && time.Since(since) > time.Second, fmt.Sprintf("%+v", c)
	})
}

// TestEventRecorders: controller-runtime's two event recorders against
// kplane. GetEventRecorder writes through events.k8s.io/v1 (client-go's
// tools/events: a create, then a strategic merge patch of the series when
// the event repeats); GetEventRecorderFor through core/v1. Each event is
// read through both APIs, by a client-go informer on the new one, and by
// kubectl.
func TestEventRecorders(t *testing.T) {
	s := startServer(t)
	cs := kubernetes.NewForConfigOrDie(s.config())
	cm, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "recorded"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An informer on events.k8s.io/v1 sees every event, whichever API
	// wrote it.
	seen := make(chan *eventsv1.Event, 16)
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	if _, err := factory.Events().V1().Events().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { seen <- o.(*eventsv1.Event) },
		UpdateFunc: func(_, o any) { seen <- o.(*eventsv1.Event) },
	}); err != nil {
		t.Fatal(err)
	}
	ictx, stop := context.WithCancel(ctx)
	defer stop()
	factory.Start(ictx.Done())
	sctx, cancel := context.WithTimeout(ictx, 30*time.Second)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(sctx.Done()) {
		if !ok {
			t.Fatalf("the informer of %v never synced", typ)
		}
	}

	mgr := startManager(t, s, ctrl.Options{}, nil)
	mgr.GetEventRecorder("kplane-e2e").Eventf(cm, nil, corev1.EventTypeNormal, "Synced", "Reconcile", "synced %s", cm.Name)
	var core corev1.Event
	eventually(t, 30*time.Second, "the new API's event, read through core/v1", func() (bool, string) {
		list, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reportingComponent=kplane-e2e"})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Sprint(err, list)
		}
		core = list.Items[0]
		return true, ""
	})
	if core.InvolvedObject.Name != "recorded" || core.InvolvedObject.Kind != "ConfigMap" || core.Message != "synced recorded" ||
		core.Action != "Reconcile" || core.Reason != "Synced" || core.EventTime.IsZero() || core.Series != nil {
		t.Fatalf("core/v1 view of the event: %+v", core)
	}
	// The same event again: client-go patches a series in.
	mgr.GetEventRecorder("kplane-e2e").Eventf(cm, nil, corev1.EventTypeNormal, "Synced", "Reconcile", "synced %s", cm.Name)
	eventually(t, 30*time.Second, "the series", func() (bool, string) {
		ev, err := cs.EventsV1().Events("default").Get(ctx, core.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ev.Series != nil && ev.Series.Count == 2 && ev.Regarding.Name == "recorded" && ev.Note == "synced recorded", fmt.Sprintf("%+v", ev)
	})

	// The deprecated recorder: core/v1, read through events.k8s.io/v1.
	//lint:ignore SA1019 the deprecated recorder is the one of most operators today
	mgr.GetEventRecorderFor("kplane-legacy").Eventf(cm, corev1.EventTypeWarning, "Failed", "failed %s", cm.Name)
	eventually(t, 30*time.Second, "the core event, read through events.k8s.io/v1", func() (bool, string) {
		list, err := cs.EventsV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=Failed,regarding.name=recorded"})
		if err != nil || len(list.Items) != 1 {
			return false, fmt.Sprint(err, list)
		}
		ev := list.Items[0]
		return ev.Note == "failed recorded" && ev.DeprecatedSource.Component == "kplane-legacy" && ev.DeprecatedCount == 1, fmt.Sprintf("%+v", ev)
	})

	// The informer saw both, with the series.
	names := map[string]bool{}
	series := false
	timeout := time.After(30 * time.Second)
	for !series || len(names) < 2 {
		select {
		case ev := <-seen:
			names[ev.Name] = true
			series = series || ev.Series != nil && ev.Series.Count == 2
		case <-timeout:
			t.Fatalf("informer: saw %v, series %v", names, series)
		}
	}

	// kubectl lists both, through core/v1.
	out := s.mustKubectl(t, "get", "events", "-n", "default", "-o", "custom-columns=REASON:.reason,OBJECT:.involvedObject.name,COUNT:.series.count", "--sort-by=.reason")
	if want := "REASON   OBJECT     COUNT\nFailed   recorded   <none>\nSynced   recorded   2\n"; out != want {
		t.Fatalf("kubectl get events:\n%s\nwant\n%s", out, want)
	}
}
