package scenario

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"pgregory.net/rapid"
	"sigs.k8s.io/yaml"

	"github.com/kubeprop/kubeprop/faults"
)

// The fault registry: every fault of the catalog, and the user changes
// that need a field or patches, by the name a spec file gives them, with
// their options as the spec file writes them. Spec files (kubeprop run)
// build their faults here; scenario files name the same faults, decoded
// by the faults built (Steps) and the catalog.

// maker builds a fault from its options (JSON) and the spec's other
// faults (a burst draws from them).
type maker func(options []byte, others []faults.Fault) (faults.Fault, error)

// registry is filled at init: a burst's entries are built through it.
var registry map[string]maker

func init() {
	registry = map[string]maker{
		"NodeLoss":          plain(faults.NodeLoss),
		"NodeRecover":       plain(faults.NodeRecover),
		"ContainerKill":     withOptions(faults.ContainerKill),
		"CrashLoop":         plain(faults.CrashLoop),
		"ReadinessFlap":     plain(faults.ReadinessFlap),
		"LivenessFailure":   plain(faults.LivenessFailure),
		"ScaleChange":       withOptions(faults.ScaleChange),
		"ChildDelete":       plain(faults.ChildDelete),
		"ControllerRestart": plain(faults.ControllerRestart),
		"APIErrors":         plain(faults.APIErrors),
		"CrashAfterWrite":   plain(faults.CrashAfterWrite),
		"StaleWatch":        plain(faults.StaleWatch),
		"ConflictingWriter": withOptions(faults.ConflictingWriter),
		"VolumeGrowth":      plain(faults.VolumeGrowth),
		"Recreate":          plain(faults.Recreate),
		"UserChange":        userChange,
		"Burst":             burst,
	}
}

// FaultNames are the faults a spec file may name, sorted.
func FaultNames() []string { return slices.Sorted(maps.Keys(registry)) }

// Faults builds a spec file's faults, each an entry such as {fault:
// ScaleChange, field: spec.replicas, max: 4}. Bursts come last: one with
// no `of` draws from the other entries' user changes. No entries is nil:
// the harness's default faults.
func Faults(entries []map[string]any) ([]faults.Fault, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	out := make([]faults.Fault, len(entries))
	var errs []error
	build := func(i int, entry map[string]any, others []faults.Fault) {
		f, err := buildFault(entry, others)
		if err != nil {
			errs = append(errs, fmt.Errorf("faults[%d]: %w", i, err))
		}
		out[i] = f
	}
	for i, e := range entries {
		if e["fault"] != "Burst" {
			build(i, e, nil)
		}
	}
	var built []faults.Fault
	for _, f := range out {
		if f != nil {
			built = append(built, f)
		}
	}
	for i, e := range entries {
		if e["fault"] == "Burst" {
			build(i, e, built)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// buildFault builds one entry's fault and checks its options.
func buildFault(entry map[string]any, others []faults.Fault) (faults.Fault, error) {
	name, _ := entry["fault"].(string)
	mk, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown fault %q; the known faults are %s", name, strings.Join(FaultNames(), ", "))
	}
	opts := map[string]any{}
	for k, v := range entry {
		if k != "fault" {
			opts[k] = v
		}
	}
	raw, err := json.Marshal(opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f, err := mk(raw, others)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if v, ok := f.(faults.Validator); ok {
		if err := v.Validate(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

func plain(mk func() faults.Fault) maker {
	return func(opts []byte, _ []faults.Fault) (faults.Fault, error) {
		if string(opts) != "{}" {
			return nil, fmt.Errorf("takes no options, got %s", opts)
		}
		return mk(), nil
	}
}

func withOptions[O any](mk func(O) faults.Fault) maker {
	return func(b []byte, _ []faults.Fault) (faults.Fault, error) {
		var opts O
		if err := yaml.UnmarshalStrict(b, &opts); err != nil {
			return nil, fmt.Errorf("options: %w", err)
		}
		return mk(opts), nil
	}
}

// UserChangeOptions are a spec file's user change: a name for plans, and
// either a field with the values the user sets it to, or whole JSON merge
// patches.
type UserChangeOptions struct {
	// Name names the change in plans and scenario files. Empty means
	// UserChange.
	Name string `json:"name,omitempty"`
	// Field is the field to set, e.g. spec.storage or
	// spec.workerGroupSpecs[0].replicas; Values what it is set to.
	Field  string `json:"field,omitempty"`
	Values []any  `json:"values,omitempty"`
	// Patches are JSON merge patches of the fixture, one drawn per step.
	Patches []map[string]any `json:"patches,omitempty"`
}

func userChange(b []byte, _ []faults.Fault) (faults.Fault, error) {
	var opts UserChangeOptions
	if err := yaml.UnmarshalStrict(b, &opts); err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	if opts.Name == "" {
		opts.Name = "UserChange"
	}
	if slices.ContainsFunc(faults.Catalog(), func(f faults.Fault) bool { return f.Name() == opts.Name }) {
		return nil, fmt.Errorf("name %q is a fault of the catalog's: name the change for what it does, e.g. StorageChange", opts.Name)
	}
	switch {
	case opts.Field != "" && len(opts.Patches) > 0:
		return nil, errors.New("give field with values, or patches, not both")
	case opts.Field != "":
		return faults.FieldChange(opts.Name, opts.Field, opts.Values...), nil
	case len(opts.Patches) > 0:
		return faults.UserChange(opts.Name, rapid.SampledFrom(opts.Patches)), nil
	}
	return nil, errors.New("give the change: field with values (field: spec.storage, values: [1Gi, 2Gi]), or patches (patches: [{spec: {storage: 2Gi}}])")
}

// BurstOptions are a spec file's burst: the user changes it draws from,
// each an entry of its own ({fault: ScaleChange, max: 4}) or the name of
// another of the spec's faults (StorageChange). Empty means every user
// change of the spec, or ScaleChange when it has none.
type BurstOptions struct {
	Of []any `json:"of,omitempty"`
}

func burst(b []byte, others []faults.Fault) (faults.Fault, error) {
	var opts BurstOptions
	if err := yaml.UnmarshalStrict(b, &opts); err != nil {
		return nil, fmt.Errorf("options: %w", err)
	}
	var of []faults.Fault
	for i, o := range opts.Of {
		switch o := o.(type) {
		case string:
			j := slices.IndexFunc(others, func(f faults.Fault) bool { return f.Name() == o })
			if j < 0 {
				return nil, fmt.Errorf("of[%d]: %q is none of the spec's faults; define it under faults, or here as {fault: ...}", i, o)
			}
			of = append(of, others[j])
		case map[string]any:
			f, err := buildFault(o, nil)
			if err != nil {
				return nil, fmt.Errorf("of[%d]: %w", i, err)
			}
			of = append(of, f)
		default:
			return nil, fmt.Errorf("of[%d]: give a fault's name or an entry such as {fault: ScaleChange}", i)
		}
	}
	if len(opts.Of) == 0 {
		for _, f := range others {
			if faults.IsUserChange(f.Steps(faults.Config{Nodes: 3, Fixtures: 1}).Example(0)) {
				of = append(of, f)
			}
		}
	}
	return faults.Burst(of...), nil
}
