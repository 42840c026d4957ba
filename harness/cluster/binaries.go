package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Versions of the binaries the harness is built and tested against. `make
// bins` builds exactly these.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "3.6.16"
)

// Binary names, as `make bins` writes them.
const (
	binEtcd              = "etcd"
	binAPIServer         = "kube-apiserver"
	binControllerManager = "kube-controller-manager"
	binScheduler         = "kube-scheduler"
)

var allBinaries = []string{binEtcd, binAPIServer, binControllerManager, binScheduler}

const (
	envAssets           = "KUBEPROP_ASSETS"
	envKubebuilderAssts = "KUBEBUILDER_ASSETS"
)

// ErrBinariesMissing is wrapped by the error Start returns when a cluster
// binary cannot be found.
var ErrBinariesMissing = errors.New("cluster binaries missing")

// DefaultAssetsDir is where `kubeprop bins` builds the cluster binaries
// unless told otherwise, and the last place the harness looks for them:
// kubeprop/k8s/<KubernetesVersion> in the user's cache folder
// (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux).
func DefaultAssetsDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user's cache folder for the cluster binaries: %w; set KUBEPROP_ASSETS", err)
	}
	return filepath.Join(cache, "kubeprop", "k8s", KubernetesVersion), nil
}

// findAssets returns the folder that holds the cluster binaries: dir if set,
// else $KUBEPROP_ASSETS, else $KUBEBUILDER_ASSETS, else the first
// bin/k8s/<KubernetesVersion> found walking up from the working directory,
// else DefaultAssetsDir if it exists.
func findAssets(dir string) (string, error) {
	for _, d := range []string{dir, os.Getenv(envAssets), os.Getenv(envKubebuilderAssts)} {
		if d != "" {
			return d, checkAssets(d)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding cluster binaries: %w", err)
	}
	rel := filepath.Join("bin", "k8s", KubernetesVersion)
	for d := wd; ; d = filepath.Dir(d) {
		candidate := filepath.Join(d, rel)
		if st, err := os.Stat(candidate); err == nil && st.IsDir() {
			return candidate, checkAssets(candidate)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	cache, err := DefaultAssetsDir()
	if err != nil {
		return "", err
	}
	if st, err := os.Stat(cache); err == nil && st.IsDir() {
		return cache, checkAssets(cache)
	}
	return "", fmt.Errorf("%w: not in %s, no %s in %s or any folder above it, and neither %s nor %s is set; run `go run github.com/kubeprop/kubeprop/cmd/kubeprop bins` (it builds them into %s, about 9 minutes the first time; `make bins` in the kubeprop checkout), or set %s to a folder with %s",
		ErrBinariesMissing, cache, rel, wd, envAssets, envKubebuilderAssts, cache, envAssets, strings.Join(allBinaries, ", "))
}

// checkAssets reports every binary missing from dir in one error.
func checkAssets(dir string) error {
	var missing []string
	for _, b := range allBinaries {
		if !executable(filepath.Join(dir, b)) {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not found (or not executable) in %s; run `kubeprop bins --dir %[3]s` (or `make bins` in the kubeprop checkout) to build them, or point %[4]s at a folder that has them",
			ErrBinariesMissing, strings.Join(missing, ", "), dir, envAssets)
	}
	return nil
}

var (
	kubeVersionRE = regexp.MustCompile(`Kubernetes (v\d+\.\d+\.\d+\S*)`)
	etcdVersionRE = regexp.MustCompile(`etcd Version: (\d+\.\d+\.\d+\S*)`)
)

// checkVersions runs each binary with --version and compares what it reports
// with the version the harness needs. Only the minor version has to match:
// a patch release of the same minor behaves the same for the harness.
func checkVersions(dir string) error {
	for _, b := range allBinaries {
		want, re := KubernetesVersion, kubeVersionRE
		if b == binEtcd {
			want, re = EtcdVersion, etcdVersionRE
		}
		path := filepath.Join(dir, b)
		out, err := exec.Command(path, "--version").CombinedOutput()
		if err != nil {
			return fmt.Errorf("running %s --version: %w (output: %s)", path, err, lastLines(string(out), 5))
		}
		m := re.FindStringSubmatch(string(out))
		if m == nil {
			return fmt.Errorf("%s --version printed no version (%q); rebuild it with `make bins`", path, strings.TrimSpace(string(out)))
		}
		if minor(m[1]) != minor(want) {
			return fmt.Errorf("%s is version %s, the harness needs %s; run `make bins` (it builds %s into bin/k8s/%s) or point %s at binaries of that version",
				path, m[1], want, want, KubernetesVersion, envAssets)
		}
	}
	return nil
}

// minor returns "1.37" of "v1.37.2".
func minor(v string) string {
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return v
	}
	return parts[0] + "." + parts[1]
}
