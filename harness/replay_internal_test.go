package harness

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeprop/kubeprop/harness/scenario"
)

// TestReplayEvidence: a replay that misses what its scenario expects
// keeps its own log, events and objects in the test's artifact folder,
// named after the scenario, and says where; without -artifacts, the
// failure says how to keep them.
func TestReplayEvidence(t *testing.T) {
	rep := &Report{
		ControllerLog: []byte("reconciling web\n"),
		Events:        []corev1.Event{{ObjectMeta: metav1.ObjectMeta{Name: "web.1"}, Reason: "Scheduled"}},
	}
	dir := t.TempDir()
	file := filepath.Join("testdata", "kubeprop", "TestX", "converges-1.yaml")
	got := replayEvidence(dir, file, rep)
	log, events, objects := scenario.Evidence(filepath.Join(dir, "converges-1.yaml"))
	require.Contains(t, got, "this replay's log: "+log)
	require.Contains(t, got, events)
	require.Contains(t, got, objects)
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Equal(t, "reconciling web\n", string(b))
	b, err = os.ReadFile(events)
	require.NoError(t, err)
	require.Contains(t, string(b), "reason: Scheduled")
	require.FileExists(t, objects)

	require.Equal(t, "\n    (go test -artifacts keeps this replay's log, events and objects)", replayEvidence("", file, rep))
	if f := flag.Lookup("test.artifacts"); f.Value.String() != "true" {
		require.Empty(t, artifactDir(t), "no -artifacts: nothing kept")
	}
}
