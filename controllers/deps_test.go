package controllers_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBinariesFreeOfHarness: the bundled controllers' binaries link
// neither the harness nor rapid (the specs that run them live in
// controllers/suite), so a controller binary carries no test machinery,
// flags or init of kubeprop's.
func TestBinariesFreeOfHarness(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "./clientgopodset/cmd/podset-controller", "./database/cmd/database-operator").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	for _, dep := range strings.Fields(string(out)) {
		require.False(t, dep == "github.com/kubeprop/kubeprop/harness" || strings.HasPrefix(dep, "github.com/kubeprop/kubeprop/harness/") || dep == "pgregory.net/rapid",
			"a controller binary links %s: keep the harness's imports in controllers/suite", dep)
	}
}
