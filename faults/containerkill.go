package faults

import (
	"context"

	"pgregory.net/rapid"
)

// ContainerKillStep ends the first container of the namespace's Pod-th pod
// (by name, modulo their number; of the pods that Selector matches, when
// set) with an exit code: 137 is an OOM kill. The kubelet restarts it per
// restartPolicy, with CrashLoopBackOff.
type ContainerKillStep struct {
	Pod      int    `json:"pod"`
	ExitCode int32  `json:"exitCode"`
	Selector string `json:"selector,omitempty"`
}

func (ContainerKillStep) Fault() string { return "ContainerKill" }

func (s ContainerKillStep) Apply(ctx context.Context, t Target) error {
	p, err := podAt(ctx, t, s.Selector, s.Pod)
	if err != nil {
		return err
	}
	reason := "Error"
	if s.ExitCode == 137 {
		reason = "OOMKilled"
	}
	return t.KillContainer(ctx, p.Name, p.Spec.Containers[0].Name, s.ExitCode, reason)
}

// ContainerKillOptions configures ContainerKill.
type ContainerKillOptions struct {
	// Selector is a label selector of the pods whose containers are
	// killed, e.g. ray.io/node-type=worker. Empty means every pod.
	Selector string
}

// ContainerKill is the container-kill fault.
func ContainerKill(opts ContainerKillOptions) Fault { return containerKill{opts: opts} }

type containerKill struct{ opts ContainerKillOptions }

var _ Validator = containerKill{}

func (f containerKill) Validate() error { return checkSelector(f.Name(), f.opts.Selector) }

func (containerKill) Name() string { return ContainerKillStep{}.Fault() }

func (f containerKill) Steps(c Config) *rapid.Generator[Step] {
	return rapid.Custom(func(t *rapid.T) Step {
		return ContainerKillStep{
			Pod:      intIn(t, 0, 9, "pod"),
			ExitCode: rapid.SampledFrom([]int32{137, 1, 2, 143}).Draw(t, "exitCode"),
			Selector: f.opts.Selector,
		}
	})
}

func (containerKill) Decode(b []byte) (Step, error) { return decodeStep[ContainerKillStep](b) }
