package properties

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Memo carries what properties found on a case's earlier traces over to
// its later, longer ones: a case is judged again and again as its trace
// grows, and a safety property that checked every state each time would
// cost the square of the trace's length (a controller that churns pods
// records thousands of states). The harness gives the traces of one case
// one Memo; a nil Memo remembers nothing.
type Memo struct {
	mu   sync.Mutex
	held map[string][]stateID // by property: the leading states found to hold
}

// stateID tells a state apart from one built again in its place: the
// recorder rebuilds the states after a change that arrived out of order,
// with new object lists.
type stateID struct {
	objects **unstructured.Unstructured
	n       int
}

func idOf(s State) stateID {
	if len(s.Objects) == 0 {
		return stateID{}
	}
	return stateID{objects: &s.Objects[0], n: len(s.Objects)}
}

// heldPrefix returns how many of the leading states property found to
// hold on an earlier trace, states that this trace still has as they were.
func (m *Memo) heldPrefix(property string, states []State) int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ids := m.held[property]
	n := 0
	for n < len(ids) && n < len(states) && ids[n] == idOf(states[n]) {
		n++
	}
	return n
}

// remember records that property holds on the leading states.
func (m *Memo) remember(property string, states []State) {
	if m == nil {
		return
	}
	ids := make([]stateID, len(states))
	for i, s := range states {
		ids[i] = idOf(s)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held = map[string][]stateID{}
	}
	m.held[property] = ids
}
