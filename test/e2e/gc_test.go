package e2e

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	webappv1 "github.com/kplane-dev/kplane/examples/foo-operator/api/v1"
)

// holdFinalizer is a finalizer nobody serves: the test removes it.
const holdFinalizer = "e2e.kplane.dev/hold"

// family is an owner ConfigMap with a ConfigMap and a Foo depending on it.
type family struct {
	owner *corev1.ConfigMap
	cm    string // name of the dependent ConfigMap
	foo   string // name of the dependent Foo
}

// newFamily creates it in default; the ConfigMap dependent blocks its
// owner's foreground deletion and carries finalizers.
func newFamily(t *testing.T, s *server, name string, finalizers ...string) family {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(s.config())
	dc := dynamic.NewForConfigOrDie(s.config())
	owner, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := func(block bool) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, BlockOwnerDeletion: &block}}
	}
	f := family{owner: owner, cm: name + "-cm", foo: name + "-foo"}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: f.cm, OwnerReferences: ref(true), Finalizers: finalizers}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	foo := newFoo(f.foo, "x")
	foo.SetOwnerReferences(ref(false))
	if _, err := dc.Resource(fooGVR).Namespace("default").Create(ctx, foo, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// getCM and getFoo read a dependent; nil when it is gone.
func getCM(t *testing.T, s *server, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := kubernetes.NewForConfigOrDie(s.config()).CoreV1().ConfigMaps("default").Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

func getFoo(t *testing.T, s *server, name string) *unstructured.Unstructured {
	t.Helper()
	foo, err := dynamic.NewForConfigOrDie(s.config()).Resource(fooGVR).Namespace("default").Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return foo
}

// clearFinalizers removes a ConfigMap's finalizers with an update.
func clearFinalizers(t *testing.T, s *server, ns, name string) {
	t.Helper()
	cms := kubernetes.NewForConfigOrDie(s.config()).CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Finalizers = nil
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestGCKubectlCascade: kubectl delete --cascade=background|foreground|orphan
// on an owner with a ConfigMap and a custom resource depending on it.
func TestGCKubectlCascade(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)

		t.Run("background", func(t *testing.T) {
			f := newFamily(t, s, "bg")
			s.mustKubectl(t, "delete", "configmap", "bg", "--cascade=background")
			eventually(t, 30*time.Second, "dependents collected", func() (bool, string) {
				cm, foo := getCM(t, s, f.cm), getFoo(t, s, f.foo)
				return cm == nil && foo == nil, fmt.Sprintf("configmap %v, foo %v", cm != nil, foo != nil)
			})
		})

		t.Run("foreground", func(t *testing.T) {
			// kubectl waits for the owner to go, which it does only after
			// its blocking dependent.
			f := newFamily(t, s, "fg")
			s.mustKubectl(t, "delete", "configmap", "fg", "--cascade=foreground", "--timeout=60s")
			if cm := getCM(t, s, f.cm); cm != nil {
				t.Fatalf("the owner went before its blocking dependent: %+v", cm.ObjectMeta)
			}
			eventually(t, 30*time.Second, "the non-blocking dependent collected", func() (bool, string) {
				return getFoo(t, s, f.foo) == nil, "foo still there"
			})

			// With the blocking dependent held by a finalizer, the owner
			// waits, Terminating with foregroundDeletion.
			f = newFamily(t, s, "fg-held", holdFinalizer)
			s.mustKubectl(t, "delete", "configmap", "fg-held", "--cascade=foreground", "--wait=false")
			eventually(t, 30*time.Second, "the dependent being deleted", func() (bool, string) {
				cm := getCM(t, s, f.cm)
				return cm != nil && cm.DeletionTimestamp != nil, fmt.Sprint(cm)
			})
			owner := getCM(t, s, "fg-held")
			if owner == nil || owner.DeletionTimestamp == nil || !strings.Contains(strings.Join(owner.Finalizers, ","), metav1.FinalizerDeleteDependents) {
				t.Fatalf("owner while its dependent is held: %+v", owner)
			}
			clearFinalizers(t, s, "default", f.cm)
			s.mustKubectl(t, "wait", "--for=delete", "configmap/fg-held", "--timeout=60s")
			if cm := getCM(t, s, f.cm); cm != nil {
				t.Fatalf("dependent left: %+v", cm.ObjectMeta)
			}
		})

		t.Run("orphan", func(t *testing.T) {
			f := newFamily(t, s, "or")
			s.mustKubectl(t, "delete", "configmap", "or", "--cascade=orphan", "--timeout=60s")
			cm, foo := getCM(t, s, f.cm), getFoo(t, s, f.foo)
			if cm == nil || foo == nil {
				t.Fatalf("orphaned dependents deleted: configmap %v, foo %v", cm != nil, foo != nil)
			}
			if len(cm.OwnerReferences) != 0 || len(foo.GetOwnerReferences()) != 0 {
				t.Fatalf("references left: %+v, %+v", cm.OwnerReferences, foo.GetOwnerReferences())
			}
		})
	})
}

