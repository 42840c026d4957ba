package harness

import (
	"github.com/kubeprop/kubeprop/harness/internal/lifecycle"
)

// Start starts a hollow cluster and returns when it can schedule and run
// pods (once nodes are added). On error nothing is left running. In a
// test binary given -kubeprop.list it starts none (Check only lists
// plans then): the Env returned runs no case.
func Start(opts EnvOptions) (*Env, error) {
	if listing() {
		return &Env{}, nil
	}
	return lifecycle.Start(opts)
}

// MustStart is Start for TestMain: it panics with Start's error, which says
// what is wrong and how to fix it.
func MustStart(opts EnvOptions) *Env {
	env, err := Start(opts)
	if err != nil {
		panic("kubeprop: " + err.Error())
	}
	return env
}
