package webhook

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kplane-dev/kplane/internal/registry"
)

// Admission configurations read from files: kube-apiserver's
// ManifestBasedAdmissionControlConfig (beta, on by default in 1.37;
// k8s.io/apiserver's admission/plugin/manifest and the webhook and policy
// manifest loaders, read for the behaviour, written anew). Each of the
// four admission plugins may name a staticManifestsDir in
// --admission-control-config-file; its directory holds what the plugin
// would otherwise read from the API:
//
//   - the .yaml, .yml and .json files directly in it, in name order, each
//     one or more YAML documents (or JSON), each an
//     admissionregistration.k8s.io/v1 object of the plugin's kinds, a
//     list of them, or a v1 List of either;
//   - each object decoded strictly, defaulted and checked as a create
//     through the API is, but that its name must end in ".static.k8s.io"
//     (a suffix the API refuses), be unique among the directory's objects
//     of its kind, and a webhook must name a url (not a service), a
//     policy no paramKind, a binding no paramRef and a policy of the same
//     directory;
//   - any error refuses the whole directory: at start-up kplane does not
//     start; later, the configurations in force stay, the reload counts
//     as failed and the error is logged;
//   - the directory is read again when a file in it changes (once its
//     changes have settled) and every minute; what it holds applies once
//     read, and a reading whose files hash as the last one's does
//     nothing.
//
// Configurations from files come before those of the API. Writes of the
// admission policies and their bindings see only the files'; writes of
// webhook configurations see the files' and the API's policies: upstream
// exempts the six admission kinds from the API's webhooks, and the four
// policy kinds from the API's policies, so that a broken one can always
// be removed.

// StaticDirs are the plugins' staticManifestsDir ("": none).
type StaticDirs struct {
	ValidatingWebhooks, MutatingWebhooks, ValidatingPolicies, MutatingPolicies string
}

// The admission plugins, by upstream's names.
const (
	pluginValidatingWebhook = "ValidatingAdmissionWebhook"
	pluginMutatingWebhook   = "MutatingAdmissionWebhook"
	pluginValidatingPolicy  = "ValidatingAdmissionPolicy"
	pluginMutatingPolicy    = "MutatingAdmissionPolicy"
)

// staticSuffix ends the names of configurations read from files.
const staticSuffix = ".static.k8s.io"

// staticReloadInterval is how often the directories are read again
// without a change seen.
const staticReloadInterval = time.Minute

// staticSettle is how long a directory's changes must have stopped
// before it is read again.
const staticSettle = 100 * time.Millisecond

// staticSource is one plugin's directory and what was read from it.
type staticSource struct {
	plugin string
	dir    string
	// config is the webhook configuration resource it holds; policies,
	// if set, the policy kind instead.
	config   schema.GroupResource
	policies *policyKind
	// hash is of the files last loaded (held by the one reloading).
	hash   string
	loaded bool
}

// what names what src holds, for errors.
func (src *staticSource) what() string {
	if src.policies != nil {
		return "policy"
	}
	return "webhook"
}

// staticPart is what one directory gives: webhooks or bound policies.
type staticPart struct {
	hooks    []*hook
	policies []*policy
}

// LoadStatic reads the directories of dirs and makes their configurations
// the ones in force with those of the API; an error names the plugin and
// the file. Call it once, before Load.
func (w *Webhooks) LoadStatic(dirs StaticDirs) error {
	w.static = nil
	for _, src := range []*staticSource{
		{plugin: pluginValidatingWebhook, dir: dirs.ValidatingWebhooks, config: validatingResource},
		{plugin: pluginMutatingWebhook, dir: dirs.MutatingWebhooks, config: mutatingResource},
		{plugin: pluginValidatingPolicy, dir: dirs.ValidatingPolicies, policies: &validatingPolicies},
		{plugin: pluginMutatingPolicy, dir: dirs.MutatingPolicies, policies: &mutatingPolicies},
	} {
		if src.dir == "" {
			continue
		}
		if _, err := w.loadStatic(src); err != nil {
			return fmt.Errorf("admission plugin %q: failed to load static %s manifests from %q: %w", src.plugin, src.what(), src.dir, err)
		}
		w.manifestMetrics.loaded(src.plugin, src.hash, time.Now())
		w.static = append(w.static, src)
	}
	return nil
}