// TestGCNamespaceDeletion: kubectl delete ns of a namespace with content,
// one object held by a finalizer: the namespace reports it in its
// conditions, and finishes once the finalizer is removed.
func TestGCNamespaceDeletion(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)
		cs := kubernetes.NewForConfigOrDie(s.config())
		dc := dynamic.NewForConfigOrDie(s.config())
		s.mustKubectl(t, "create", "namespace", "doomed")
		s.mustKubectl(t, "-n", "doomed", "create", "configmap", "plain")
		s.mustKubectl(t, "-n", "doomed", "create", "secret", "generic", "s", "--from-literal=a=b")
		if _, err := dc.Resource(fooGVR).Namespace("doomed").Create(ctx, newFoo("f", "x"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "held", Finalizers: []string{holdFinalizer}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}

		s.mustKubectl(t, "delete", "namespace", "doomed", "--wait=false")
		want := map[corev1.NamespaceConditionType][3]string{
			corev1.NamespaceDeletionDiscoveryFailure: {"False", "ResourcesDiscovered", "All resources successfully discovered"},
			corev1.NamespaceDeletionGVParsingFailure: {"False", "ParsedGroupVersions", "All legacy kube types successfully parsed"},
			corev1.NamespaceDeletionContentFailure:   {"False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
			corev1.NamespaceContentRemaining:         {"True", "SomeResourcesRemain", "Some resources are remaining: configmaps. has 1 resource instances"},
			corev1.NamespaceFinalizersRemaining:      {"True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: " + holdFinalizer + " in 1 resource instances"},
		}
		eventually(t, 30*time.Second, "Terminating with its conditions", func() (bool, string) {
			ns, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if ns.Status.Phase != corev1.NamespaceTerminating || len(ns.Status.Conditions) != len(want) {
				return false, fmt.Sprintf("%+v", ns.Status)
			}
			for _, c := range ns.Status.Conditions {
				w := want[c.Type]
				if string(c.Status) != w[0] || c.Reason != w[1] || c.Message != w[2] || c.LastTransitionTime.IsZero() {
					return false, fmt.Sprintf("%+v", ns.Status)
				}
			}
			return true, ""
		})
		// Everything without a finalizer is gone already.
		if _, err := cs.CoreV1().Secrets("doomed").Get(ctx, "s", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("secret: %v", err)
		}
		if _, err := dc.Resource(fooGVR).Namespace("doomed").Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("foo: %v", err)
		}
		if out := s.mustKubectl(t, "get", "namespace", "doomed"); !strings.Contains(out, "Terminating") {
			t.Fatalf("kubectl get namespace:\n%s", out)
		}
		// As upstream: the namespace is marked with a timestamp only (its
		// REST of its own sets no grace period); an object its finalizer
		// holds gets the generic registry's grace period of 0.
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "doomed", metav1.GetOptions{})
		if err != nil || ns.DeletionTimestamp == nil || ns.DeletionGracePeriodSeconds != nil {
			t.Fatalf("namespace: %v, deletionTimestamp %v, deletionGracePeriodSeconds %v", err, ns.DeletionTimestamp, ns.DeletionGracePeriodSeconds)
		}
		held, err := cs.CoreV1().ConfigMaps("doomed").Get(ctx, "held", metav1.GetOptions{})
		if err != nil || held.DeletionTimestamp == nil || held.DeletionGracePeriodSeconds == nil || *held.DeletionGracePeriodSeconds != 0 {
			t.Fatalf("held configmap: %v, %+v", err, held.ObjectMeta)
		}
		// NamespaceLifecycle: nothing new goes into a terminating namespace.
		_, err = cs.CoreV1().ConfigMaps("doomed").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "unable to create new content in namespace doomed because it is being terminated") {
			t.Fatalf("create in a terminating namespace: %v", err)
		}

		clearFinalizers(t, s, "doomed", "held")
		s.mustKubectl(t, "wait", "--for=delete", "namespace/doomed", "--timeout=60s")
		if _, err := cs.CoreV1().ConfigMaps("doomed").Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("held configmap after the namespace went: %v", err)
		}
	})
}

