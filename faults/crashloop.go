package faults

import (
	"context"

	"pgregory.net/rapid"
)

// CrashLoopStep makes the first container of the namespace's Pod-th pod
// (by name, modulo their number) crash Starts times with ExitCode: at once,
// then a second after each start. The kubelet restarts it with
// CrashLoopBackOff; the loop ends at the heal at the latest.
type CrashLoopStep struct {
	Pod      int   `json:"pod"`
	Starts   int   `json:"starts"`
	ExitCode int32 `json:"exitCode"`
}

func (CrashLoopStep) Fault() string { return "CrashLoop" }

func (s CrashLoopStep) Apply(ctx context.Context, t Target) error {
	p, err := podAt(ctx, t, "", s.Pod)
	if err != nil {
		return err
	}
	return t.CrashLoop(ctx, p.Name, p.Spec.Containers[0].Name, max(1, s.Starts), s.ExitCode)
}

// CrashLoop is the crash-loop fault.
func CrashLoop() Fault { return crashLoop{} }

type crashLoop struct{}

func (crashLoop) Name() string { return CrashLoopStep{}.Fault() }

func (crashLoop) Steps(Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return CrashLoopStep{
			Pod:      intIn(t, 0, 9, "pod"),
			Starts:   amountIn(t, 1, maxStarts, "starts"),
			ExitCode: rapid.SampledFrom([]int32{1, 2, 137}).Draw(t, "exitCode"),
		}
	})
}

var _ Aimer = crashLoop{}

// Aims: when the controller makes pods (or may: Config.WritesKnown), one of them
// crash-looping as long as the fault goes, the template's crash that
// every replacement meets too: what a controller that replaces failing
// pods must back off from.
func (crashLoop) Aims(c Config) []*rapid.Generator[Step] {
	if !c.makesPods() {
		return nil
	}
	return []*rapid.Generator[Step]{rapid.Custom(func(t *rapid.T) Step {
		return CrashLoopStep{
			Pod:      intIn(t, 0, 9, "pod"),
			Starts:   maxStarts,
			ExitCode: rapid.SampledFrom([]int32{1, 2, 137}).Draw(t, "exitCode"),
		}
	})}
}

// maxStarts is the most starts a CrashLoop step draws.
const maxStarts = 5

func (crashLoop) Decode(b []byte) (Step, error) { return decodeStep[CrashLoopStep](b) }
