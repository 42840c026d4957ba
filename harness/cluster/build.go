package cluster

import (
	"context"
	"embed"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// modules are the build modules of hack/k8sbins (Kubernetes) and
// hack/k8sbins/etcd, modules of their own so that kubeprop's go.mod stays
// clean. A nested module's files cannot be embedded: these are renamed
// copies, which a test keeps equal to them. To move to another version,
// change hack/k8sbins, copy its go.mod and go.sum here, and change
// KubernetesVersion and EtcdVersion.
//
//go:embed modules
var modules embed.FS

// BuildOptions configures BuildBinaries. The zero value builds into
// DefaultAssetsDir with the go on PATH, silently.
type BuildOptions struct {
	// Dir is the folder to build into. Empty means DefaultAssetsDir(),
	// where the harness finds them.
	Dir string
	// Go is the go command. Empty means "go" on PATH.
	Go string
	// Log gets a line per binary: built, or there already.
	Log io.Writer
}

// binary is one binary: the package to build in which build module, with
// which linker flags.
type binary struct {
	name, module, pkg string
	ldflags           string
}

func binaries() []binary {
	v := KubernetesVersion
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	// Kubernetes reads its version from these variables; an unset version
	// makes kube-apiserver report v0.0.0 and fail its compatibility-version
	// checks.
	k8s := strings.Join([]string{"-s", "-w",
		"-X k8s.io/component-base/version.gitVersion=" + v,
		"-X k8s.io/component-base/version.gitMajor=" + parts[0],
		"-X k8s.io/component-base/version.gitMinor=" + parts[1],
		"-X k8s.io/component-base/version.gitTreeState=clean",
		"-X k8s.io/client-go/pkg/version.gitVersion=" + v,
		"-X k8s.io/client-go/pkg/version.gitMajor=" + parts[0],
		"-X k8s.io/client-go/pkg/version.gitMinor=" + parts[1],
	}, " ")
	return []binary{
		{name: binEtcd, module: "etcd", pkg: ".", ldflags: "-s -w"},
		{name: binAPIServer, module: "k8s", pkg: "k8s.io/kubernetes/cmd/" + binAPIServer, ldflags: k8s},
		{name: binControllerManager, module: "k8s", pkg: "k8s.io/kubernetes/cmd/" + binControllerManager, ldflags: k8s},
		{name: binScheduler, module: "k8s", pkg: "k8s.io/kubernetes/cmd/" + binScheduler, ldflags: k8s},
	}
}

// BuildBinaries builds, from the Go module proxy with the Go toolchain,
// every cluster binary missing from the folder, and returns the folder:
// `kubeprop bins` and `make bins` call it. A binary is written under a temporary name and renamed once
// built: an interrupted or failed build leaves nothing that a later run
// (or the harness) could take for a built binary.
func BuildBinaries(ctx context.Context, opts BuildOptions) (string, error) {
	dir := opts.Dir
	if dir == "" {
		var err error
		if dir, err = DefaultAssetsDir(); err != nil {
			return "", err
		}
	}
	// go build runs in a module folder of its own: a relative -o would
	// land there, not here.
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("the folder %s: %w", opts.Dir, err)
	}
	log := opts.Log
	if log == nil {
		log = io.Discard
	}
	var missing []binary
	for _, b := range binaries() {
		if executable(filepath.Join(dir, b.name)) {
			fmt.Fprintf(log, "%s: there already\n", b.name)
			continue
		}
		missing = append(missing, b)
	}
	if len(missing) == 0 {
		return dir, nil
	}
	goCmd := opts.Go
	if goCmd == "" {
		goCmd = "go"
	}
	goPath, err := exec.LookPath(goCmd)
	if err != nil {
		return "", fmt.Errorf("building the cluster binaries needs the Go toolchain, and %q is not on PATH: install Go 1.26 or newer (https://go.dev/dl/): %w", goCmd, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the folder %s cannot be created: %w; give another with --dir", dir, err)
	}
	probe, err := os.CreateTemp(dir, ".kubeprop-write-*")
	if err != nil {
		return "", fmt.Errorf("the folder %s cannot be written: %w; give another with --dir", dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	for _, b := range missing {
		fmt.Fprintf(log, "%s: building %s (the first build takes minutes)\n", b.name, versionOf(b))
		if err := build(ctx, goPath, dir, b); err != nil {
			return "", err
		}
		fmt.Fprintf(log, "%s: built\n", b.name)
	}
	return dir, nil
}

func versionOf(b binary) string {
	if b.name == binEtcd {
		return "v" + EtcdVersion
	}
	return KubernetesVersion
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// build builds one binary in a copy of its build module.
func build(ctx context.Context, goPath, dir string, b binary) error {
	mod, err := os.MkdirTemp("", "kubeprop-bins-")
	if err != nil {
		return fmt.Errorf("building %s: %w", b.name, err)
	}
	defer os.RemoveAll(mod)
	files := map[string]string{b.module + ".go.mod": "go.mod", b.module + ".go.sum": "go.sum"}
	if b.module == "etcd" {
		files["etcd.main.go.txt"] = "main.go"
	}
	for from, to := range files {
		data, err := modules.ReadFile("modules/" + from)
		if err != nil {
			return fmt.Errorf("building %s: %w", b.name, err)
		}
		if err := os.WriteFile(filepath.Join(mod, to), data, 0o644); err != nil {
			return fmt.Errorf("building %s: %w", b.name, err)
		}
	}
	partial := filepath.Join(dir, "."+b.name+".partial")
	defer os.Remove(partial)
	cmd := exec.CommandContext(ctx, goPath, "build", "-trimpath", "-ldflags", b.ldflags, "-o", partial, b.pkg)
	cmd.Dir = mod
	// The build module's go.sum is complete: nothing of the user's
	// environment (a workspace, -mod=vendor) applies to it.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		proxy, _ := exec.Command(goPath, "env", "GOPROXY").Output()
		return fmt.Errorf("building %s: go build failed (%w); it downloads modules through GOPROXY=%s, so check that it is reachable; its output ends:\n%s",
			b.name, err, strings.TrimSpace(string(proxy)), lastLines(string(out), 10))
	}
	if err := os.Rename(partial, filepath.Join(dir, b.name)); err != nil {
		return fmt.Errorf("building %s: %w", b.name, err)
	}
	return nil
}
