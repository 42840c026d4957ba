package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/kubeprop/kubeprop/properties"
)

// Invariant is a CEL expression over each object of a kind, as a spec
// file gives it.
type Invariant struct {
	// Name names the property in failures and scenarios.
	Name string `json:"name"`
	// Kind is the kind of the objects the expression is evaluated on,
	// one at a time, as object; pods is every pod of the case.
	Kind string `json:"kind"`
	// Expression is CEL that yields a bool, e.g.
	// object.status.readyReplicas == object.spec.replicas.
	Expression string `json:"expression"`
	// Within makes the invariant a convergence property: it must hold
	// from no later than this after the faults heal, and stay. Empty: it
	// must hold in every state of the case.
	Within string `json:"within,omitempty"`
}

// celEnv declares object and pods. Objects are JSON-shaped maps, so both
// are dynamic; field names are checked against the CRD's schema instead.
func celEnv() (*cel.Env, error) {
	return cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("pods", cel.ListType(cel.DynType)),
		// Kept so that sub-expressions unparse as written, macros too.
		cel.EnableMacroCallTracking())
}

// property compiles the invariant into a property, checking the
// expression's fields against schema (the kind's CRD schema; nil when the
// kind has none).
func (inv Invariant) property(env *cel.Env, schema map[string]any) (properties.Property, error) {
	pred, err := inv.predicate(env, schema)
	if err != nil {
		return nil, err
	}
	if inv.Within == "" {
		return properties.Always(inv.Name, pred), nil
	}
	within, err := time.ParseDuration(inv.Within)
	if err != nil || within <= 0 {
		return nil, fmt.Errorf("invariant %q: within is %q; give a duration such as 60s", inv.Name, inv.Within)
	}
	return properties.Converges(inv.Name, pred, within), nil
}

// predicate compiles the expression into a predicate over a state.
func (inv Invariant) predicate(env *cel.Env, schema map[string]any) (properties.Predicate, error) {
	if inv.Name == "" || inv.Kind == "" || inv.Expression == "" {
		return nil, fmt.Errorf("an invariant needs a name, a kind and an expression; got name %q, kind %q, expression %q", inv.Name, inv.Kind, inv.Expression)
	}
	checked, iss := env.Compile(inv.Expression)
	if iss.Err() != nil {
		return nil, fmt.Errorf("invariant %q: the expression is not valid CEL: %w", inv.Name, iss.Err())
	}
	if out := checked.OutputType(); !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("invariant %q: the expression yields %s; it must yield a bool", inv.Name, out)
	}
	if schema != nil {
		if err := checkFields(checked.NativeRep().Expr(), inv.Kind, schema); err != nil {
			return nil, fmt.Errorf("invariant %q: %w; fix the expression", inv.Name, err)
		}
	}
	prg, err := env.Program(checked)
	if err != nil {
		return nil, fmt.Errorf("invariant %q: %w", inv.Name, err)
	}
	values := valueProbes(env, checked)
	shown := strings.Join(strings.Fields(inv.Expression), " ")
	pred := func(s properties.State) error {
		var pods []any
		for _, p := range s.ByKind("Pod") {
			pods = append(pods, p.Object)
		}
		for _, o := range s.ByKind(inv.Kind) {
			if err := evaluate(prg, o, pods); err != nil {
				return fmt.Errorf("%s %s: %s: %w%s", inv.Kind, o.GetName(), shown, err, values.describe(o, pods))
			}
		}
		return nil
	}
	return pred, nil
}

func evaluate(prg cel.Program, o *unstructured.Unstructured, pods []any) error {
	out, _, err := prg.Eval(map[string]any{"object": o.Object, "pods": pods})
	if err != nil {
		return err // e.g. no such key: a status not written yet
	}
	switch v := out.Value().(type) {
	case bool:
		if !v {
			return errors.New("is false")
		}
		return nil
	default:
		return fmt.Errorf("yields %v (%s), not a bool", out, out.Type().(*types.Type).TypeName())
	}
}

// probes evaluate the object's fields that an expression reads, to show
// their values when it is false.
type probes []probe

