package lifecycle

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/properties"
)

// Spec is harness.Spec: see its documentation there.
type Spec struct {
	// Controller is the controller under test, started fresh for every
	// case (see Manager and SetupWithManager).
	Controller Controller
	// Fixtures returns the user's objects for a case's namespace.
	Fixtures func(namespace string) []client.Object
	// Faults are drawn from. Nil means faults.Default().
	Faults []faults.Fault
	// Properties must hold on every case.
	Properties []properties.Property
	// Scheme knows the fixtures' types. Nil means client-go's scheme.
	Scheme *runtime.Scheme
	// Watch names kinds to observe besides the fixtures' kinds, Pods and
	// PersistentVolumeClaims, such as the controller's other children.
	// Only the case's namespace is observed: PersistentVolumes, which are
	// cluster-scoped, are not recorded (a claim's status shows its
	// volume's binding and capacity).
	Watch []schema.GroupVersionKind
	// Nodes is how many simulated nodes each case gets. Zero means 3.
	Nodes int
	// MaxSteps bounds a drawn plan. Zero means 5.
	MaxSteps int
	// SettleQuiet is how long the namespace must see no write (a write
	// of the controller that the harness refused counts), with the
	// controller idle and no pod in its grace period on a live node, for
	// the system to count as settled between steps. Zero means 500 ms.
	SettleQuiet time.Duration
	// SettleCap bounds each wait for settling. Zero means 10 s.
	SettleCap time.Duration
	// Setup bounds the wait for the controller to act on the fixtures,
	// for the goal of every property that has one (properties.Goal:
	// Converges's predicate) to hold, and for the system to settle before
	// the first step. Zero means 30 s.
	Setup time.Duration
	// Ready, when set, tells when the controller has taken charge of the
	// fixtures: setup waits until it holds (or the controller's first
	// write), then settles. Nil: setup waits for the controller's first
	// write of its own kinds (a lease renewal or an Event does not count):
	// leader election, a cache sync or a slow start must not pass for a
	// settled system, with the steps then coming before the controller
	// ever acted.
	Ready properties.Predicate
}

func (s Spec) withDefaults() Spec {
	if s.Faults == nil {
		s.Faults = faults.Default()
	}
	if s.Scheme == nil {
		s.Scheme = clientgoscheme.Scheme
	}
	if s.Nodes == 0 {
		s.Nodes = 3
	}
	if s.MaxSteps == 0 {
		s.MaxSteps = 5
	}
	if s.SettleQuiet == 0 {
		s.SettleQuiet = 500 * time.Millisecond
	}
	if s.SettleCap == 0 {
		s.SettleCap = 10 * time.Second
	}
	if s.Setup == 0 {
		s.Setup = 30 * time.Second
	}
	return s
}

func (s Spec) validate() error {
	var errs []error
	if s.Controller == nil {
		errs = append(errs, errors.New("Spec.Controller is nil: give the controller under test, e.g. harness.Manager(func(mgr, opts) error { return r.SetupWithManager(mgr, opts) })"))
	}
	if v, ok := s.Controller.(interface{ validate() error }); ok {
		if err := v.validate(); err != nil {
			errs = append(errs, fmt.Errorf("Spec.Controller: %w", err))
		}
	}
	if s.Fixtures == nil {
		errs = append(errs, errors.New("Spec.Fixtures is nil: give a func(namespace) []client.Object that returns the objects the controller acts on"))
	}
	if len(s.Properties) == 0 {
		errs = append(errs, errors.New("Spec.Properties is empty: a check with no property cannot fail; add properties.Converges(...) and others"))
	}
	if s.Nodes < 1 {
		errs = append(errs, fmt.Errorf("Spec.Nodes is %d: a case needs at least one node", s.Nodes))
	}
	if s.MaxSteps < 1 {
		errs = append(errs, fmt.Errorf("Spec.MaxSteps is %d: a plan has at least one step", s.MaxSteps))
	}
	if len(s.Faults) == 0 {
		errs = append(errs, errors.New("Spec.Faults is empty: leave it nil for faults.Default(), or list faults"))
	}
	for _, f := range s.Faults {
		// Faults with options check them here, not at the first drawn step.
		if v, ok := f.(faults.Validator); ok {
			if err := v.Validate(); err != nil {
				errs = append(errs, fmt.Errorf("Spec.Faults: %w", err))
			}
		}
	}
	names := map[string]bool{}
	for _, p := range s.Properties {
		if p == nil {
			errs = append(errs, errors.New("Spec.Properties holds a nil property"))
			continue
		}
		if names[p.Name()] {
			errs = append(errs, fmt.Errorf("Spec.Properties has two properties named %q: names identify failures, make them unique", p.Name()))
		}
		names[p.Name()] = true
	}
	errs = append(errs, s.validateReference()...)
	if len(errs) > 0 {
		return fmt.Errorf("invalid harness.Spec: %w", errors.Join(errs...))
	}
	return nil
}

// validateReference checks that a property judged against a reference
// run compares kinds the case observes.
func (s Spec) validateReference() []error {
	p := s.Referenced()
	if p == nil || len(p.ReferenceKinds()) == 0 {
		return nil
	}
	observed := map[string]bool{"Pod": true, "PersistentVolumeClaim": true}
	for _, f := range s.fixtureObjects() {
		if gvk, err := apiutil.GVKForObject(f, s.Scheme); err == nil {
			observed[gvk.Kind] = true
		}
	}
	for _, gvk := range s.Watch {
		observed[gvk.Kind] = true
	}
	var errs []error
	for _, k := range p.ReferenceKinds() {
		if !observed[k] {
			errs = append(errs, fmt.Errorf("Spec.Properties: %s compares kind %q, which the case does not observe: add it to Spec.Watch (observed: %s)",
				p.Name(), k, strings.Join(slices.Sorted(maps.Keys(observed)), ", ")))
		}
	}
	return errs
}

// known is every fault a scenario of this spec may name: the spec's, then
// the catalog's.
func (s Spec) known() []faults.Fault {
	return append(append([]faults.Fault{}, s.Faults...), faults.Catalog()...)
}

// Plans is the generator the spec's plans are drawn from: 1 to MaxSteps
// steps of its faults, for its nodes and fixtures (zero values take their
// defaults). Its Example(seed) is one plan.
func (s Spec) Plans() *rapid.Generator[[]faults.Step] {
	s = s.withDefaults()
	objects := s.fixtureObjects()
	return faults.Plan(s.Faults, faults.Config{Nodes: s.Nodes, Fixtures: len(objects), Objects: objects}, s.MaxSteps)
}

// fixtureObjects are the spec's fixtures as a case creates them, but in
// the namespace "default": what values are drawn (and merged) next to.
func (s Spec) fixtureObjects() []client.Object {
	if s.Fixtures == nil {
		return nil
	}
	return s.Fixtures("default")
}

// Checked is spec with its defaults, and what is wrong with it, for the
// search and the facade.
func Checked(spec Spec) (Spec, error) {
	spec = spec.withDefaults()
	return spec, spec.validate()
}

// WithDefaults is spec with its zero values given their defaults.
func WithDefaults(spec Spec) Spec { return spec.withDefaults() }

// KnownFaults are the faults a scenario of spec may name: the spec's and
// the catalog's.
func KnownFaults(spec Spec) []faults.Fault { return spec.known() }

// FixtureObjects are the spec's fixtures as a case creates them, in the
// namespace "default" (fixtureObjects).
func FixtureObjects(spec Spec) []client.Object { return spec.fixtureObjects() }
