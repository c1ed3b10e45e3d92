package core

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kplane-dev/kplane/internal/registry"
)

// AuthenticationInfo publishes how kplane authenticates clients in the
// ConfigMap kube-system/extension-apiserver-authentication, as
// kube-apiserver's cluster authentication trust controller does, for the
// servers that delegate their authentication to it (webhook servers and
// extension API servers built on k8s.io/apiserver read it when they
// start): the authorities of client certificates (client-ca-file) and,
// with front proxies, their authorities and headers (requestheader-*).
// What is stored is merged with what it needs, as upstream's: lists keep
// their entries and gain the missing ones, certificate bundles gain the
// missing certificates and lose the expired ones, so that servers sharing
// an etcd publish all of theirs. It checks at start, whenever the
// ConfigMap is created or deleted or the authorities change (Notify), and
// every minute.
//
// It also keeps the namespaced part of the default RBAC policy (the role
// that reads the ConfigMap, in kube-system, and its binding), which needs
// the registry running.
type AuthenticationInfo struct {
	Registry *registry.Registry
	// ClientCA returns the PEM authorities of the client certificates
	// kplane accepts.
	ClientCA func() []byte
	// RequestHeader, if set, returns the front proxies' settings.
	RequestHeader func() RequestHeaderInfo
	Logger        *slog.Logger
	// Interval between checks; a minute if zero.
	Interval time.Duration
	// Now is the clock (tests); time.Now if nil.
	Now func() time.Time

	syncOnce sync.Once
	synced   chan struct{}
	initOnce sync.Once
	wake     chan struct{}
}