type probe struct {
	source string
	prg    cel.Program
}

// valueProbes compiles what an expression compares (the operands of
// ==, !=, <, <=, >, >= that are not literals), or, with no comparison,
// the field paths from object it reads: at most six.
func valueProbes(env *cel.Env, checked *cel.Ast) probes {
	info := checked.NativeRep().SourceInfo()
	var sources []string
	add := func(e ast.Expr) {
		if e.Kind() == ast.LiteralKind {
			return
		}
		if src, err := parser.Unparse(e, info); err == nil && !slices.Contains(sources, src) {
			sources = append(sources, src)
		}
	}
	ast.PreOrderVisit(checked.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind {
			return
		}
		switch e.AsCall().FunctionName() {
		case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
			for _, arg := range e.AsCall().Args() {
				add(arg)
			}
		}
	}))
	if len(sources) == 0 {
		ast.PreOrderVisit(checked.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
			if src, ok := objectSource(e); ok && src != "object" && !slices.Contains(sources, src) {
				sources = append(sources, src)
			}
		}))
		sources = slices.DeleteFunc(sources, func(src string) bool {
			return slices.ContainsFunc(sources, func(o string) bool {
				return strings.HasPrefix(o, src+".") || strings.HasPrefix(o, src+"[")
			})
		})
	}
	var out probes
	for _, src := range sources {
		if len(out) == 6 {
			break
		}
		if c, iss := env.Compile(src); iss.Err() == nil {
			if prg, err := env.Program(c); err == nil {
				out = append(out, probe{source: strings.Join(strings.Fields(src), " "), prg: prg})
			}
		}
	}
	return out
}

// describe is ", where a = 1, b = 2" for the object.
func (ps probes) describe(o *unstructured.Unstructured, pods []any) string {
	var parts []string
	for _, p := range ps {
		v := "(absent)"
		if out, _, err := p.prg.Eval(map[string]any{"object": o.Object, "pods": pods}); err == nil {
			b, _ := json.Marshal(out.Value())
			v = string(b)
		}
		parts = append(parts, p.source+" = "+v)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (where " + strings.Join(parts, ", ") + ")"
}

// objectSource is the CEL source of a field path from object with
// literal indices: object.status.replicas, object.spec.groups[0].replicas.
func objectSource(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return "object", e.AsIdent() == "object"
	case ast.SelectKind:
		src, ok := objectSource(e.AsSelect().Operand())
		return src + "." + e.AsSelect().FieldName(), ok && !e.AsSelect().IsTestOnly()
	case ast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != operators.Index || len(c.Args()) != 2 || c.Args()[1].Kind() != ast.LiteralKind {
			return "", false
		}
		src, ok := objectSource(c.Args()[0])
		switch v := c.Args()[1].AsLiteral().Value().(type) {
		case int64:
			return fmt.Sprintf("%s[%d]", src, v), ok
		case string:
			return fmt.Sprintf("%s[%q]", src, v), ok
		}
	}
	return "", false
}

// checkFields checks every field path that starts at object against the
// kind's OpenAPI schema: a misspelt field is bad input, not a property
// that never holds.
func checkFields(e ast.Expr, kind string, schema map[string]any) error {
	var paths [][]string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if path, ok := objectPath(e); ok && len(path) > 0 {
			paths = append(paths, path)
		}
	}))
	// Shortest first: a bad field is reported once, not with each longer
	// path through it.
	slices.SortFunc(paths, func(a, b []string) int { return len(a) - len(b) })
	var errs []error
	var bad []string
	for _, path := range paths {
		key := strings.Join(path, ".")
		if slices.ContainsFunc(bad, func(b string) bool { return key == b || strings.HasPrefix(key, b+".") }) {
			continue
		}
		// Every object has these; CRD schemas leave them out.
		if path[0] == "metadata" || path[0] == "apiVersion" || path[0] == "kind" {
			continue
		}
		if err := walkSchema(schema, path); err != nil {
			bad = append(bad, key)
			errs = append(errs, fmt.Errorf("object.%s: %s %w", key, kind, err))
		}
	}
	return errors.Join(errs...)
}

