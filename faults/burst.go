package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"
)

// BurstStep is the user making changes faster than a controller looks:
// its Steps, each a user change (ScaleChange, UserChange, VolumeGrowth,
// Recreate), applied one after another GapMs milliseconds apart, with no
// settle between them (a Recreate in a burst creates the object again as
// soon as its name is free, with no settle of its own). A controller that reads once and acts on what it
// read, or that marks a later change as seen while acting on an earlier
// one, ends in the wrong state (Sieve's unobserved state). A burst of one
// step is that step.
type BurstStep struct {
	Steps []Step
	GapMs int
}

func (BurstStep) Fault() string { return "Burst" }

var _ DesiredStateChange = BurstStep{}

// UserChange marks the step as the user's, not a fault's.
func (BurstStep) UserChange() {}

func (s BurstStep) Apply(ctx context.Context, t Target) error {
	noOps := 0
	for i, st := range s.Steps {
		if i > 0 && s.GapMs > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(s.GapMs) * time.Millisecond):
			}
		}
		err := unsettled(st).Apply(ctx, inBurst{t})
		switch {
		case errors.Is(err, ErrNoOp):
			noOps++
		case err != nil:
			return fmt.Errorf("Burst, change %d %s: %w", i+1, Format(st), err)
		}
	}
	if noOps == len(s.Steps) {
		return noOp("every change of the burst was a no-op")
	}
	return nil
}

// String prints the burst on one line, its steps as plans print them.
func (s BurstStep) String() string {
	return fmt.Sprintf("Burst{Steps: %s, GapMs: %d}", FormatPlan(s.Steps), s.GapMs)
}

// MarshalJSON writes the steps as a scenario file's plan does.
func (s BurstStep) MarshalJSON() ([]byte, error) {
	steps := make([]map[string]any, len(s.Steps))
	for i, st := range s.Steps {
		var err error
		if steps[i], err = EncodeStep(st); err != nil {
			return nil, err
		}
	}
	return json.Marshal(struct {
		Steps []map[string]any `json:"steps"`
		GapMs int              `json:"gapMs"`
	}{steps, s.GapMs})
}

var _ Simplifiable = BurstStep{}

// Simpler: each step dropped (a burst of one is that step). No shorter
// gap: none is simpler than another, and at 0 ms the second change often
// lands before the controller read the first, so a failure that needs
// the race shows less often.
func (s BurstStep) Simpler() []Step {
	var out []Step
	for i := range s.Steps {
		out = append(out, burstOf(slices.Delete(slices.Clone(s.Steps), i, i+1), s.GapMs))
	}
	return out
}

// Net is the burst as it ends: each change left out that later changes
// of the burst make again (every field it sets, of the same fixture, with
// no Recreate or other change of unknown reach between). A
// level-triggered controller ends where Net takes it, however fast the
// changes came: a case that ends elsewhere acted on a change it then
// marked as seen past, or on one it read once. A burst of one change left
// is that change.
func (s BurstStep) Net() Step {
	var kept []Step
	for i, st := range s.Steps {
		if !setAgain(st, s.Steps[i+1:]) {
			kept = append(kept, st)
		}
	}
	return burstOf(kept, s.GapMs)
}

// fieldSetter is a user change that sets fields of one fixture and does
// nothing else.
type fieldSetter interface {
	// setsFields are the fixture's index and the paths of the fields the
	// change sets (a list index as its decimal); ok is false when they
	// are not known (a JSON patch that adds to or removes from a list).
	setsFields() (object int, paths [][]string, ok bool)
}

// setAgain: later changes set every field st sets, of its fixture, before
// any change whose reach is not known.
func setAgain(st Step, later []Step) bool { return setAgainBy(st, later, false) >= 0 }

// setAgainBy is the index in later of the change with which later changes
// have set every field st sets, of its fixture, before any change whose
// reach is not known; -1 when they do not. passFaults: steps that change
// no desired state (faults) are passed over.
func setAgainBy(st Step, later []Step, passFaults bool) int {
	a, ok := st.(fieldSetter)
	if !ok {
		return -1
	}
	object, paths, ok := a.setsFields()
	if !ok || len(paths) == 0 {
		return -1
	}
	for i, l := range later {
		b, ok := l.(fieldSetter)
		_, otherWriter := l.(ConflictingWriterStep)
		switch {
		case !ok && passFaults && !IsUserChange(l) && !otherWriter:
			continue
		case !ok:
			return -1 // a Recreate, a growth, another writer: what follows may build on st
		}
		laterObject, laterPaths, ok := b.setsFields()
		switch {
		case laterObject != object:
			continue
		case !ok:
			return -1
		}
		paths = slices.DeleteFunc(paths, func(p []string) bool {
			return slices.ContainsFunc(laterPaths, func(q []string) bool { return len(q) <= len(p) && slices.Equal(p[:len(q)], q) })
		})
		if len(paths) == 0 {
			return i
		}
	}
	return -1
}

// SetAgain are the user changes of plan that later ones set again (every
// field each sets, of its fixture, as Net leaves them out of a burst),
// the faults between passed over: by index in plan, the index of the
// change with which the fields are all set again. A change whose reach is
// not known (a Recreate, a growth, a burst, another writer's) ends the
// search for the changes before it.
func SetAgain(plan []Step) map[int]int {
	out := map[int]int{}
	for i, st := range plan {
		if j := setAgainBy(st, plan[i+1:], true); j >= 0 {
			out[i] = i + 1 + j
		}
	}
	return out
}

