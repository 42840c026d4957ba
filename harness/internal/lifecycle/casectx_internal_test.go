package lifecycle

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGoroutinesOf: the goroutines a case's controller started, and the
// ones they started, are named by the case's label and no other case's.
func TestGoroutinesOf(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 3)
	c := &caseRun{namespace: "kp-7"}
	c.goLabelled(context.Background(), func(context.Context) {
		go blockUntil(release, started) // inherits the label
		blockUntil(release, started)
	})
	(&caseRun{namespace: "kp-77"}).goLabelled(context.Background(), func(context.Context) { blockUntil(release, started) })
	for range 3 {
		<-started
	}
	require.Regexp(t, regexp.MustCompile(`^2 in github.com/kubeprop/kubeprop/harness/internal/lifecycle.blockUntil \(casectx_internal_test.go:\d+\)$`), goroutinesOf("kp-7"))
	require.Equal(t, "none", goroutinesOf("kp-8"))
}

func blockUntil(release <-chan struct{}, started chan<- struct{}) {
	started <- struct{}{}
	<-release
}