// objectPath is the field path of a selection or index chain rooted at
// object: [status readyReplicas], [spec workerGroupSpecs [0] replicas].
func objectPath(e ast.Expr) ([]string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return nil, e.AsIdent() == "object"
	case ast.SelectKind:
		p, ok := objectPath(e.AsSelect().Operand())
		return append(p, e.AsSelect().FieldName()), ok
	case ast.CallKind:
		c := e.AsCall()
		if c.FunctionName() != operators.Index || len(c.Args()) != 2 {
			return nil, false
		}
		p, ok := objectPath(c.Args()[0])
		if !ok {
			return nil, false
		}
		if c.Args()[1].Kind() != ast.LiteralKind {
			return append(p, "[*]"), true
		}
		switch v := c.Args()[1].AsLiteral().Value().(type) {
		case string:
			return append(p, v), true
		default:
			return append(p, "[*]"), true
		}
	}
	return nil, false
}

// walkSchema follows path through an OpenAPI v3 schema; it stops where
// the schema stops describing fields (metadata, preserved unknown fields,
// maps).
func walkSchema(schema map[string]any, path []string) error {
	sch := schema
	for i, elem := range path {
		if elem == "[*]" {
			items, ok := sch["items"].(map[string]any)
			if !ok {
				return nil
			}
			sch = items
			continue
		}
		if props, ok := sch["properties"].(map[string]any); ok {
			if next, ok := props[elem].(map[string]any); ok {
				sch = next
				continue
			}
		}
		if extra, ok := sch["additionalProperties"].(map[string]any); ok {
			sch = extra
			continue
		}
		props, ok := sch["properties"].(map[string]any)
		if !ok || sch["additionalProperties"] == true || sch["x-kubernetes-preserve-unknown-fields"] == true {
			return nil
		}
		names := make([]string, 0, len(props))
		for n := range props {
			names = append(names, n)
		}
		slices.Sort(names)
		where := "at the top"
		if i > 0 {
			where = "under " + strings.Join(path[:i], ".")
		}
		return fmt.Errorf("has no field %q %s (it has: %s)", elem, where, strings.Join(names, ", "))
	}
	return nil
}

// crdSchemas reads the CustomResourceDefinitions in files and folders and
// returns each kind's schema (of its storage version).
func crdSchemas(paths []string) (map[string]map[string]any, error) {
	schemas := map[string]map[string]any{}
	for _, p := range paths {
		files := []string{p}
		if st, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("crds: %w", err)
		} else if st.IsDir() {
			files, _ = filepath.Glob(filepath.Join(p, "*.yaml"))
			more, _ := filepath.Glob(filepath.Join(p, "*.yml"))
			files = append(files, more...)
		}
		for _, f := range files {
			docs, err := readManifests(f)
			if err != nil {
				return nil, fmt.Errorf("crds: %w", err)
			}
			for _, d := range docs {
				if d.GetKind() != "CustomResourceDefinition" {
					continue
				}
				kind, _, _ := unstructured.NestedString(d.Object, "spec", "names", "kind")
				versions, _, _ := unstructured.NestedSlice(d.Object, "spec", "versions")
				for _, v := range versions {
					vm, _ := v.(map[string]any)
					if stored, _ := vm["storage"].(bool); !stored {
						continue
					}
					if sch, ok, _ := unstructured.NestedMap(vm, "schema", "openAPIV3Schema"); ok {
						schemas[kind] = sch
					}
				}
			}
		}
	}
	return schemas, nil
}

// readManifests reads the objects of a YAML file of one or more
// documents.
func readManifests(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	docs := utilyaml.NewYAMLReader(bufio.NewReader(f))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", path, i+1, err)
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s, document %d: %w", path, i+1, err)
		}
		if len(m) == 0 {
			continue
		}
		o := &unstructured.Unstructured{Object: m}
		if o.GetAPIVersion() == "" || o.GetKind() == "" {
			return nil, fmt.Errorf("%s, document %d: no apiVersion or kind: a manifest names both", path, i+1)
		}
		objs = append(objs, o)
	}
	return objs, nil
}
