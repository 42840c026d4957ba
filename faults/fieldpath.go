package faults

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// pathElem is one element of a field path: a field name (or map key), or a
// list index.
type pathElem struct {
	name  string
	index int // a list index when name is ""
}

// parseFieldPath reads a field path: dots separate fields, [i] indexes a
// list, and [key] names a map key with dots in it:
// spec.workerGroupSpecs[0].replicas, metadata.labels[ray.io/group].
func parseFieldPath(path string) ([]pathElem, error) {
	var elems []pathElem
	rest := path
	for rest != "" {
		switch {
		case rest[0] == '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("field path %q: a [ without its ]", path)
			}
			key := rest[1:end]
			if i, err := strconv.Atoi(key); err == nil && i >= 0 {
				elems = append(elems, pathElem{index: i})
			} else if key != "" {
				elems = append(elems, pathElem{name: key})
			} else {
				return nil, fmt.Errorf("field path %q: an empty []", path)
			}
			rest = strings.TrimPrefix(rest[end+1:], ".")
		default:
			end := strings.IndexAny(rest, ".[")
			if end < 0 {
				end = len(rest)
			}
			if end == 0 {
				return nil, fmt.Errorf("field path %q: an empty field name", path)
			}
			elems = append(elems, pathElem{name: rest[:end]})
			rest = rest[end:]
			if strings.HasPrefix(rest, ".") {
				rest = rest[1:]
				if rest == "" {
					return nil, fmt.Errorf("field path %q ends with a dot", path)
				}
			}
		}
	}
	if len(elems) == 0 {
		return nil, fmt.Errorf("field path is empty")
	}
	return elems, nil
}

// pathNames are a path's elements as names, a list index as its decimal.
func pathNames(elems []pathElem) []string {
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = e.name
		if e.name == "" {
			out[i] = strconv.Itoa(e.index)
		}
	}
	return out
}

// fieldNames returns the path's names, or an error when it indexes a
// list (server-side apply and merge patches take a list whole).
func fieldNames(path string) ([]string, error) {
	elems, err := parseFieldPath(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(elems))
	for i, e := range elems {
		if e.name == "" {
			return nil, fmt.Errorf("field path %q indexes a list", path)
		}
		names[i] = e.name
	}
	return names, nil
}

// setFieldPatch is a patch that sets the field at path to value: a JSON
// merge patch, or a JSON patch when the path indexes a list (a merge
// patch would replace the whole list).
func setFieldPatch(path string, value any) (patchType string, patch []byte, err error) {
	elems, err := parseFieldPath(path)
	if err != nil {
		return "", nil, err
	}
	indexed := false
	for _, e := range elems {
		indexed = indexed || e.name == ""
	}
	if !indexed {
		v := value
		for i := len(elems) - 1; i >= 0; i-- {
			v = map[string]any{elems[i].name: v}
		}
		patch, err = json.Marshal(v)
		return "application/merge-patch+json", patch, err
	}
	var ptr strings.Builder
	for _, e := range elems {
		ptr.WriteByte('/')
		if e.name == "" {
			ptr.WriteString(strconv.Itoa(e.index))
		} else {
			ptr.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(e.name))
		}
	}
	patch, err = json.Marshal([]map[string]any{{"op": "replace", "path": ptr.String(), "value": value}})
	return "application/json-patch+json", patch, err
}

// intField reads the integer field at path of obj; false when it is
// unset or not an integer.
func intField(obj client.Object, path string) (int64, bool) {
	elems, err := parseFieldPath(path)
	if err != nil {
		return 0, false
	}
	var v any
	if u, ok := obj.(*unstructured.Unstructured); ok {
		v = u.Object
	} else if m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj); err == nil {
		v = m
	}
	for _, e := range elems {
		switch cur := v.(type) {
		case map[string]any:
			if e.name == "" {
				return 0, false
			}
			v = cur[e.name]
		case []any:
			if e.name != "" || e.index >= len(cur) {
				return 0, false
			}
			v = cur[e.index]
		default:
			return 0, false
		}
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	}
	return 0, false
}
