package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
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
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
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
	// one at a time, as object; pods is every pod of the case, and
	// objects('apps/v1', 'StatefulSet') every object of a kind the case
	// records.
	Kind string `json:"kind"`
	// Expression is CEL that yields a bool, e.g.
	// object.status.readyReplicas == object.spec.replicas. An expression
	// that reads oldObject judges changes: it is evaluated on each object
	// of the kind that changed from one observed state to the next, with
	// oldObject its earlier version (null when it was created) and object
	// its new one (null when it was deleted), as a
	// ValidatingAdmissionPolicy names them.
	Expression string `json:"expression"`
	// Within makes the invariant a convergence property: it must hold
	// from no later than this after the faults heal, and stay. Empty: it
	// must hold in every state of the case.
	Within string `json:"within,omitempty"`
	// Rest, with Within: a case whose invariant is false and that has
	// been at rest this long (no write, no request of the controller, no
	// pod starting) fails then, before Within. Empty: a third of Within,
	// at least 10 s. A controller that waits on a timer of its own, with
	// no request, needs a rest longer than that timer; Within's value
	// waits out the deadline.
	Rest string `json:"rest,omitempty"`
}

// stateVar holds a state's objects by "apiVersion kind" for objects():
// a variable, not a function's closure, as cases run side by side.
const stateVar = "kubeprop_objects"

// invariantEnv is the CEL environment of a spec's invariants.
type invariantEnv struct {
	cel *cel.Env
	// recorded are the kinds a case records ("apps/v1 StatefulSet"):
	// objects() of another would always be empty.
	recorded []string
}

// newInvariantEnv declares object, oldObject, pods and objects(). Objects
// are JSON-shaped maps, so they are dynamic here; a kind with a CRD
// schema is type-checked against it on its own (see typeCheck).
func newInvariantEnv(recorded []string) (*invariantEnv, error) {
	env, err := cel.NewEnv(invariantEnvOptions(cel.DynType)...)
	if err != nil {
		return nil, err
	}
	return &invariantEnv{cel: env, recorded: recorded}, nil
}

// invariantEnvOptions declare the variables, object and oldObject of
// objectType, and objects().
func invariantEnvOptions(objectType *cel.Type) []cel.EnvOption {
	return []cel.EnvOption{
		cel.Variable("object", objectType), cel.Variable("oldObject", objectType),
		cel.Variable("pods", cel.ListType(cel.DynType)),
		cel.Variable(stateVar, cel.MapType(cel.StringType, cel.ListType(cel.DynType))),
		cel.Macros(objectsMacro),
		// As the API server's CEL: 1 < 1.5 holds rather than failing to
		// type-check.
		cel.CrossTypeNumericComparisons(true),
		// Kept so that sub-expressions unparse as written, macros too.
		cel.EnableMacroCallTracking(),
	}
}

// objectsMacro makes objects(apiVersion, kind) an index into the state's
// objects by "apiVersion kind".
var objectsMacro = cel.GlobalMacro("objects", 2, func(eh cel.MacroExprFactory, _ ast.Expr, args []ast.Expr) (ast.Expr, *cel.Error) {
	key := eh.NewCall(operators.Add, eh.NewCall(operators.Add, args[0], eh.NewLiteral(types.String(" "))), args[1])
	return eh.NewCall(operators.Index, eh.NewIdent(stateVar), key), nil
})

