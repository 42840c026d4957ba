# kubeprop's build. `make bins` builds the hollow cluster's binaries from the Go
# module proxy into bin/k8s/$(K8S_VERSION)/ (once; later runs skip what exists).

K8S_VERSION  := v1.37.2
ETCD_VERSION := v3.6.16
BIN          := bin/k8s/$(K8S_VERSION)
GO           ?= go
TEST_FLAGS   ?= -race -count=1 -timeout 80m

# Kubernetes reads its version from these variables; an unset version makes
# kube-apiserver report v0.0.0 and fail its compatibility-version checks.
K8S_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION:v%=%))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION:v%=%))) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/client-go/pkg/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/client-go/pkg/version.gitMajor=$(word 1,$(subst ., ,$(K8S_VERSION:v%=%))) \
	-X k8s.io/client-go/pkg/version.gitMinor=$(word 2,$(subst ., ,$(K8S_VERSION:v%=%)))

KUBE_BINS := kube-apiserver kube-controller-manager kube-scheduler

.PHONY: all bins test bench demo clean-bins

all: bins

bins: $(addprefix $(BIN)/,$(KUBE_BINS)) $(BIN)/etcd

$(addprefix $(BIN)/,$(KUBE_BINS)): $(BIN)/%: hack/k8sbins/go.mod
	@mkdir -p $(BIN)
	@echo "building $* $(K8S_VERSION) (first time: several minutes)"
	cd hack/k8sbins && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(K8S_LDFLAGS)" -o $(CURDIR)/$@ k8s.io/kubernetes/cmd/$*

$(BIN)/etcd: hack/k8sbins/etcd/go.mod hack/k8sbins/etcd/main.go
	@mkdir -p $(BIN)
	@echo "building etcd $(ETCD_VERSION)"
	cd hack/k8sbins/etcd && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(CURDIR)/$@ .

# The tests build the binaries first when they are missing.
test: bins
	$(GO) test $(TEST_FLAGS) ./...

# The benchmarks, then the detection report: each seeded bug searched
# with seeds 1..BENCH_SEEDS (time to the first failure and to the shrunk
# plan, shrunk length), the correct controllers' checks per minute and
# false alarms.
BENCH_SEEDS ?= 3
bench: bins
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...
	$(GO) run ./hack/demo -seeds $(BENCH_SEEDS)

# The main job: the conformance suite on the bundled controllers (the
# correct PodSet controller and its seeded bugs), a table of the outcomes,
# scenarios in testdata/kubeprop/, HTML timelines in reports/.
# DEMO_FLAGS passes flags on, e.g. DEMO_FLAGS='-only stalecache -rapid.seed=7'.
demo: bins
	$(GO) run ./hack/demo $(DEMO_FLAGS)

clean-bins:
	rm -rf bin/k8s
