package gc

import (
	"slices"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kplane-dev/kplane/internal/registry"
)

// identity names one object: its resource, namespace, name and uid. The
// graph holds one for every object of every resource, so the resource
// and kind, shared by all of a resource's objects, are one interned
// handle, and so is the namespace (8 bytes each).
type identity struct {
	res  unique.Handle[kindOf]
	ns   unique.Handle[string]
	name string
	uid  types.UID
}

// kindOf is a resource and its kind.
type kindOf struct {
	gr   schema.GroupResource
	kind string
}

func newIdentity(gr schema.GroupResource, kind, namespace, name string, uid types.UID) identity {
	return identity{res: unique.Make(kindOf{gr, kind}), ns: unique.Make(namespace), name: name, uid: uid}
}

func (id identity) gr() schema.GroupResource { return id.res.Value().gr }
func (id identity) kind() string             { return id.res.Value().kind }
func (id identity) namespace() string        { return id.ns.Value() }

// node is what the graph knows of one object, as last observed. Nodes
// are never changed once in the graph (an update replaces the node), so
// they can be handed out without copying.
type node struct {
	id     identity
	owners []metav1.OwnerReference
	// deleting: the object has a deletionTimestamp. orphan and foreground:
	// it carries the `orphan` or `foregroundDeletion` finalizer.
	deleting, orphan, foreground bool
}

func newNode(k *registry.Kind, obj metav1.Object) *node {
	n := &node{
		id:       newIdentity(k.GroupResource(), k.Kind, obj.GetNamespace(), obj.GetName(), obj.GetUID()),
		owners:   obj.GetOwnerReferences(),
		deleting: obj.GetDeletionTimestamp() != nil,
	}
	for _, f := range obj.GetFinalizers() {
		switch f {
		case metav1.FinalizerOrphanDependents:
			n.orphan = true
		case metav1.FinalizerDeleteDependents:
			n.foreground = true
		}
	}
	return n
}

// orphaning: being deleted with the Orphan policy; the collector must
// strip its dependents' references to it, then remove the finalizer.
func (n *node) orphaning() bool { return n.deleting && n.orphan }

// deletingDependents: being deleted with the Foreground policy; it goes
// once no dependent blocks it (upstream's "waitingForDependentsDeletion").
func (n *node) deletingDependents() bool { return n.deleting && n.foreground }

// owns reports whether ref, held by dependent dep, really names owner: the
// same uid, group, kind and name, and, for a namespaced owner, the
// dependent's namespace (ownerReferences never cross namespaces, so such
// a reference names an owner that does not exist).
func owns(owner, dep *node, ref metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && ref.UID == owner.id.uid && ref.Kind == owner.id.kind() && gv.Group == owner.id.gr().Group &&
		ref.Name == owner.id.name && (owner.id.namespace() == "" || owner.id.ns == dep.id.ns)
}

// dependent is a node and its reference to some owner.
type dependent struct {
	node *node
	ref  metav1.OwnerReference
}

// graph is the collector's view of every object of every resource it
// watches: the objects by uid, and for each uid the objects whose
// ownerReferences name it, whether or not an object with that uid is
// known (an owner that is gone, or not observed yet).
//
// Example: a ConfigMap c (uid C) owned by a Foo f (uid F). nodes holds C
// and F, dependents[F] = {C}. When f is deleted its node goes but
// dependents[F] stays until c is gone or drops the reference, and the
// deletion queues C, whose owner is then checked and found absent.
//
// Every change returns the uids the collector must look at; the graph
// itself never calls out.
//
// Sparse: the graph starts dense, with a node for every object, while
// the first lists come in (so that every owner listed is known when its
// dependents are, in whatever order the resources are listed). Then
// sweep makes it sparse: from then on it keeps only the nodes that take
// part in ownership (keepLocked): objects with owners, owners being
// deleted with the Orphan or Foreground policy, and objects some
// dependent names. Most objects are none of these, and a node is ~190
// bytes per object. An owner the graph holds no node for is unknown,
// not gone: its dependent gets the collector's attention, whose live
// read of the owner then teaches the graph its node (learn), unless a
// deletion or relist happened meanwhile (epoch), which could make that
// read stale.
//
// Lock order: mu only; no I/O under it.
type graph struct {
	mu struct {
		sync.Mutex
		nodes      map[types.UID]*node
		dependents map[types.UID]*uidSet
		// No index by resource: only relists and dropped resources ask,
		// rarely, and a walk of nodes serves them; an index cost a map
		// insert per observed object and ~50 bytes per object.

		sparse bool
		// epoch counts forgets and relists: a node read from the store
		// is learned only if none happened since the read began.
		epoch uint64
	}
}