// property compiles the invariant into a property, checking the
// expression's fields and types against schema (the kind's CRD schema;
// nil when the kind has none).
func (inv Invariant) property(env *invariantEnv, schema map[string]any) (properties.Property, error) {
	c, err := inv.compile(env, schema)
	if err != nil {
		return nil, err
	}
	if c.transition {
		if inv.Within != "" || inv.Rest != "" {
			return nil, fmt.Errorf("invariant %q: it reads oldObject, so it judges every change; within and rest do not apply: remove them", inv.Name)
		}
		return evaluated{properties.Transitions(inv.Name, c.checkChange), inv.Kind}, nil
	}
	if inv.Within == "" {
		if inv.Rest != "" {
			return nil, fmt.Errorf("invariant %q: rest applies to an invariant with within only: add within, or remove rest", inv.Name)
		}
		return evaluated{properties.Always(inv.Name, c.check(false)), inv.Kind}, nil
	}
	within, err := time.ParseDuration(inv.Within)
	if err != nil || within <= 0 {
		return nil, fmt.Errorf("invariant %q: within is %q; give a duration such as 60s", inv.Name, inv.Within)
	}
	var rest time.Duration
	if inv.Rest != "" {
		if rest, err = time.ParseDuration(inv.Rest); err != nil || rest <= 0 {
			return nil, fmt.Errorf("invariant %q: rest is %q; give a duration such as 20s", inv.Name, inv.Rest)
		}
	}
	// It must come to hold on objects: none at the end is not a pass.
	return properties.Converges(inv.Name, c.check(true), properties.ConvergeOptions{Within: within, Rest: rest}), nil
}

// compiledInvariant is an invariant ready to evaluate.
type compiledInvariant struct {
	inv        Invariant
	env        *invariantEnv
	prg        cel.Program
	values     probes
	shown      string // the expression on one line
	transition bool   // it reads oldObject
}

// compile checks the expression and makes its program.
func (inv Invariant) compile(env *invariantEnv, schema map[string]any) (*compiledInvariant, error) {
	if inv.Name == "" || inv.Kind == "" || inv.Expression == "" {
		return nil, fmt.Errorf("an invariant needs a name, a kind and an expression; got name %q, kind %q, expression %q", inv.Name, inv.Kind, inv.Expression)
	}
	if !slices.ContainsFunc(env.recorded, func(r string) bool { return strings.HasSuffix(r, " "+inv.Kind) }) {
		var kinds []string
		for _, r := range env.recorded {
			kinds = append(kinds, r[strings.Index(r, " ")+1:])
		}
		return nil, fmt.Errorf("invariant %q: the case records no %s (it records %s): give one of those kinds, or add its group, version and kind to watch", inv.Name, inv.Kind, strings.Join(kinds, ", "))
	}
	checked, iss := env.cel.Compile(inv.Expression)
	if iss.Err() != nil {
		return nil, fmt.Errorf("invariant %q: the expression is not valid CEL: %w", inv.Name, iss.Err())
	}
	if out := checked.OutputType(); !out.IsExactType(cel.BoolType) && !out.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("invariant %q: the expression yields %s; it must yield a bool", inv.Name, out)
	}
	if err := checkObjectsCalls(checked, env.recorded); err != nil {
		return nil, fmt.Errorf("invariant %q: %w", inv.Name, err)
	}
	if schema != nil {
		if err := checkFields(checked.NativeRep().Expr(), inv.Kind, schema); err != nil {
			return nil, fmt.Errorf("invariant %q: %w; fix the expression", inv.Name, err)
		}
		if err := typeCheck(env.cel, inv.Expression, inv.Kind, schema); err != nil {
			return nil, fmt.Errorf("invariant %q: %w; fix the expression", inv.Name, err)
		}
	}
	prg, err := env.cel.Program(checked)
	if err != nil {
		return nil, fmt.Errorf("invariant %q: %w", inv.Name, err)
	}
	transition := false
	ast.PreOrderVisit(checked.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		transition = transition || (e.Kind() == ast.IdentKind && e.AsIdent() == "oldObject")
	}))
	return &compiledInvariant{inv: inv, env: env, prg: prg, values: valueProbes(env.cel, checked),
		shown: strings.Join(strings.Fields(inv.Expression), " "), transition: transition}, nil
}

