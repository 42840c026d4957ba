package main

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/scenario"
	"github.com/kubeprop/kubeprop/properties"
)

// SpecFile is what kubeprop run reads: the controller binary, its CRDs,
// the fixtures, the faults with their options, and the invariants.
// Paths are relative to the spec file.
type SpecFile struct {
	Controller struct {
		Command string   `json:"command"`
		Args    []string `json:"args,omitempty"`
		// Env is set for the binary (unknown names are passed through):
		// $(KUBEPROP_NAMESPACE) and $(KUBECONFIG) in values, as in args,
		// are the case's namespace and kubeconfig.
		Env map[string]string `json:"env,omitempty"`
	} `json:"controller"`
	CRDs       []string                  `json:"crds,omitempty"`
	Fixtures   []string                  `json:"fixtures"`
	Watch      []schema.GroupVersionKind `json:"watch,omitempty"`
	Faults     []map[string]any          `json:"faults,omitempty"`
	Invariants []Invariant               `json:"invariants,omitempty"`
	Properties []string                  `json:"properties,omitempty"`
	Nodes      int                       `json:"nodes,omitempty"`
	MaxSteps   int                       `json:"maxSteps,omitempty"`
	TimeScale  float64                   `json:"timeScale,omitempty"`
	Setup      string                    `json:"setup,omitempty"`
	Checks     int                       `json:"checks,omitempty"`
}

// builtinProperties are the general properties a spec file may name, with
// their default options.
var builtinProperties = map[string]func() properties.Property{
	"bounded-backoff": func() properties.Property { return properties.BoundedBackoff(properties.BackoffOptions{}) },
	"no-fight-loop":   func() properties.Property { return properties.NoFightLoop(properties.FightOptions{}) },
	"quiescent":       func() properties.Property { return properties.Quiescent(properties.QuiesceOptions{}) },
	"no-panics":       properties.NoPanics,
	// The end state of a case matches its reference run's: the same user
	// changes with no fault.
	properties.MatchesReferenceName: func() properties.Property { return properties.MatchesReference(properties.ReferenceOptions{}) },
}

// loadedSpec is a spec file made ready to run.
type loadedSpec struct {
	path   string
	file   SpecFile
	spec   harness.Spec
	crds   []string
	checks int
}

// loadSpec reads and checks a spec file; every error is bad input.
func loadSpec(path string) (*loadedSpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the spec: %w", err)
	}
	var f SpecFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("the spec %s is malformed: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	// Paths are kept absolute: run works in its -out folder.
	rel := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	l := &loadedSpec{path: filepath.Join(dir, filepath.Base(path)), file: f, checks: f.Checks}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	// The controller.
	cmd := f.Controller.Command
	switch {
	case cmd == "":
		bad("controller.command is empty: give the controller binary, e.g. command: ./bin/my-operator")
	case strings.ContainsRune(cmd, filepath.Separator):
		cmd = rel(cmd)
		if _, err := exec.LookPath(cmd); err != nil {
			bad("controller.command %s: %v; build it first (for the bundled ones: make bins)", cmd, err)
		}
	default:
		if _, err := exec.LookPath(cmd); err != nil {
			bad("controller.command %q is not on PATH: give its path", cmd)
		}
	}
	process := harness.ProcessOptions{Command: cmd, Args: f.Controller.Args, Env: f.Controller.Env}
	if cmd != "" {
		if err := process.Validate(); err != nil {
			bad("controller: %v", err)
		}
	}
	l.spec.Controller = harness.ProcessWith(process)

	// CRDs, for the cluster and the invariants' field checks.
	for _, c := range f.CRDs {
		l.crds = append(l.crds, rel(c))
	}
	schemas, err := crdSchemas(l.crds)
	if err != nil {
		bad("%v: check the crds paths", err)
	}

	// Fixtures.
	var fixtures []client.Object
	if len(f.Fixtures) == 0 {
		bad("fixtures is empty: list the YAML manifests of the objects the controller acts on")
	}
	for _, fx := range f.Fixtures {
		objs, err := readManifests(rel(fx))
		if err != nil {
			bad("fixtures: %v", err)
		}
		for _, o := range objs {
			fixtures = append(fixtures, o)
		}
	}
	l.spec.Fixtures = func(ns string) []client.Object {
		out := make([]client.Object, len(fixtures))
		for i, o := range fixtures {
			c := o.DeepCopyObject().(client.Object)
			c.SetNamespace(ns)
			out[i] = c
		}
		return out
	}
	l.spec.Watch = f.Watch

	// Faults, from the registry that scenario files share.
	if fs, err := scenario.Faults(f.Faults); err != nil {
		bad("%v", err)
	} else {
		l.spec.Faults = fs
	}

	// Properties: the invariants, then the general ones.
	env, err := newInvariantEnv(recordedKinds(fixtures, f.Watch))
	if err != nil {
		return nil, fmt.Errorf("the CEL environment: %w", err)
	}
	for _, inv := range f.Invariants {
		p, err := inv.property(env, schemas[inv.Kind])
		if err != nil {
			bad("%v", err)
			continue
		}
		l.spec.Properties = append(l.spec.Properties, p)
	}
	names := f.Properties
	if names == nil {
		names = slices.Sorted(maps.Keys(builtinProperties))
	}
	for _, n := range names {
		mk, ok := builtinProperties[n]
		if !ok {
			bad("properties: unknown property %q; the built-in ones are %s (write your own as invariants)", n, strings.Join(slices.Sorted(maps.Keys(builtinProperties)), ", "))
			continue
		}
		l.spec.Properties = append(l.spec.Properties, mk())
	}

	l.spec.Nodes, l.spec.MaxSteps = f.Nodes, f.MaxSteps
	if f.Setup != "" {
		if l.spec.Setup, err = time.ParseDuration(f.Setup); err != nil {
			bad("setup is %q: give a duration such as 60s", f.Setup)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("the spec %s: %w", path, errors.Join(errs...))
	}
	return l, nil
}

// recordedKinds are the kinds a case records, as "apiVersion kind": Pods,
// PersistentVolumeClaims, the fixtures' kinds and watch's (see
// harness.Spec.Watch).
func recordedKinds(fixtures []client.Object, watch []schema.GroupVersionKind) []string {
	out := []string{"v1 Pod", "v1 PersistentVolumeClaim"}
	for _, o := range fixtures {
		gvk := o.GetObjectKind().GroupVersionKind()
		out = append(out, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	for _, gvk := range watch {
		out = append(out, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
