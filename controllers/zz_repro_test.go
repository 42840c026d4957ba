package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/kubeprop/kubeprop/controllers/suite"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
)

func TestZZRepro(t *testing.T) {
	var spec harness.Spec
	for _, tg := range suite.Targets() {
		if tg.Name == "clientgo-podset" {
			spec = tg.Spec
		}
	}
	plan := []faults.Step{
		faults.APIErrorsStep{Error: faults.Conflict, Requests: 6},
		faults.ReadinessFlapStep{Pod: 4},
		faults.ScaleChangeStep{Object: 0, Field: "spec.replicas", Value: 0},
		faults.APIErrorsStep{Error: faults.TooManyRequests, ForMs: 3500},
		faults.ReadinessFlapStep{Pod: 9},
	}
	var wg sync.WaitGroup
	for round := range 3 {
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep, err := harness.Run(context.Background(), env, spec, plan)
				if err != nil {
					fmt.Println("ERR", err)
					return
				}
				if !rep.Failed() {
					fmt.Println(round, i, "pass")
					return
				}
				f := rep.Failures[0]
				fmt.Println(round, i, "FAIL", f.Message, "|", f.Detail)
				for _, r := range rep.Trace.Requests {
					if r.Verb != "get" && r.Verb != "list" && r.Verb != "watch" {
						fmt.Println("   ", r.At.Format("15:04:05.000"), r.Verb, r.Resource, r.Subresource, r.Name, r.Code, r.User, r.UserAgent)
					}
				}
				for _, r := range rep.Trace.Reconciles {
					fmt.Println("   rec", r.At.Format("15:04:05.000"), r.Key, r.Err, r.Requeue)
				}
			}()
		}
		wg.Wait()
	}
}
