package faults

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// EncodeStep renders a step for a scenario file: its fields, and its
// fault's name under "fault".
func EncodeStep(s Step) (map[string]any, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", Format(s), err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("encoding %s: %w", Format(s), err)
	}
	m["fault"] = s.Fault()
	return m, nil
}

// DecodeStep reads a step of a scenario file, looking its fault up in
// known (a Spec's faults, then the catalog). Unknown faults and fields are
// errors that say what is known.
func DecodeStep(m map[string]any, known []Fault) (Step, error) {
	name, ok := m["fault"].(string)
	if !ok {
		return nil, fmt.Errorf("a step has no fault name: %v; write it as {fault: NodeLoss, node: 0}", m)
	}
	var f Fault
	var names []string
	for _, k := range known {
		if k.Name() == name && f == nil {
			f = k
		}
		if !slices.Contains(names, k.Name()) {
			names = append(names, k.Name())
		}
	}
	if f == nil {
		slices.Sort(names)
		return nil, fmt.Errorf("unknown fault %q; the known faults are %s", name, strings.Join(names, ", "))
	}
	fields := map[string]any{}
	for k, v := range m {
		if k != "fault" {
			fields[k] = v
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	return f.Decode(b)
}