// TestGCControllerReference: controller-runtime's SetControllerReference,
// then deleting the owner removes the child, with a custom resource as the
// owner and with the foreground policy.
func TestGCControllerReference(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		installFooCRD(t, s)
		sch := scheme(t)
		c, err := client.New(s.config(), client.Options{Scheme: sch})
		if err != nil {
			t.Fatal(err)
		}
		for _, policy := range []metav1.DeletionPropagation{"", metav1.DeletePropagationForeground} {
			name := "owner-" + strings.ToLower(string(cmp.Or(policy, "default")))
			foo := &webappv1.Foo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: webappv1.FooSpec{Foo: "bar"}}
			if err := c.Create(ctx, foo); err != nil {
				t.Fatal(err)
			}
			child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-child", Namespace: "default"}}
			if err := controllerutil.SetControllerReference(foo, child, sch); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, child); err != nil {
				t.Fatal(err)
			}
			if r := child.OwnerReferences; len(r) != 1 || r[0].UID != foo.UID || !ptr.Deref(r[0].Controller, false) || !ptr.Deref(r[0].BlockOwnerDeletion, false) {
				t.Fatalf("controller reference as stored: %+v", r)
			}
			var opts []client.DeleteOption
			if policy != "" {
				opts = append(opts, client.PropagationPolicy(policy))
			}
			if err := c.Delete(ctx, foo, opts...); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "owner and child gone", func() (bool, string) {
				errOwner := c.Get(ctx, client.ObjectKeyFromObject(foo), &webappv1.Foo{})
				errChild := c.Get(ctx, client.ObjectKeyFromObject(child), &corev1.ConfigMap{})
				if apierrors.IsNotFound(errOwner) && errChild == nil && policy == metav1.DeletePropagationForeground {
					t.Fatal("the owner went before its child in a foreground deletion")
				}
				return apierrors.IsNotFound(errOwner) && apierrors.IsNotFound(errChild), fmt.Sprintf("owner %v, child %v", errOwner, errChild)
			})
		}
	})
}

