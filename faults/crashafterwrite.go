package faults

import (
	"context"

	"pgregory.net/rapid"
)

// CrashAfterWriteStep kills the controller right after its Writes-th API
// write from now on, wherever in a reconcile that falls, and starts a new
// instance with a cold cache: what a crash between two writes leaves
// behind, the new instance must repair. It stays armed until that write
// or the heal.
type CrashAfterWriteStep struct {
	Writes int `json:"writes"`
}

func (CrashAfterWriteStep) Fault() string { return "CrashAfterWrite" }

func (s CrashAfterWriteStep) Apply(_ context.Context, t Target) error {
	return t.CrashAfterWrites(max(1, s.Writes))
}

func (s CrashAfterWriteStep) simpler() []Step {
	if s.Writes <= 1 {
		return nil
	}
	return []Step{CrashAfterWriteStep{Writes: 1}}
}

// CrashAfterWrite is the crash-between-writes fault.
func CrashAfterWrite() Fault { return crashAfterWrite{} }

type crashAfterWrite struct{}

func (crashAfterWrite) Name() string { return CrashAfterWriteStep{}.Fault() }

func (crashAfterWrite) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return CrashAfterWriteStep{Writes: intIn(t, 1, 4, "writes")}
	})
}

func (crashAfterWrite) Decode(b []byte) (Step, error) { return decodeStep[CrashAfterWriteStep](b) }