func newGraph() *graph {
	g := &graph{}
	g.mu.nodes = map[types.UID]*node{}
	g.mu.dependents = map[types.UID]*uidSet{}
	return g
}

func (g *graph) get(u types.UID) *node {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.nodes[u]
}

// observe records n (created or changed) and returns what to look at.
func (g *graph) observe(n *node) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.observeLocked(n)
}

func (g *graph) observeLocked(n *node) []types.UID {
	old := g.mu.nodes[n.id.uid]
	if old != nil {
		g.unlinkLocked(old)
	}
	for _, ref := range n.owners {
		deps := g.mu.dependents[ref.UID]
		if deps == nil {
			deps = &uidSet{}
			g.mu.dependents[ref.UID] = deps
		}
		deps.add(n.id.uid)
	}
	if g.keepLocked(n) {
		g.mu.nodes[n.id.uid] = n
	} else if old != nil {
		delete(g.mu.nodes, n.id.uid)
	}
	out := g.attentionLocked(n)
	// An owner deleting its dependents in the foreground looks again
	// whenever one of them changes: a reference or its blockOwnerDeletion
	// may have gone.
	if old != nil {
		out = append(out, g.waitingOwnersLocked(old)...)
		g.pruneOwnersLocked(old)
	}
	return append(out, g.waitingOwnersLocked(n)...)
}

// keepLocked says whether n's node belongs in the graph: always while it
// is dense; once sparse, if n takes part in ownership.
func (g *graph) keepLocked(n *node) bool {
	return !g.mu.sparse || len(n.owners) > 0 || n.orphaning() || n.deletingDependents() || g.mu.dependents[n.id.uid] != nil
}

// pruneOwnersLocked drops the nodes of old's owners that nothing keeps
// any more (old's references are gone or replaced).
func (g *graph) pruneOwnersLocked(old *node) {
	if !g.mu.sparse {
		return
	}
	for _, ref := range old.owners {
		if o := g.mu.nodes[ref.UID]; o != nil && !g.keepLocked(o) {
			delete(g.mu.nodes, ref.UID)
		}
	}
}

// sweep makes the graph sparse, once every resource's first list is in:
// it drops the nodes no ownership needs.
func (g *graph) sweep() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.sparse = true
	// A new map: a map's table does not shrink as its entries go.
	kept := make(map[types.UID]*node)
	for u, n := range g.mu.nodes {
		if g.keepLocked(n) {
			kept[u] = n
		}
	}
	g.mu.nodes = kept
}

// epochNow is the epoch to pass to learn, taken before the read.
func (g *graph) epochNow() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.epoch
}

// learn adds the node of an owner read from the store, when the graph
// has none and some dependent names it, and nothing was forgotten or
// relisted since epoch (the read might predate a deletion the graph has
// already seen). An owner with owners of its own, or being deleted with
// a policy, is left to its watch event: the graph keeps such nodes when
// it observes them.
func (g *graph) learn(n *node, epoch uint64) {
	if len(n.owners) > 0 || n.deleting {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.mu.sparse || g.mu.epoch != epoch || g.mu.nodes[n.id.uid] != nil || g.mu.dependents[n.id.uid] == nil {
		return
	}
	g.mu.nodes[n.id.uid] = n
}

// forget removes the object u (deleted) and returns what to look at: its
// dependents, whose owner is gone, and its owners that wait for it.
func (g *graph) forget(u types.UID) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.forgetLocked(u)
}

func (g *graph) forgetLocked(u types.UID) []types.UID {
	g.mu.epoch++
	n := g.mu.nodes[u]
	if n != nil {
		g.unlinkLocked(n)
		delete(g.mu.nodes, u)
	}
	// The dependents look again, whether or not the graph knew the owner
	// (a sparse graph may not have learned it yet).
	var out []types.UID
	if deps := g.mu.dependents[u]; deps != nil {
		out = deps.appendTo(out)
	}
	if n != nil {
		out = append(out, g.waitingOwnersLocked(n)...)
		g.pruneOwnersLocked(n)
	}
	return out
}

// replace makes nodes the whole content of resource gr (after a list):
// the nodes observed before and absent now were deleted meanwhile.
func (g *graph) replace(gr schema.GroupResource, nodes []*node) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.mu.epoch++ // an owner learned from a read before the list may be gone
	seen := make(map[types.UID]bool, len(nodes))
	var out []types.UID
	for _, n := range nodes {
		seen[n.id.uid] = true
		out = append(out, g.observeLocked(n)...)
	}
	for u, n := range g.mu.nodes {
		if n.id.gr() == gr && !seen[u] {
			out = append(out, g.forgetLocked(u)...)
		}
	}
	if g.mu.sparse {
		// Owners the graph never learned may have been of gr and gone
		// while the watch was down, unseen: their dependents look again
		// (their resource is not known; a few extra reads, on a relist).
		for u, deps := range g.mu.dependents {
			if g.mu.nodes[u] == nil && !seen[u] {
				out = deps.appendTo(out)
			}
		}
	}
	return out
}