// TestGCFinalizerReconciler: a reconciler that adds its finalizer, and on
// deletion does its cleanup and removes it, completes.
func TestGCFinalizerReconciler(t *testing.T) {
	forEachEngine(t, func(t *testing.T, s *server) {
		const finalizer = "e2e.kplane.dev/cleanup"
		const label = "e2e.kplane.dev/finalize"
		startManager(t, s, ctrl.Options{}, func(mgr ctrl.Manager) error {
			c := mgr.GetClient()
			return ctrl.NewControllerManagedBy(mgr).Named("finalizing").
				For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
					return o.GetLabels()[label] == "true"
				}))).
				Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
					var cm corev1.ConfigMap
					if err := c.Get(ctx, req.NamespacedName, &cm); err != nil {
						return reconcile.Result{}, client.IgnoreNotFound(err)
					}
					if cm.DeletionTimestamp.IsZero() {
						if controllerutil.AddFinalizer(&cm, finalizer) {
							return reconcile.Result{}, c.Update(ctx, &cm)
						}
						return reconcile.Result{}, nil
					}
					if !controllerutil.ContainsFinalizer(&cm, finalizer) {
						return reconcile.Result{}, nil
					}
					// The cleanup: record it in another object.
					record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name + "-cleaned", Namespace: cm.Namespace}}
					if err := c.Create(ctx, record); err != nil && !apierrors.IsAlreadyExists(err) {
						return reconcile.Result{}, err
					}
					controllerutil.RemoveFinalizer(&cm, finalizer)
					return reconcile.Result{}, c.Update(ctx, &cm)
				}))
		})
		cs := kubernetes.NewForConfigOrDie(s.config())
		cms := cs.CoreV1().ConfigMaps("default")
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Labels: map[string]string{label: "true"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var uid types.UID
		eventually(t, 30*time.Second, "finalizer added", func() (bool, string) {
			cm, err := cms.Get(ctx, "guarded", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			uid = cm.UID
			return controllerutil.ContainsFinalizer(cm, finalizer), fmt.Sprint(cm.Finalizers)
		})
		if err := cms.Delete(ctx, "guarded", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "cleaned up and gone", func() (bool, string) {
			_, errObj := cms.Get(ctx, "guarded", metav1.GetOptions{})
			_, errRecord := cms.Get(ctx, "guarded-cleaned", metav1.GetOptions{})
			return apierrors.IsNotFound(errObj) && errRecord == nil, fmt.Sprintf("object %v, cleanup record %v", errObj, errRecord)
		})
	})
}

// TestNamespaceSpecFinalizers: a namespace's spec.finalizers other than
// kubernetes hold it after its content is deleted, until their owner
// finalizes it, as upstream's namespace controller leaves them; a
// namespace without the kubernetes finalizer keeps its content.
func TestNamespaceSpecFinalizers(t *testing.T) {
	s := startServer(t, "--storage", "memory")
	cs := kubernetes.NewForConfigOrDie(s.config())
	finalize := func(name string, finalizers ...corev1.FinalizerName) {
		t.Helper()
		ns, err := cs.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns.Spec.Finalizers = finalizers
		if _, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"held", "unmanaged"} {
		s.mustKubectl(t, "create", "namespace", name)
		s.mustKubectl(t, "-n", name, "create", "configmap", "content")
	}
	finalize("held", corev1.FinalizerKubernetes, "example.com/keep")
	finalize("unmanaged", "example.com/keep")
	s.mustKubectl(t, "delete", "namespace", "held", "unmanaged", "--wait=false")

	eventually(t, 30*time.Second, "held emptied, still there", func() (bool, string) {
		_, err := cs.CoreV1().ConfigMaps("held").Get(ctx, "content", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("its configmap: %v", err)
		}
		ns, err := cs.CoreV1().Namespaces().Get(ctx, "held", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return ns.Status.Phase == corev1.NamespaceTerminating && len(ns.Spec.Finalizers) == 1 && ns.Spec.Finalizers[0] == "example.com/keep",
			fmt.Sprintf("%+v %+v", ns.Spec, ns.Status)
	})
	// The controller is done with held (it looks again every second):
	// the namespace stays, and unmanaged keeps its content.
	time.Sleep(3 * time.Second)
	if out := s.mustKubectl(t, "get", "namespace", "held", "unmanaged"); strings.Count(out, "Terminating") != 2 {
		t.Fatalf("kubectl get namespace:\n%s", out)
	}
	if _, err := cs.CoreV1().ConfigMaps("unmanaged").Get(ctx, "content", metav1.GetOptions{}); err != nil {
		t.Fatalf("the content of a namespace without the kubernetes finalizer: %v", err)
	}
	finalize("held")
	s.mustKubectl(t, "wait", "--for=delete", "namespace/held", "--timeout=30s")
}
