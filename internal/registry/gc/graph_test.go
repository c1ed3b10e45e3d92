package gc

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var modelGR = schema.GroupResource{Resource: "configmaps"}

// modelNode is object i of the model: a ConfigMap named "o<i>" with uid
// "u<i>-<incarnation>" (a recreated object is another owner).
func modelNode(i, incarnation int, owners []metav1.OwnerReference, deleting, orphan, foreground bool) *node {
	return &node{
		id:     newIdentity(modelGR, "ConfigMap", "default", fmt.Sprintf("o%d", i), types.UID(fmt.Sprintf("u%d-%d", i, incarnation))),
		owners: owners, deleting: deleting, orphan: orphan, foreground: foreground,
	}
}

func modelRef(n *node) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: n.id.name, UID: n.id.uid}
}

// TestSparseGraphNeverMissesAttention drives a dense graph and a sparse
// one through the same random events (objects created, changed, deleted,
// relisted; owners learned from reads that may be stale by the time they
// are learned, as a worker's are) and checks after each event that:
//   - the sparse graph asks for attention to every object the dense one
//     asks for (it may ask for more: an owner it does not know);
//   - every node it holds is of an object that exists, and every object
//     with owners, or being deleted with a policy, has its node.
func TestSparseGraphNeverMissesAttention(t *testing.T) {
	const objects, steps = 10, 400
	for seed := range uint64(300) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		dense, sparse := newGraph(), newGraph()
		sparse.sweep()
		live := map[int]*node{} // the store
		incarnation := map[int]int{}
		type pendingLearn struct {
			n     *node
			epoch uint64
		}
		var pending []pendingLearn
		check := func(step int, what string, d, s []types.UID) {
			t.Helper()
			for _, u := range d {
				if !slices.Contains(s, u) {
					t.Fatalf("seed %d step %d (%s): the dense graph asks for %s, the sparse one does not (%v vs %v)", seed, step, what, u, d, s)
				}
			}
			sparse.mu.Lock()
			defer sparse.mu.Unlock()
			for u, n := range sparse.mu.nodes {
				if l := live[nameIndex(n)]; l == nil || l.id.uid != u {
					t.Fatalf("seed %d step %d (%s): the sparse graph holds %s, which does not exist", seed, step, what, u)
				}
			}
			for _, n := range live {
				if (len(n.owners) > 0 || n.orphaning() || n.deletingDependents()) && sparse.mu.nodes[n.id.uid] == nil {
					t.Fatalf("seed %d step %d (%s): the sparse graph lacks %s", seed, step, what, n.id.uid)
				}
			}
		}
		for step := range steps {
			i := rnd.IntN(objects)
			switch op := rnd.IntN(10); {
			case op < 5: // create or change object i
				if live[i] == nil {
					incarnation[i]++
				}
				var owners []metav1.OwnerReference
				for range rnd.IntN(3) {
					if o := live[rnd.IntN(objects)]; o != nil {
						owners = append(owners, modelRef(o))
					} else if rnd.IntN(2) == 0 { // an owner that is gone
						owners = append(owners, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "gone"})
					}
				}
				deleting := rnd.IntN(4) == 0
				n := modelNode(i, incarnation[i], owners, deleting, deleting && rnd.IntN(2) == 0, deleting && rnd.IntN(2) == 0)
				live[i] = n
				check(step, "observe "+string(n.id.uid), dense.observe(n), sparse.observe(n))
			case op < 7: // delete object i
				if n := live[i]; n != nil {
					delete(live, i)
					check(step, "forget "+string(n.id.uid), dense.forget(n.id.uid), sparse.forget(n.id.uid))
				}
			case op < 8: // a worker reads object i (it learns it later)
				if n := live[i]; n != nil {
					pending = append(pending, pendingLearn{n: n, epoch: sparse.epochNow()})
				}
			case op < 9: // the learns come in
				for _, p := range pending {
					sparse.learn(p.n, p.epoch)
				}
				pending = pending[:0]
				check(step, "learn", nil, nil)
			default:
				if live[i] != nil && rnd.IntN(2) == 0 {
					// Deleted while the watch was down: the graphs hear
					// of it only from the relist that follows.
					delete(live, i)
				}
				var nodes []*node
				for _, n := range live {
					nodes = append(nodes, n)
				}
				check(step, "replace", dense.replace(modelGR, nodes), sparse.replace(modelGR, nodes))
			}
		}
	}
}

// nameIndex is i of a model node named "o<i>".
func nameIndex(n *node) int {
	var i int
	fmt.Sscanf(n.id.name, "o%d", &i)
	return i
}

// TestSparseGraphLearnsAndPrunes walks the sparse graph's life of one
// owner: unknown until a dependent's read teaches it, then known, and
// dropped once no dependent names it.
func TestSparseGraphLearnsAndPrunes(t *testing.T) {
	g := newGraph()
	owner := modelNode(0, 1, nil, false, false, false)
	g.observe(owner)
	if g.get(owner.id.uid) == nil {
		t.Fatal("a dense graph does not hold an object with no owner")
	}
	g.sweep()
	if g.get(owner.id.uid) != nil {
		t.Fatal("sweep kept an object in no ownership")
	}
	dep := modelNode(1, 1, []metav1.OwnerReference{modelRef(owner)}, false, false, false)
	if got := g.observe(dep); !slices.Contains(got, dep.id.uid) {
		t.Fatalf("a dependent of an owner the graph does not know gets no attention: %v", got)
	}
	// A read before a deletion the graph saw is not learned.
	epoch := g.epochNow()
	g.forget("some-other-object")
	g.learn(owner, epoch)
	if g.get(owner.id.uid) != nil {
		t.Fatal("learned an owner from a read older than a deletion")
	}
	g.learn(owner, g.epochNow())
	if g.get(owner.id.uid) == nil {
		t.Fatal("did not learn the owner")
	}
	if got := g.observe(dep); len(got) != 0 {
		t.Fatalf("a dependent of a known owner gets attention: %v", got)
	}
	// The dependent drops its reference: the owner's node goes.
	g.observe(modelNode(1, 1, nil, false, false, false))
	if g.get(owner.id.uid) != nil || g.get(dep.id.uid) != nil {
		t.Fatal("nodes kept after the last reference went")
	}
	// An owner the graph never learned is deleted: its dependents still
	// get attention.
	g.observe(dep)
	if got := g.forget(owner.id.uid); !slices.Equal(got, []types.UID{dep.id.uid}) {
		t.Fatalf("forgetting an owner never learned: %v, want its dependent", got)
	}
	// An owner learned, then its dependent deleted: the owner goes too.
	g.learn(owner, g.epochNow())
	if g.get(owner.id.uid) == nil {
		t.Fatal("did not learn the owner again")
	}
	g.forget(dep.id.uid)
	if g.get(owner.id.uid) != nil {
		t.Fatal("the owner's node outlived its last dependent")
	}
}
