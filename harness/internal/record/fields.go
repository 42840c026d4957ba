package record

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/kubeprop/kubeprop/properties"
)

// managed is one managedFields entry with its field set, as the API
// server's structured-merge-diff reads it.
type managed struct {
	manager string
	time    time.Time
	key     string // the whole entry, to tell an entry a change touched
	fields  *fieldpath.Set
}

// managedSets parses an object's managedFields; an entry whose field set
// does not parse owns nothing.
func managedSets(obj *unstructured.Unstructured) []managed {
	var out []managed
	for _, e := range obj.GetManagedFields() {
		m := managed{manager: e.Manager, key: managedEntryKey(e), fields: fieldpath.NewSet()}
		if e.Time != nil {
			m.time = e.Time.Time
		}
		if e.FieldsV1 != nil {
			if err := m.fields.FromJSON(bytes.NewReader(e.FieldsV1.Raw)); err != nil {
				m.fields = fieldpath.NewSet()
			}
		}
		out = append(out, m)
	}
	return out
}

// leaf is one recorded field: its value as JSON and its path as
// structured-merge-diff names it.
type leaf struct {
	value string
	path  fieldpath.Path
}

// fieldWrites diffs two versions of an object field by field and names,
// from managedFields, the manager that owns each changed field.
// An old version of another UID (a relist after the object was deleted
// and created again under its name) is no version of it: every field is
// new.
func fieldWrites(old, obj *unstructured.Unstructured, at time.Time) []properties.Write {
	if old != nil && old.GetUID() != obj.GetUID() {
		old = nil
	}
	owners := managedSets(obj)
	var previous []managed
	before := map[string]leaf{}
	if old != nil {
		previous = managedSets(old)
		flatten(old.Object, nil, nil, append(previous, owners...), before)
	}
	after := map[string]leaf{}
	flatten(obj.Object, nil, nil, owners, after)
	var paths []string
	for p, v := range after {
		if before[p].value != v.value {
			paths = append(paths, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	writer := latestWriter(previous, owners)
	if _, bound := after["spec.nodeName"]; writer == properties.ManagerUnknown && bound && before["spec.nodeName"].value == "" {
		// The binding subresource sets a pod's node and PodScheduled
		// condition without a managedFields entry.
		writer = properties.ManagerBinding
	}
	var out []properties.Write
	for _, p := range paths {
		// A field that no manager holds (one removed, or one the API
		// server defaulted) is the doing of this change's writer; when
		// managedFields do not show who that is, the trace asks the audit
		// log (attributeUnknown).
		l, ok := after[p]
		if !ok {
			l = before[p]
		}
		m := owner(owners, l.path)
		if m == "" {
			m = writer
		}
		out = append(out, properties.Write{
			At: at, Manager: m, Kind: obj.GetKind(), Name: obj.GetName(), UID: obj.GetUID(), GenerateName: obj.GetGenerateName(), Field: p, Value: after[p].value,
		})
	}
	return out
}

// latestWriter names the manager whose managedFields entry this change
// added or touched (the most recent, if several), or ManagerUnknown: a
// write that changes none of its writer's own fields (a removal of
// another's field, a second write within managedFields' one-second
// resolution) leaves its entry as it was.
func latestWriter(previous, owners []managed) string {
	before := map[string]bool{}
	for _, m := range previous {
		before[m.key] = true
	}
	if w := latest(owners, func(m managed) bool { return !before[m.key] }); w != "" {
		return w
	}
	return properties.ManagerUnknown
}

// latest returns the manager of the most recent entry that match
// accepts, or "" if none does.
func latest(sets []managed, match func(managed) bool) string {
	best, bestTime := "", time.Time{}
	for _, m := range sets {
		if match(m) && (best == "" || !m.time.Before(bestTime)) {
			best, bestTime = m.manager, m.time
		}
	}
	return best
}

func managedEntryKey(e metav1.ManagedFieldsEntry) string {
	key := e.Manager + "\x00" + string(e.Operation) + "\x00" + e.Subresource
	if e.Time != nil {
		key += "\x00" + e.Time.UTC().String()
	}
	if e.FieldsV1 != nil {
		key += "\x00" + string(e.FieldsV1.Raw)
	}
	return key
}

// owner returns the manager whose field set holds path, the most recent
// one if several do; "" if none does.
func owner(sets []managed, path fieldpath.Path) string {
	return latest(sets, func(m managed) bool { return owns(m.fields, path) })
}

// owns reports whether a field set holds path, or a prefix of it that it
// owns whole (an atomic list, a map set as one value): a manager that set
// a whole list owns what is inside.
func owns(set *fieldpath.Set, path fieldpath.Path) bool {
	for i, pe := range path {
		child, hasChildren := set.Children.Get(pe)
		if set.Members.Has(pe) && (i == len(path)-1 || !hasChildren) {
			return true
		}
		if !hasChildren {
			return false
		}
		set = child
	}
	return false
}

// recordedRoots are the parts of an object whose fields are recorded; the
// rest of metadata is the API server's bookkeeping.
var recordedRoots = map[string]bool{"spec": true, "status": true, "data": true}
var recordedMetadata = map[string]bool{"labels": true, "annotations": true, "finalizers": true, "ownerReferences": true, "deletionTimestamp": true}

// flatten writes an object's leaf fields by path: the path as the trace
// writes it (status.conditions[type=Ready].status), the value as JSON and
// the path as structured-merge-diff names it. The items of a list of
// objects are followed by the keys the managers' field sets give them (a
// port's containerPort and protocol: ports[containerPort=80,protocol=TCP]),
// else by "type", "uid" or "name" when every item has it; other lists
// are leaves. A map key with dots in it goes in brackets, as field paths
// of faults write it: metadata.labels[app.kubernetes.io/name].
func flatten(v any, path []string, fp fieldpath.Path, sets []managed, out map[string]leaf) {
	if len(path) == 1 && !recordedRoots[path[0]] && path[0] != "metadata" {
		return
	}
	if len(path) == 2 && path[0] == "metadata" {
		// metadata.labels[app.kubernetes.io/name] is under labels.
		if name, _, _ := strings.Cut(path[1], "["); !recordedMetadata[name] {
			return
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			childFP := append(slices.Clip(fp), fieldpath.FieldNameElement(k))
			if strings.ContainsAny(k, ".[]") && len(path) > 0 {
				keyed := slices.Clone(path)
				keyed[len(keyed)-1] += "[" + k + "]"
				flatten(child, keyed, childFP, sets, out)
				continue
			}
			flatten(child, append(slices.Clip(path), k), childFP, sets, out)
		}
		return
	case []any:
		if keys := listKeys(x, fp, sets); len(keys) > 0 && len(path) > 0 {
			for _, item := range x {
				m := item.(map[string]any)
				fields := make(value.FieldList, len(keys))
				shown := make([]string, len(keys))
				for i, k := range keys {
					fields[i] = value.Field{Name: k, Value: value.NewValueInterface(m[k])}
					shown[i] = fmt.Sprintf("%s=%v", k, m[k])
				}
				fields.Sort()
				elem := path[len(path)-1] + "[" + strings.Join(shown, ",") + "]"
				flatten(m, append(slices.Clone(path[:len(path)-1]), elem), append(slices.Clip(fp), fieldpath.KeyElement(fields...)), sets, out)
			}
			return
		}
	}
	if len(path) == 0 {
		return
	}
	b, _ := json.Marshal(v)
	out[strings.Join(path, ".")] = leaf{value: string(b), path: slices.Clone(fp)}
}

// listKeys returns the fields that key the items of a list of objects:
// those its managers' field sets key them by, sorted, when every item
// has them; else "type" (conditions), "uid" (ownerReferences) or "name"
// (containers), the API's usual list-map keys, when every item has it.
// None for a list of other values, or one without such keys.
func listKeys(items []any, fp fieldpath.Path, sets []managed) []string {
	everyHas := func(keys []string) bool {
		for _, item := range items {
			m, isMap := item.(map[string]any)
			if !isMap {
				return false
			}
			for _, k := range keys {
				if m[k] == nil {
					return false
				}
			}
		}
		return len(items) > 0 && len(keys) > 0
	}
	for _, m := range sets {
		if keys := keysAt(m.fields, fp); everyHas(keys) {
			return keys
		}
	}
	for _, key := range []string{"type", "uid", "name"} {
		if everyHas([]string{key}) {
			return []string{key}
		}
	}
	return nil
}

// keysAt returns the key fields of the first keyed list item a field set
// holds under path, sorted; none when it holds none.
func keysAt(set *fieldpath.Set, path fieldpath.Path) []string {
	for _, pe := range path {
		child, ok := set.Children.Get(pe)
		if !ok {
			return nil
		}
		set = child
	}
	var keys []string
	find := func(pe fieldpath.PathElement) {
		if keys == nil && pe.Key != nil {
			for _, f := range *pe.Key {
				keys = append(keys, f.Name)
			}
		}
	}
	set.Members.Iterate(find)
	set.Children.Iterate(find)
	sort.Strings(keys)
	return keys
}
