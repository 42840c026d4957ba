package faults

import (
	"context"

	"pgregory.net/rapid"
)

// CrashAfterWriteStep kills the controller right after one of its API
// writes and starts a new instance with a cold cache: what a crash between
// two writes leaves behind, the new instance must repair. It stays armed
// until that write or the heal.
//
// Which write: the Writes-th from the step on whose verb is Verb ("create",
// "update", "patch", "delete") and whose resource is Resource ("pods",
// "podsets/status"); an empty Verb or Resource matches any. A search draws
// the step unnamed (the k-th write of any kind); the case names it by the
// write it crashed after (the first create of pods), and that named step is
// what the report, the shrinker and the scenario file carry: "the k-th
// write" falls on another write whenever the controller's timing differs,
// the named one does not.
type CrashAfterWriteStep struct {
	Verb     string `json:"verb,omitempty"`
	Resource string `json:"resource,omitempty"`
	Writes   int    `json:"writes"`
}

func (CrashAfterWriteStep) Fault() string { return "CrashAfterWrite" }

var _ AimedAtWrite = CrashAfterWriteStep{}

// AimedWrite is the write the step names (none: every write).
func (s CrashAfterWriteStep) AimedWrite() WriteMatch {
	return WriteMatch{Verb: s.Verb, Resource: s.Resource}
}

// Armed: it acts on what the controller does after it.
func (CrashAfterWriteStep) Armed() {}

var _ ActsOnNext = CrashAfterWriteStep{}

// ActsOnNext: a crash after the k-th write of any kind is in what the
// next user change provokes.
func (s CrashAfterWriteStep) ActsOnNext() bool { return s.Verb == "" && s.Resource == "" }

func (s CrashAfterWriteStep) Apply(_ context.Context, t Target) error {
	return t.CrashAfterWrites(WriteMatch{Verb: s.Verb, Resource: s.Resource}, max(1, s.Writes))
}

var _ Simplifiable = CrashAfterWriteStep{}

// Simpler: a crash after the first write.
func (s CrashAfterWriteStep) Simpler() []Step {
	if s.Writes <= 1 {
		return nil
	}
	return []Step{CrashAfterWriteStep{Verb: s.Verb, Resource: s.Resource, Writes: 1}}
}

// WriteMatch names the writes a CrashAfterWrite counts; empty fields match
// any.
type WriteMatch struct {
	Verb     string
	Resource string // with its subresource: "podsets/status"
}

// Matches reports whether a write of verb to resource is one of these.
func (m WriteMatch) Matches(verb, resource string) bool {
	return (m.Verb == "" || m.Verb == verb) && (m.Resource == "" || m.Resource == resource)
}

// CrashAfterWrite is the crash-between-writes fault.
func CrashAfterWrite() Fault { return crashAfterWrite{} }

type crashAfterWrite struct{}

func (crashAfterWrite) Name() string { return CrashAfterWriteStep{}.Fault() }

func (crashAfterWrite) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return CrashAfterWriteStep{Writes: amountIn(t, 1, 4, "writes")}
	})
}

var _ Aimer = crashAfterWrite{}

// Aims: a crash after each of the controller's writes, its first to
// third from the step on; its writes not known, a crash after the first
// write of any kind, before each user change (ActsOnNext): a change
// provokes a sequence of writes, and the state between its first two (a
// record written ahead of what it records, one object of two made) is
// there whatever the controller writes.
func (crashAfterWrite) Aims(c Config) []*rapid.Generator[Step] {
	if !c.WritesKnown {
		return []*rapid.Generator[Step]{rapid.Just[Step](CrashAfterWriteStep{Writes: 1})}
	}
	var out []*rapid.Generator[Step]
	for _, w := range c.Writes {
		out = append(out, rapid.Custom(func(t *rapid.T) Step {
			return CrashAfterWriteStep{Verb: w.Verb, Resource: w.Resource, Writes: amountIn(t, 1, 3, "writes")}
		}))
	}
	return out
}

func (crashAfterWrite) Decode(b []byte) (Step, error) { return decodeStep[CrashAfterWriteStep](b) }
