package cluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kubeprop/kubeprop/harness/cluster"
)

// A control plane at ten times real time: the node monitor's grace period
// of 50 s passes in 5 s.
func ExampleStart() {
	c, err := cluster.Start(context.Background(), cluster.Options{TimeScale: 10})
	if err != nil {
		fmt.Println(err) // e.g. which binary is missing, and `make bins`
		return
	}
	defer c.Stop()
	fmt.Println(c.Scaled(50 * time.Second)) // wall time of 50 cluster seconds
	fmt.Println(c.AuditLogPath() != "")
}
