package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestModulesMatchHack: the embedded build modules are hack/k8sbins's,
// which make bins built from before and where versions are changed.
func TestModulesMatchHack(t *testing.T) {
	for embedded, hack := range map[string]string{
		"k8s.go.mod": "go.mod", "k8s.go.sum": "go.sum",
		"etcd.go.mod": "etcd/go.mod", "etcd.go.sum": "etcd/go.sum", "etcd.main.go.txt": "etcd/main.go",
	} {
		want, err := os.ReadFile(filepath.Join("..", "..", "hack", "k8sbins", hack))
		require.NoError(t, err)
		got, err := modules.ReadFile("modules/" + embedded)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "harness/cluster/modules/%s differs from hack/k8sbins/%s: copy it over", embedded, hack)
	}
}

// fakeGo is a go command that writes half a binary and fails, as a build
// cut off by a lost network would.
func fakeGo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "go")
	script := `#!/bin/sh
if [ "$1" = env ]; then echo https://proxy.example; exit 0; fi
while [ "$1" != "-o" ]; do shift; done
echo half > "$2"
echo 'go: k8s.io/kubernetes@v1.37.2: Get "https://proxy.example/k8s.io/kubernetes/@v/v1.37.2.zip": dial tcp: lookup proxy.example: no such host' >&2
exit 1
`
	require.NoError(t, os.WriteFile(path, []byte(script), 0o755))
	return path
}

func TestBuildBinaries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	// A failed build names the cause and leaves nothing that passes for
	// a binary.
	_, err := BuildBinaries(ctx, BuildOptions{Dir: dir, Go: fakeGo(t)})
	require.ErrorContains(t, err, "building etcd: go build failed")
	require.ErrorContains(t, err, "GOPROXY=https://proxy.example")
	require.ErrorContains(t, err, "no such host")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "a failed build left files behind")

	// No Go toolchain: a clear error, before anything is written.
	_, err = BuildBinaries(ctx, BuildOptions{Dir: filepath.Join(dir, "new"), Go: "no-such-go"})
	require.ErrorContains(t, err, `needs the Go toolchain, and "no-such-go" is not on PATH: install Go`)
	require.NoDirExists(t, filepath.Join(dir, "new"))

	// A folder that cannot be written.
	_, err = BuildBinaries(ctx, BuildOptions{Dir: "/proc/kubeprop-bins", Go: fakeGo(t)})
	require.ErrorContains(t, err, "/proc/kubeprop-bins cannot be created")
	require.ErrorContains(t, err, "give another with --dir")

	// What is there is not built again: no toolchain needed.
	for _, b := range binaries() {
		require.NoError(t, os.WriteFile(filepath.Join(dir, b.name), []byte("#!/bin/sh\n"), 0o755))
	}
	var log strings.Builder
	got, err := BuildBinaries(ctx, BuildOptions{Dir: dir, Go: "no-such-go", Log: &log})
	require.NoError(t, err)
	require.Equal(t, dir, got)
	require.Equal(t, 4, strings.Count(log.String(), ": there already"))

	// The default folder is the harness's last place to look.
	t.Setenv("XDG_CACHE_HOME", dir)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "kubeprop", "k8s"), 0o755))
	_, err = BuildBinaries(ctx, BuildOptions{Go: "no-such-go"})
	require.ErrorContains(t, err, "is not on PATH")
}

// TestBuildBinariesRelativeDir: go build runs in a module folder of its
// own, so a relative folder (make bins gives bin/k8s/<version>) must be
// made absolute before it reaches -o.
func TestBuildBinariesRelativeDir(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "go")
	require.NoError(t, os.WriteFile(fake, []byte(`#!/bin/sh
while [ "$1" != "-o" ]; do shift; done
printf '#!/bin/sh\n' > "$2"
chmod +x "$2"
`), 0o755))
	t.Chdir(t.TempDir())
	got, err := BuildBinaries(context.Background(), BuildOptions{Dir: filepath.Join("bin", "k8s"), Go: fake})
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(got), "BuildBinaries returned %q", got)
	for _, b := range binaries() {
		require.FileExists(t, filepath.Join("bin", "k8s", b.name))
	}
}