// loadStatic reads src's directory and, if its files changed since the
// last load, makes what they hold the configurations in force (true).
func (w *Webhooks) loadStatic(src *staticSource) (bool, error) {
	docs, hash, err := readManifestDir(src.dir)
	if err != nil {
		return false, err
	}
	if src.loaded && hash == src.hash {
		return false, nil
	}
	part, err := w.readStatic(src, docs)
	if err != nil {
		return false, err
	}
	w.reload.Lock()
	defer w.reload.Unlock()
	switch src.plugin {
	case pluginValidatingWebhook:
		w.staticSet.validating = part.hooks
	case pluginMutatingWebhook:
		w.staticSet.mutating = part.hooks
	case pluginValidatingPolicy:
		w.staticSet.policies = part.policies
	case pluginMutatingPolicy:
		w.staticSet.mutatingPolicies = part.policies
	}
	src.hash, src.loaded = hash, true
	w.publish()
	return true, nil
}

// manifestDoc is one document of a file, as JSON.
type manifestDoc struct {
	file string
	data []byte
}

// readManifestDir reads dir's .yaml, .yml and .json files in name order,
// split into documents, and a hash of their contents ("" for none).
func readManifestDir(dir string) ([]manifestDoc, string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, "", fmt.Errorf("failed to read manifest directory %q: %w", dir, err)
	}
	h := sha256.New()
	hashed := false
	var docs []manifestDoc
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		file := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, "", fmt.Errorf("failed to read file %q: %w", file, err)
		}
		if len(data) == 0 {
			continue
		}
		h.Write(data)
		h.Write([]byte{0})
		hashed = true
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, "", fmt.Errorf("failed to split YAML documents in file %q: %w", file, err)
			}
			if doc = bytes.TrimSpace(doc); len(doc) == 0 {
				continue
			}
			j, err := yaml.YAMLToJSONStrict(doc)
			if err != nil {
				return nil, "", fmt.Errorf("error loading %s: %w", file, err)
			}
			if string(j) == "null" {
				continue // only comments
			}
			docs = append(docs, manifestDoc{file: file, data: j})
		}
	}
	if !hashed {
		return docs, "", nil
	}
	return docs, fmt.Sprintf("sha256:%x", h.Sum(nil)), nil
}

// staticReading is one reading of a directory: the objects of each kind
// by name, and the file each name came from.
type staticReading struct {
	src   *staticSource
	kinds []*registry.Kind // the kinds the directory may hold
	objs  map[*registry.Kind][]*unstructured.Unstructured
	seen  map[*registry.Kind]map[string]string
}

// readStatic reads docs, src's documents, into its webhooks or policies.
func (w *Webhooks) readStatic(src *staticSource, docs []manifestDoc) (staticPart, error) {
	rd := &staticReading{src: src, objs: map[*registry.Kind][]*unstructured.Unstructured{}, seen: map[*registry.Kind]map[string]string{}}
	resources := []schema.GroupResource{src.config}
	if src.policies != nil {
		resources = []schema.GroupResource{src.policies.policies, src.policies.bindings}
	}
	for _, gr := range resources {
		res, ok := w.Registry.Get(gr)
		if !ok {
			return staticPart{}, fmt.Errorf("%s is not served", gr)
		}
		rd.kinds = append(rd.kinds, res.Kind())
	}
	for _, d := range docs {
		if err := rd.accept(d.file, d.data); err != nil {
			return staticPart{}, fmt.Errorf("error loading %s: %w", d.file, err)
		}
	}
	for _, objs := range rd.objs {
		sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	}
	if src.policies == nil {
		return rd.webhooks()
	}
	return rd.boundPolicies()
}

// accept reads one document: an object, a typed list or a v1 List.
func (rd *staticReading) accept(file string, data []byte) error {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return err
	}
	if head.APIVersion == "v1" && head.Kind == "List" {
		for _, item := range head.Items {
			if err := rd.accept(file, item); err != nil {
				return err
			}
		}
		return nil
	}
	if head.APIVersion == admissionregistrationv1.SchemeGroupVersion.String() {
		for _, k := range rd.kinds {
			switch head.Kind {
			case k.Kind:
				return rd.acceptObject(file, k, data)
			case k.ListKind:
				for _, item := range head.Items {
					if err := rd.acceptObject(file, k, item); err != nil {
						return err
					}
				}
				return nil
			}
		}
	}
	if head.APIVersion == "" || head.Kind == "" {
		return errors.New("apiVersion and kind are required")
	}
	var want []string
	for _, k := range rd.kinds {
		want = append(want, k.Kind)
	}
	return fmt.Errorf("unsupported resource type %s, Kind=%s: the %s plugin reads admissionregistration.k8s.io/v1 %s", head.APIVersion, head.Kind, rd.src.plugin, strings.Join(want, " and "))
}