// drop forgets every object of resource gr, which is no longer served.
// Its objects' dependents are looked at again: with their owner's kind
// unknown, they are kept.
func (g *graph) drop(gr schema.GroupResource) []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []types.UID
	for u, n := range g.mu.nodes {
		if n.id.gr() == gr {
			out = append(out, g.forgetLocked(u)...)
		}
	}
	return out
}

// all returns what to look at in the whole graph: after the first list
// of every resource, when every owner that exists is known.
func (g *graph) all() []types.UID {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []types.UID
	for _, n := range g.mu.nodes {
		out = append(out, g.attentionLocked(n)...)
	}
	return out
}

// dependentsOf returns the known dependents of owner, each with its
// reference to it.
func (g *graph) dependentsOf(owner *node) []dependent {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.dependentsLocked(owner)
}

func (g *graph) dependentsLocked(owner *node) []dependent {
	var out []dependent
	deps := g.mu.dependents[owner.id.uid]
	if deps == nil {
		return nil
	}
	for _, d := range deps.appendTo(nil) {
		dn := g.mu.nodes[d]
		if dn == nil {
			continue
		}
		for _, ref := range dn.owners {
			if owns(owner, dn, ref) {
				out = append(out, dependent{node: dn, ref: ref})
				break
			}
		}
	}
	return out
}

func (g *graph) unlinkLocked(n *node) {
	for _, ref := range n.owners {
		if deps := g.mu.dependents[ref.UID]; deps != nil {
			deps.remove(n.id.uid)
			if deps.len() == 0 {
				delete(g.mu.dependents, ref.UID)
			}
		}
	}
}

// attentionLocked says whether n needs the collector, as observed:
//   - it is being deleted with the Orphan or Foreground policy (then its
//     dependents need it too, to be deleted first);
//   - it is not being deleted and one of its owners is not a known object
//     (gone, or with another uid, kind or namespace), or is deleting its
//     dependents in the foreground.
func (g *graph) attentionLocked(n *node) []types.UID {
	var out []types.UID
	if n.orphaning() || n.deletingDependents() {
		out = append(out, n.id.uid)
	}
	if n.deletingDependents() {
		for _, d := range g.dependentsLocked(n) {
			out = append(out, d.node.id.uid)
		}
	}
	if n.deleting {
		return out
	}
	for _, ref := range n.owners {
		o := g.mu.nodes[ref.UID]
		if o == nil || !owns(o, n, ref) || o.deletingDependents() {
			return append(out, n.id.uid)
		}
	}
	return out
}

// waitingOwnersLocked returns n's owners that delete their dependents in
// the foreground.
func (g *graph) waitingOwnersLocked(n *node) []types.UID {
	var out []types.UID
	for _, ref := range n.owners {
		if o := g.mu.nodes[ref.UID]; o != nil && o.deletingDependents() {
			out = append(out, o.id.uid)
		}
	}
	return out
}

// uidSet is a set of uids: a slice while small (most owners have a few
// dependents: 16 bytes each, where a map of one costs ~200), a map past
// fewUIDs.
type uidSet struct {
	few  []types.UID
	many map[types.UID]struct{}
}

const fewUIDs = 16

func (s *uidSet) add(u types.UID) {
	switch {
	case s.many != nil:
		s.many[u] = struct{}{}
	case slices.Contains(s.few, u):
	case len(s.few) < fewUIDs:
		s.few = append(s.few, u)
	default:
		s.many = make(map[types.UID]struct{}, 2*fewUIDs)
		for _, v := range s.few {
			s.many[v] = struct{}{}
		}
		s.many[u] = struct{}{}
		s.few = nil
	}
}

func (s *uidSet) remove(u types.UID) {
	if s.many != nil {
		delete(s.many, u)
		return
	}
	if i := slices.Index(s.few, u); i >= 0 {
		last := len(s.few) - 1
		s.few[i] = s.few[last]
		s.few[last] = ""
		s.few = s.few[:last]
	}
}

func (s *uidSet) len() int {
	if s.many != nil {
		return len(s.many)
	}
	return len(s.few)
}

// appendTo appends the set's uids to out.
func (s *uidSet) appendTo(out []types.UID) []types.UID {
	if s.many == nil {
		return append(out, s.few...)
	}
	for u := range s.many {
		out = append(out, u)
	}
	return out
}