// check is the predicate over a state: the expression holds on each
// object of the kind. With required, a state with none fails: a
// convergence must come to objects, not to nothing.
func (c *compiledInvariant) check(required bool) properties.Predicate {
	return func(s properties.State) error {
		objects := s.ByKind(c.inv.Kind)
		if len(objects) == 0 && required {
			return fmt.Errorf("no %s in the case's namespace: nothing for %s to hold on", c.inv.Kind, c.shown)
		}
		vars := c.vars(s)
		for _, o := range objects {
			vars["object"] = o.Object
			if err := c.evaluate(vars); err != nil {
				return fmt.Errorf("%s %s: %w", c.inv.Kind, o.GetName(), err)
			}
		}
		return nil
	}
}

// checkChange is the check of a change from one state to the next: the
// expression holds on each object of the kind that was created, changed
// or deleted.
func (c *compiledInvariant) checkChange(prev, next properties.State) error {
	before := map[string]*unstructured.Unstructured{}
	for _, o := range prev.ByKind(c.inv.Kind) {
		before[string(o.GetUID())] = o
	}
	var vars map[string]any // made for the first object that changed: most changes are of other kinds
	judge := func(old, cur *unstructured.Unstructured, name, how string) error {
		if vars == nil {
			vars = c.vars(next)
		}
		vars["oldObject"], vars["object"] = nil, nil
		if old != nil {
			vars["oldObject"] = old.Object
		}
		if cur != nil {
			vars["object"] = cur.Object
		}
		if err := c.evaluate(vars); err != nil {
			return fmt.Errorf("%s %s%s: %w", c.inv.Kind, name, how, err)
		}
		return nil
	}
	for _, o := range next.ByKind(c.inv.Kind) {
		old := before[string(o.GetUID())]
		delete(before, string(o.GetUID()))
		switch {
		case old == nil:
			if err := judge(nil, o, o.GetName(), " (created: oldObject is null)"); err != nil {
				return err
			}
		case old.GetResourceVersion() != o.GetResourceVersion():
			if err := judge(old, o, o.GetName(), ""); err != nil {
				return err
			}
		}
	}
	gone := slices.SortedFunc(maps.Values(before), func(a, b *unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	for _, old := range gone {
		if err := judge(old, nil, old.GetName(), " (deleted: object is null)"); err != nil {
			return err
		}
	}
	return nil
}

// vars are the variables of an evaluation in the state, object and
// oldObject aside.
func (c *compiledInvariant) vars(s properties.State) map[string]any {
	byKind := make(map[string]any, len(c.env.recorded))
	for _, r := range c.env.recorded {
		byKind[r] = []any{}
	}
	var pods []any
	for _, o := range s.Objects {
		key := o.GetAPIVersion() + " " + o.GetKind()
		list, _ := byKind[key].([]any)
		byKind[key] = append(list, o.Object)
		if o.GetKind() == "Pod" {
			pods = append(pods, o.Object)
		}
	}
	return map[string]any{"pods": pods, stateVar: byKind, "object": nil, "oldObject": nil}
}

func (c *compiledInvariant) evaluate(vars map[string]any) error {
	out, _, err := c.prg.Eval(vars)
	if err != nil {
		return fmt.Errorf("%s: %w", c.shown, err) // e.g. no such key: a status not written yet
	}
	switch v := out.Value().(type) {
	case bool:
		if !v {
			return fmt.Errorf("%s: is false%s", c.shown, c.values.describe(vars))
		}
		return nil
	default:
		return fmt.Errorf("%s: yields %v (%s), not a bool", c.shown, out, out.Type().(*types.Type).TypeName())
	}
}

// evaluated fails an invariant that was never evaluated: no state of the
// case had an object of its kind, so that it held says nothing.
type evaluated struct {
	properties.Property
	kind string
}

func (p evaluated) Check(tr *properties.Trace) properties.Verdict {
	v := p.Property.Check(tr)
	if !v.Done || v.Err != nil {
		return v
	}
	for _, s := range tr.States {
		for _, o := range s.Objects {
			if o.GetKind() == p.kind {
				return v
			}
		}
	}
	return properties.Verdict{Done: true, Err: fmt.Errorf("%s: no %s in any state of the case: it was never evaluated; check the invariant's kind and the fixtures", p.Name(), p.kind),
		Detail: fmt.Sprintf("%d states", len(tr.States))}
}

// checkObjectsCalls checks that objects() names kinds the case records,
// where it names them literally.
func checkObjectsCalls(checked *cel.Ast, recorded []string) error {
	var errs []error
	ast.PreOrderVisit(checked.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.CallKind || e.AsCall().FunctionName() != operators.Index {
			return
		}
		args := e.AsCall().Args()
		if len(args) != 2 || args[0].Kind() != ast.IdentKind || args[0].AsIdent() != stateVar {
			return
		}
		key, ok := literalConcat(args[1])
		if !ok || slices.Contains(recorded, key) {
			return
		}
		apiVersion, kind, _ := strings.Cut(key, " ")
		gv, _ := k8sschema.ParseGroupVersion(apiVersion)
		errs = append(errs, fmt.Errorf("objects(%q, %q): the case records no such objects (it records %s); add {group: %q, version: %q, kind: %q} to watch, or fix the apiVersion",
			apiVersion, kind, listRecorded(recorded), gv.Group, gv.Version, kind))
	}))
	return errors.Join(errs...)
}