// acceptObject reads one object of kind k and checks what a file's
// object must be beyond what the API checks.
func (rd *staticReading) acceptObject(file string, k *registry.Kind, data []byte) error {
	obj, err := k.ReadManifest(data)
	if err != nil {
		return err
	}
	obj.SetAPIVersion(admissionregistrationv1.SchemeGroupVersion.String())
	obj.SetKind(k.Kind)
	name := obj.GetName()
	if rd.seen[k] == nil {
		rd.seen[k] = map[string]string{}
	}
	if err := staticName(name, file, rd.seen[k]); err != nil {
		return err
	}
	if err := staticConstraints(k, obj, file); err != nil {
		return err
	}
	rd.objs[k] = append(rd.objs[k], obj)
	return nil
}

// staticName checks the name of an object of a file: set, with the
// suffix, and not taken by an earlier one of its kind (seen: names to
// their files).
func staticName(name, file string, seen map[string]string) error {
	if name == "" {
		return fmt.Errorf("resource in file %q must have a name", file)
	}
	if !strings.HasSuffix(name, staticSuffix) {
		return fmt.Errorf("%q in file %q must have a name ending with %q", name, file, staticSuffix)
	}
	if prev, ok := seen[name]; ok {
		return fmt.Errorf("duplicate name %q found in file %q (previously seen in %q)", name, file, prev)
	}
	seen[name] = file
	return nil
}

// staticConstraints refuses what only the API can serve: a webhook
// called through a service (or without a url), a policy's paramKind, a
// binding's paramRef or a policyName without the suffix.
func staticConstraints(k *registry.Kind, obj *unstructured.Unstructured, file string) error {
	name := obj.GetName()
	switch k.Kind {
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration":
		var c admissionregistrationv1.MutatingWebhookConfiguration
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &c); err != nil {
			return err
		}
		for _, wh := range c.Webhooks {
			if wh.ClientConfig.Service != nil {
				return fmt.Errorf("webhook %q in %q (file %q): clientConfig.service is not supported for static manifests; use clientConfig.url instead", wh.Name, name, file)
			}
			if wh.ClientConfig.URL == nil || *wh.ClientConfig.URL == "" {
				return fmt.Errorf("webhook %q in %q (file %q): clientConfig.url is required for static manifests", wh.Name, name, file)
			}
		}
	case "ValidatingAdmissionPolicy", "MutatingAdmissionPolicy":
		if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "paramKind"); ok {
			return fmt.Errorf("%s %q: spec.paramKind is not supported for static manifests", k.Kind, name)
		}
	default: // a binding
		policy, _, _ := unstructured.NestedString(obj.Object, "spec", "policyName")
		if policy == "" {
			return fmt.Errorf("binding %q must reference a policy (spec.policyName)", name)
		}
		if !strings.HasSuffix(policy, staticSuffix) {
			return fmt.Errorf("binding %q: spec.policyName %q must end with %q", name, policy, staticSuffix)
		}
		if _, ok, _ := unstructured.NestedFieldNoCopy(obj.Object, "spec", "paramRef"); ok {
			return fmt.Errorf("binding %q: spec.paramRef is not supported for static manifests", name)
		}
	}
	return nil
}

// webhooks are the reading's webhooks, their configurations by name.
func (rd *staticReading) webhooks() (staticPart, error) {
	var part staticPart
	var errs []error
	for _, obj := range rd.objs[rd.kinds[0]] {
		hooks, err := parse(rd.src.config, obj)
		if err != nil {
			return staticPart{}, fmt.Errorf("%s %s: %w", rd.src.config, obj.GetName(), err)
		}
		for _, h := range hooks {
			if h.match.nsErr != nil {
				errs = append(errs, fmt.Errorf("webhook %q: invalid namespaceSelector: %w", h.name, h.match.nsErr))
			}
			if h.match.objErr != nil {
				errs = append(errs, fmt.Errorf("webhook %q: invalid objectSelector: %w", h.name, h.match.objErr))
			}
		}
		part.hooks = append(part.hooks, hooks...)
	}
	return part, errors.Join(errs...)
}