// Notify asks for a check now: what RequestHeader or ClientCA return
// changed (the front proxies' file was read again).
func (a *AuthenticationInfo) Notify() {
	a.init()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// RequestHeaderInfo is how front proxies name the user: the authorities
// of their client certificates (PEM), the names those may have, and the
// headers.
type RequestHeaderInfo struct {
	CA                                                                           []byte
	AllowedNames, UsernameHeaders, UIDHeaders, GroupHeaders, ExtraHeaderPrefixes []string
}

func (a *AuthenticationInfo) init() {
	a.initOnce.Do(func() { a.synced, a.wake = make(chan struct{}), make(chan struct{}, 1) })
}

// Synced is closed once the ConfigMap and the namespaced policy were
// first written (or found as they should be).
func (a *AuthenticationInfo) Synced() <-chan struct{} {
	a.init()
	return a.synced
}

// Run works until ctx ends.
func (a *AuthenticationInfo) Run(ctx context.Context) error {
	a.init()
	if a.Logger == nil {
		a.Logger = slog.New(slog.DiscardHandler)
	}
	interval := a.Interval
	if interval == 0 {
		interval = time.Minute
	}
	ctx = registry.AsController(ctx, registry.APIServerUser)
	configMaps, ok := a.Registry.Get(schema.GroupResource{Resource: "configmaps"})
	if !ok {
		<-ctx.Done()
		return nil
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var w watch.Interface
	defer func() {
		if w != nil {
			w.Stop()
		}
	}()
	var events <-chan watch.Event
	for ctx.Err() == nil {
		var due <-chan time.Time = tick.C
		if err := a.Sync(ctx); err != nil {
			// Again in a second, not at the next tick: kplane is not
			// ready before the first write, and another server on the
			// same etcd writing at once makes this one's conflict.
			if !apierrors.IsConflict(err) {
				a.Logger.Warn("publishing the authentication configuration", "configmap", metav1.NamespaceSystem+"/"+authenticationInfoName, "err", err)
			}
			due = time.After(retryAfterFailure)
		} else {
			a.syncOnce.Do(func() { close(a.synced) })
		}
		if events == nil {
			// The ConfigMap's creates and deletes, as upstream's
			// informer handlers: a deleted one is made again at once.
			opts := registry.ListOptions{NoInitialEvents: true}
			opts.Predicate.Field = fields.OneTermEqualSelector("metadata.name", authenticationInfoName)
			if w != nil {
				w.Stop()
			}
			var err error
			if w, err = configMaps.Watch(ctx, "v1", metav1.NamespaceSystem, opts); err == nil {
				events = w.ResultChan()
			} else {
				w = nil
			}
		}
		a.wait(ctx, due, &events)
	}
	return nil
}

// retryAfterFailure is how soon a check that failed is made again.
const retryAfterFailure = time.Second

// wait returns when a check is due: ctx ended, the tick, Notify, the
// ConfigMap created or deleted, or the watch ended (events set to nil).
func (a *AuthenticationInfo) wait(ctx context.Context, tick <-chan time.Time, events *<-chan watch.Event) {
	for {
		select {
		case <-ctx.Done():
		case <-tick:
		case <-a.wake:
		case ev, ok := <-*events:
			if !ok {
				*events = nil
			} else if ev.Type != watch.Added && ev.Type != watch.Deleted {
				continue // a change: the next tick merges into it
			}
		}
		return
	}
}

// Sync writes the ConfigMap and the namespaced default policy once, if
// they lack anything.
func (a *AuthenticationInfo) Sync(ctx context.Context) error {
	resources, objs, err := policyObjects()
	if err != nil {
		return err
	}
	for i, obj := range objs {
		if obj.GetNamespace() == "" {
			continue
		}
		res, ok := rbacResource(a.Registry, resources[i])
		if !ok {
			continue
		}
		have, err := res.Get(ctx, "v1", obj.GetNamespace(), obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			have, err = nil, nil
		}
		if err != nil {
			return err
		}
		if err := reconcilePolicy(ctx, res, obj, have); err != nil {
			return fmt.Errorf("%s %s/%s: %w", resources[i], obj.GetNamespace(), obj.GetName(), err)
		}
	}
	// Another server on the same etcd may write between the read and
	// the write: read, merge and write again.
	for range 4 {
		err = a.syncConfigMap(ctx)
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			break
		}
	}
	return err
}

// syncConfigMap merges what kplane needs published into the stored
// ConfigMap, and writes it if that changes it.
func (a *AuthenticationInfo) syncConfigMap(ctx context.Context) error {
	res, _ := a.Registry.Get(schema.GroupResource{Resource: "configmaps"})
	stored, err := res.Get(ctx, "v1", metav1.NamespaceSystem, authenticationInfoName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		stored, err = nil, nil
	}
	if err != nil {
		return err
	}
	var have map[string]string
	if stored != nil {
		have, _, _ = unstructured.NestedStringMap(stored.Object, "data")
	}
	var want RequestHeaderInfo
	var wantProxies bool
	if a.RequestHeader != nil {
		want, wantProxies = a.RequestHeader(), true
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	data, err := authenticationData(have, a.ClientCA(), want, wantProxies, now())
	if err != nil {
		return err
	}
	if stored != nil && maps.Equal(have, data) {
		return nil
	}
	opts := registry.WriteOptions{FieldManager: "kube-apiserver"}
	if stored == nil {
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": anyMap(data)}}
		cm.SetNamespace(metav1.NamespaceSystem)
		cm.SetName(authenticationInfoName)
		_, err = res.Create(ctx, "v1", metav1.NamespaceSystem, cm, opts)
		return err // AlreadyExists: made meanwhile, to merge into (Sync)
	}
	next := stored.DeepCopy()
	next.Object["data"] = anyMap(data)
	_, err = res.Update(ctx, "v1", metav1.NamespaceSystem, authenticationInfoName, next, opts)
	return err
}

// authenticationData is the ConfigMap's data: have's merged with kplane's
// client authorities and, if proxies, its front proxies' settings, in
// upstream's keys and forms (lists as JSON arrays, bundles as PEM).
func authenticationData(have map[string]string, clientCA []byte, proxy RequestHeaderInfo, proxies bool, now time.Time) (map[string]string, error) {
	list := func(key string, want []string) ([]string, error) {
		var out []string
		if s := have[key]; s != "" {
			if err := json.Unmarshal([]byte(s), &out); err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
		}
		out = append(out, want...)
		seen := map[string]bool{} // the first of each kept, in order
		return slices.DeleteFunc(out, func(s string) bool {
			dup := seen[s]
			seen[s] = true
			return dup
		}), nil
	}
	data := map[string]string{}
	ca, err := mergeBundles([]byte(have["client-ca-file"]), clientCA, now)
	if err != nil {
		return nil, fmt.Errorf("client-ca-file: %w", err)
	}
	if len(ca) > 0 {
		data["client-ca-file"] = string(ca)
	}
	var wantCA []byte
	if proxies {
		wantCA = proxy.CA
	}
	proxyCA, err := mergeBundles([]byte(have["requestheader-client-ca-file"]), wantCA, now)
	if err != nil {
		return nil, fmt.Errorf("requestheader-client-ca-file: %w", err)
	}
	if len(proxyCA) == 0 {
		return data, nil
	}
	for _, l := range []struct {
		key  string
		want []string
		omit bool // when empty
	}{
		{"requestheader-username-headers", proxy.UsernameHeaders, false},
		{"requestheader-uid-headers", proxy.UIDHeaders, true},
		{"requestheader-group-headers", proxy.GroupHeaders, false},
		{"requestheader-extra-headers-prefix", proxy.ExtraHeaderPrefixes, false},
		{"requestheader-allowed-names", proxy.AllowedNames, false},
	} {
		values, err := list(l.key, l.want)
		if err != nil {
			return nil, err
		}
		if len(values) == 0 && l.omit {
			continue
		}
		b, _ := json.Marshal(append([]string{}, values...))
		data[l.key] = string(b)
	}
	data["requestheader-client-ca-file"] = string(proxyCA)
	return data, nil
}

// mergeBundles returns the certificates of have and then want's new ones,
// without those expired more than five minutes ago, as PEM; nil if none.
func mergeBundles(have, want []byte, now time.Time) ([]byte, error) {
	var certs []*x509.Certificate
	for _, bundle := range [][]byte{have, want} {
		for rest := bundle; ; {
			var block *pem.Block
			if block, rest = pem.Decode(rest); block == nil {
				break
			}
			if block.Type != "CERTIFICATE" {
				continue
			}
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, err
			}
			certs = append(certs, c)
		}
	}
	var out bytes.Buffer
	var kept []*x509.Certificate
	for _, c := range certs {
		if !c.NotAfter.After(now.Add(-5*time.Minute)) || slices.ContainsFunc(kept, func(k *x509.Certificate) bool { return bytes.Equal(k.Raw, c.Raw) }) {
			continue
		}
		kept = append(kept, c)
		pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	if out.Len() == 0 {
		return nil, nil
	}
	return out.Bytes(), nil
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