// literalConcat is the value of a + of string literals.
func literalConcat(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.LiteralKind:
		s, ok := e.AsLiteral().Value().(string)
		return s, ok
	case ast.CallKind:
		if c := e.AsCall(); c.FunctionName() == operators.Add && len(c.Args()) == 2 {
			a, okA := literalConcat(c.Args()[0])
			b, okB := literalConcat(c.Args()[1])
			return a + b, okA && okB
		}
	}
	return "", false
}

// listRecorded lists recorded kinds as objects() takes them.
func listRecorded(recorded []string) string {
	out := make([]string, len(recorded))
	for i, r := range recorded {
		apiVersion, kind, _ := strings.Cut(r, " ")
		out[i] = fmt.Sprintf("objects(%q, %q)", apiVersion, kind)
	}
	return strings.Join(out, ", ")
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
		// A whole object is no value to show (nor deterministic).
		if e.Kind() == ast.LiteralKind || (e.Kind() == ast.IdentKind && (e.AsIdent() == "object" || e.AsIdent() == "oldObject")) {
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
			if src, ok := objectSource(e); ok && src != "object" && src != "oldObject" && !slices.Contains(sources, src) {
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

// describe is " (where a = 1, b = 2)" for the evaluation's variables.
func (ps probes) describe(vars map[string]any) string {
	var parts []string
	for _, p := range ps {
		v := "(absent)"
		if out, _, err := p.prg.Eval(vars); err == nil {
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

// objectSource is the CEL source of a field path from object or
// oldObject with literal indices: object.status.replicas,
// oldObject.spec.groups[0].replicas.
func objectSource(e ast.Expr) (string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent(), e.AsIdent() == "object" || e.AsIdent() == "oldObject"
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

// checkFields checks every field path that starts at object or oldObject against the
// kind's OpenAPI schema: a misspelt field is bad input, not a property
// that never holds.
func checkFields(e ast.Expr, kind string, schema map[string]any) error {
	var paths [][]string
	ast.PreOrderVisit(e, ast.NewExprVisitor(func(e ast.Expr) {
		if path, ok := objectPath(e); ok && len(path) > 1 {
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
		if path[1] == "metadata" || path[1] == "apiVersion" || path[1] == "kind" {
			continue
		}
		if err := walkSchema(schema, path[1:]); err != nil {
			bad = append(bad, key)
			errs = append(errs, fmt.Errorf("%s: %s %w", key, kind, err))
		}
	}
	return errors.Join(errs...)
}

// objectPath is the field path of a selection or index chain rooted at
// object or oldObject, the root first: [object status readyReplicas],
// [oldObject spec workerGroupSpecs [0] replicas].
func objectPath(e ast.Expr) ([]string, bool) {
	switch e.Kind() {
	case ast.IdentKind:
		return []string{e.AsIdent()}, e.AsIdent() == "object" || e.AsIdent() == "oldObject"
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