// burstOf is a burst of steps, or the step itself when there is one.
func burstOf(steps []Step, gapMs int) Step {
	if len(steps) == 1 {
		return steps[0]
	}
	return BurstStep{Steps: steps, GapMs: gapMs}
}

// inBurst is the target of a burst's changes: a change names itself
// within the burst's step, which is not named.
type inBurst struct{ Target }

func (inBurst) NameStep(Step) {}

// unsettled is a change as a burst applies it: a Recreate with no settle
// between its delete and its create.
func unsettled(s Step) Step {
	if r, ok := s.(RecreateStep); ok {
		r.Settle = false
		return r
	}
	return s
}

// SplitBursts are the plans in which one burst's steps come one after
// another as steps of their own, each followed by a settle: the shrinker
// tries them, since a failure that needs no burst is the simpler one.
func SplitBursts(plan []Step) [][]Step {
	var out [][]Step
	for i, st := range plan {
		if b, ok := st.(BurstStep); ok {
			out = append(out, slices.Concat(plan[:i], b.Steps, plan[i+1:]))
		}
	}
	return out
}

// Burst draws bursts of 2 to 4 changes from the user-change faults of,
// 0 to 100 ms apart. With none, of is ScaleChange with its defaults.
func Burst(of ...Fault) Fault {
	if len(of) == 0 {
		of = []Fault{ScaleChange(ScaleOptions{})}
	}
	return burst{of: of}
}

type burst struct{ of []Fault }

func (burst) Name() string { return BurstStep{}.Fault() }

var _ Validator = burst{}

// Validate: each fault of the burst draws user changes, and none is a
// burst itself.
func (f burst) Validate() error {
	var errs []error
	for _, g := range f.of {
		step := g.Steps(Config{Nodes: 3, Fixtures: 1}).Example(0)
		_, nested := step.(BurstStep)
		if !IsUserChange(step) || nested {
			errs = append(errs, fmt.Errorf("Burst: %s is not a user change; a burst holds user changes (ScaleChange, UserChange, VolumeGrowth, Recreate)", g.Name()))
		}
		if v, ok := g.(Validator); ok {
			if err := v.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("Burst: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

func (f burst) Steps(c Config) *rapid.Generator[Step] {
	gens := make([]*rapid.Generator[Step], len(f.of))
	for i, g := range f.of {
		gens[i] = g.Steps(c)
	}
	changes := rapid.SliceOfN(rapid.Map(rapid.OneOf(gens...), unsettled), 2, 4)
	return rapid.Custom(func(t *rapid.T) Step {
		return BurstStep{Steps: changes.Draw(t, "changes"), GapMs: amountIn(t, 0, 100, "gapMs")}
	})
}

var _ Aimer = burst{}

// Aims: two changes of each of its faults, a burst's worth apart (see
// aimedGapMs), of values that differ when the fault draws more than one.
func (f burst) Aims(c Config) []*rapid.Generator[Step] {
	var out []*rapid.Generator[Step]
	for _, g := range f.of {
		changes := rapid.Map(g.Steps(c), unsettled)
		out = append(out, rapid.Custom(func(t *rapid.T) Step {
			first := changes.Draw(t, "first")
			second := changes.Draw(t, "second")
			for try := 0; try < 3 && Format(second) == Format(first); try++ {
				second = changes.Draw(t, "second")
			}
			return BurstStep{Steps: []Step{first, second}, GapMs: aimedGapMs(t)}
		}))
	}
	return out
}

// aimedGapsMs are the gaps of an aimed burst, on a ratio scale. A change
// marked seen while an earlier one is acted on needs the second change to
// land after the controller read the first and before it is done with
// it; how soon it reads grows with its queue and the machine's load, from
// tens of milliseconds idle to hundreds beside fifteen other cases on two
// cores. Gaps of 20 to 100 ms reached only the quick readers.
var aimedGapsMs = [8]int{20, 30, 50, 80, 130, 200, 320, 500}

// aimedGapMs draws one of aimedGapsMs, each as often.
func aimedGapMs(t *rapid.T) int { return aimedGapsMs[fairIndex(t, len(aimedGapsMs), "gapMs")] }

// Decode reads a burst's steps with its faults and the catalog's.
func (f burst) Decode(b []byte) (Step, error) {
	var fields struct {
		Steps []map[string]any `json:"steps"`
		GapMs int              `json:"gapMs"`
	}
	if err := yaml.UnmarshalStrict(b, &fields); err != nil {
		return nil, fmt.Errorf("reading a Burst step: %w", err)
	}
	if len(fields.Steps) == 0 {
		return nil, errors.New("reading a Burst step: it has no steps; list them as a plan's, e.g. steps: [{fault: ScaleChange, object: 0, field: spec.replicas, value: 1}]")
	}
	known := append(slices.Clone(f.of), Catalog()...)
	steps := make([]Step, len(fields.Steps))
	for i, m := range fields.Steps {
		st, err := DecodeStep(m, known)
		if err != nil {
			return nil, fmt.Errorf("reading a Burst step, change %d: %w", i+1, err)
		}
		if _, nested := st.(BurstStep); nested || !IsUserChange(st) {
			return nil, fmt.Errorf("reading a Burst step, change %d: %s is not a user change; a burst holds user changes", i+1, strings.TrimSpace(Format(st)))
		}
		steps[i] = unsettled(st)
	}
	return burstOf(steps, fields.GapMs), nil
}