// boundPolicies are the reading's policies some binding names, by name,
// each with its bindings by name; every binding must name one.
func (rd *staticReading) boundPolicies() (staticPart, error) {
	kind := rd.src.policies
	byName := map[string]*policy{}
	var all []*policy
	for _, obj := range rd.objs[rd.kinds[0]] {
		p, err := kind.parse(obj)
		if err != nil {
			return staticPart{}, fmt.Errorf("failed to compile policy %q: %w", obj.GetName(), err)
		}
		byName[p.name] = p
		all = append(all, p)
	}
	for _, obj := range rd.objs[rd.kinds[1]] {
		name, b, err := kind.bind(obj)
		if err != nil {
			return staticPart{}, fmt.Errorf("%s %s: %w", kind.bindings, obj.GetName(), err)
		}
		p := byName[name]
		if p == nil {
			return staticPart{}, fmt.Errorf("binding %q references policy %q which does not exist in the manifest directory", b.name, name)
		}
		p.bindings = append(p.bindings, b)
	}
	var part staticPart
	for _, p := range all {
		if len(p.bindings) > 0 {
			part.policies = append(part.policies, p)
		}
	}
	return part, nil
}

// WatchStatic reads each directory LoadStatic read again when a file in
// it changes, and every minute (StaticReloadInterval) in any case, as
// upstream's reload loop does, until ctx ends. A directory that cannot be
// watched is polled, and watched again once it can be.
func (w *Webhooks) WatchStatic(ctx context.Context) error {
	if len(w.static) == 0 {
		return nil
	}
	interval := w.StaticReloadInterval
	if interval <= 0 {
		interval = staticReloadInterval
	}
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		w.logError("watching the static admission manifests; polling them every "+interval.String(), err)
		watcher = nil
	} else {
		defer watcher.Close()
		events, watchErrs = watcher.Events, watcher.Errors
	}
	unwatched := map[string]bool{}
	watch := func(dir string) {
		if watcher == nil {
			return
		}
		_ = watcher.Remove(dir)
		if err := watcher.Add(dir); err != nil {
			w.logError("watching a static admission manifest directory", err)
			unwatched[dir] = true
			return
		}
		delete(unwatched, dir)
	}
	dirs := map[string]bool{}
	for _, src := range w.static {
		if !dirs[src.dir] {
			dirs[src.dir] = true
			watch(src.dir)
		}
	}
	// What changed between the first reading and the watch.
	w.reloadStatic("")
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// A directory changed is read once its events have settled: a file
	// written in place is seen once, not half written.
	changed := map[string]bool{}
	settle := time.NewTimer(0)
	<-settle.C
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			for dir := range unwatched {
				watch(dir)
			}
			w.reloadStatic("")
		case e := <-events:
			dir := filepath.Dir(e.Name)
			if dirs[e.Name] {
				// The directory itself went or was replaced.
				dir = e.Name
				if e.Has(fsnotify.Remove) || e.Has(fsnotify.Rename) {
					watch(dir)
				}
			}
			changed[dir] = true
			settle.Reset(staticSettle)
		case <-settle.C:
			for dir := range changed {
				w.reloadStatic(dir)
			}
			clear(changed)
		case err := <-watchErrs:
			w.logError("watching the static admission manifests", err)
			for dir := range dirs {
				unwatched[dir] = true
			}
		}
	}
}

// reloadStatic loads the static sources of dir ("": all) again.
func (w *Webhooks) reloadStatic(dir string) {
	for _, src := range w.static {
		if dir != "" && src.dir != dir {
			continue
		}
		changed, err := w.loadStatic(src)
		switch {
		case err != nil:
			w.logError(fmt.Sprintf("reloading the static admission manifests of %s from %s", src.plugin, src.dir), err)
			w.manifestMetrics.failed(src.plugin, time.Now())
		case changed:
			if w.Logger != nil {
				w.Logger.Info("reloaded the static admission manifests", "plugin", src.plugin, "dir", src.dir)
			}
			w.manifestMetrics.loaded(src.plugin, src.hash, time.Now())
		}
	}
}

func (w *Webhooks) logError(msg string, err error) {
	if w.Logger != nil {
		w.Logger.Error(msg, "err", err)
	}
}
