package properties

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// times are the evidence's marks' times, as offsets from t0.
func times(e Evidence) []time.Duration {
	var out []time.Duration
	for _, m := range e.Marks {
		out = append(out, m.At.Sub(t0))
	}
	return out
}

// spans are the evidence's spans, as offset pairs from t0.
func spans(e Evidence) [][2]time.Duration {
	var out [][2]time.Duration
	for _, sp := range e.Spans {
		out = append(out, [2]time.Duration{sp.From.Sub(t0), sp.To.Sub(t0)})
	}
	return out
}

// TestEvidence: each failure names what it rests on: a streak's attempts
// and the waits between them, the state a predicate went false on and how
// long it stayed false, a fight's changes of hands, the writes after the
// heal, a Func's own.
func TestEvidence(t *testing.T) {
	const ms = time.Millisecond
	t.Run("bounded-backoff", func(t *testing.T) {
		var rs []Reconcile
		for d := time.Duration(0); d < 100*ms; d += 10 * ms {
			rs = append(rs, Reconcile{At: at(d), Key: "ns/web", Err: "conflict"})
		}
		rs = append(rs, Reconcile{At: at(200 * ms), Key: "ns/web"})
		v := BoundedBackoff(BackoffOptions{}).Check(&Trace{Start: t0, Reconciles: rs, End: at(s)})
		require.Error(t, v.Err)
		require.Equal(t, []time.Duration{0, 10 * ms, 20 * ms, 30 * ms, 40 * ms, 50 * ms, 60 * ms, 70 * ms, 80 * ms, 90 * ms}, times(v.Evidence))
		require.Len(t, v.Evidence.Spans, 9)
		require.Equal(t, [2]time.Duration{0, 10 * ms}, spans(v.Evidence)[0])
		require.Equal(t, "waited 10ms", v.Evidence.Spans[0].Label)
		require.Equal(t, "failed attempt 1 of 10 at reconcile of web", v.Evidence.Marks[0].Label)
	})
	t.Run("always", func(t *testing.T) {
		// Four ready from the second state to the fourth.
		p := Always("never-overshoots", func(st State) error {
			if allReady(st) == nil || st.Get("App", "web") == nil {
				return nil
			}
			return errors.New("not ready")
		})
		v := p.Check(&Trace{Start: t0, States: replicaStates(3, 1, 2, 3, 3), End: at(5 * s)})
		require.Error(t, v.Err)
		require.Equal(t, []time.Duration{1 * s}, times(v.Evidence))
		require.Equal(t, [][2]time.Duration{{1 * s, 3 * s}}, spans(v.Evidence), "false from the second state until the fourth")
		require.Equal(t, "false for 2s", v.Evidence.Spans[0].Label)
	})
	t.Run("converges", func(t *testing.T) {
		p := Converges("app-ready", allReady, ConvergeOptions{Within: 3 * s, Stable: 1 * s})
		// Ready, broken at 2 s, after the heal at 1 s, and never again.
		v := p.Check(&Trace{Start: t0, Healed: at(1 * s), States: replicaStates(3, 3, 2, 2, 2, 2), End: at(6 * s), Final: true})
		require.Error(t, v.Err)
		require.Equal(t, []time.Duration{2 * s}, times(v.Evidence))
		require.Equal(t, [][2]time.Duration{{2 * s, 6 * s}}, spans(v.Evidence))
		require.Equal(t, "false for 4s (still false at the end)", v.Evidence.Spans[0].Label)
		// Converged late: false from the heal until 5 s.
		v = p.Check(&Trace{Start: t0, Healed: at(1 * s), States: replicaStates(1, 1, 2, 2, 2, 3, 3), End: at(7 * s), Final: true})
		require.Error(t, v.Err)
		require.Equal(t, [][2]time.Duration{{1 * s, 5 * s}}, spans(v.Evidence))
	})
	t.Run("no-fight-loop", func(t *testing.T) {
		var ws []Write
		for i := range 6 {
			ws = append(ws, writes([]string{"a", "b"}[i%2], "spec.replicas", time.Duration(i)*s)...)
		}
		v := NoFightLoop(FightOptions{}).Check(&Trace{Start: t0, Writes: ws, End: at(6 * s)})
		require.Error(t, v.Err)
		require.Equal(t, []time.Duration{1 * s, 2 * s, 3 * s, 4 * s}, times(v.Evidence), "the changes of hands")
		require.Equal(t, "b takes spec.replicas", v.Evidence.Marks[0].Label)
		require.Equal(t, [][2]time.Duration{{1 * s, 4 * s}}, spans(v.Evidence))
	})
	t.Run("quiescent", func(t *testing.T) {
		tr := &Trace{Start: t0, Healed: at(1 * s), End: at(10 * s), Final: true,
			Writes: writes("app-controller", "status.lastReconcileTime", 0, 2*s, 4*s, 6*s, 8*s)}
		v := Quiescent(QuiesceOptions{Window: 3 * s, Within: 5 * s}).Check(tr)
		require.Error(t, v.Err)
		require.Equal(t, []time.Duration{2 * s, 4 * s, 6 * s, 8 * s}, times(v.Evidence), "the writes after the heal")
		require.Equal(t, [][2]time.Duration{{1 * s, 8 * s}}, spans(v.Evidence))
	})
	t.Run("func", func(t *testing.T) {
		e := Evidence{Marks: []Mark{{At: at(3 * s), Label: "claim data-db-0 gone"}}}
		p := Func("claims-kept", func(*Trace) error { return WithEvidence(errors.New("claims deleted: data-db-0"), e) })
		v := p.Check(&Trace{Start: t0, End: at(5 * s), Final: true})
		require.EqualError(t, v.Err, "claims-kept: claims deleted: data-db-0")
		require.Equal(t, e, v.Evidence)
	})
}
