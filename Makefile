# kubeprop's build. `make bins` builds the hollow cluster's binaries from the Go
# module proxy into the user cache, linked from bin/k8s/$(K8S_VERSION)/ (once;
# later runs skip what exists).

K8S_VERSION  := v1.37.2
BIN          := bin/k8s/$(K8S_VERSION)
GO           ?= go
TEST_FLAGS   ?= -race -count=1 -timeout 80m

# KubeRay's ray-operator: a real third-party operator that the tests run as
# a binary (harness.Process, cmd/kubeprop). Built from the module proxy in
# its own module (hack/kuberay) with its CRDs beside it.
KUBERAY_VERSION := v1.5.0
KUBERAY         := bin/kuberay/$(KUBERAY_VERSION)

.PHONY: all bins k8s-bins kuberay podset-controller database-operator chromium test bench demo soak clean-bins

all: bins

bins: k8s-bins $(KUBERAY)/ray-operator podset-controller database-operator

# The cluster binaries, by the builder of `kubeprop bins` (cluster.BuildBinaries,
# which embeds hack/k8sbins's build modules), into the user cache where
# `kubeprop bins` puts them (so that a spec folder or a module outside this
# checkout finds them too), with $(BIN) a link to that folder. It skips those
# already built; a $(BIN) of files (an older checkout's) moves there first.
USER_BIN = $${XDG_CACHE_HOME:-$$HOME/.cache}/kubeprop/k8s/$(K8S_VERSION)
k8s-bins:
	@if [ -d $(BIN) ] && [ ! -L $(BIN) ]; then \
		mkdir -p "$(USER_BIN)" && \
		for b in etcd kube-apiserver kube-controller-manager kube-scheduler; do \
			[ -f $(BIN)/$$b ] && [ ! -e "$(USER_BIN)/$$b" ] && mv $(BIN)/$$b "$(USER_BIN)/$$b"; \
		done; \
		rm -rf $(BIN); \
	fi
	$(GO) run ./cmd/kubeprop bins --dir "$(USER_BIN)"
	@mkdir -p $(dir $(BIN)) && ln -sfn "$(USER_BIN)" $(BIN)

kuberay: $(KUBERAY)/ray-operator

$(KUBERAY)/ray-operator: hack/kuberay/go.mod
	@mkdir -p $(KUBERAY)/crds
	@echo "building ray-operator $(KUBERAY_VERSION)"
	cd hack/kuberay && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(CURDIR)/$@ github.com/ray-project/kuberay/ray-operator
	cp "$$(cd hack/kuberay && $(GO) list -m -f '{{.Dir}}' github.com/ray-project/kuberay/ray-operator)"/config/crd/bases/*.yaml $(KUBERAY)/crds/
	@chmod u+w $(KUBERAY)/crds/*.yaml

# The bundled client-go PodSet controller as a binary, for kubeprop run
# (testdata/podset). go build is incremental: it always runs.
podset-controller:
	$(GO) build -o bin/podset-controller ./controllers/clientgopodset/cmd/podset-controller

# The bundled Database operator as a binary, for kubeprop run
# (testdata/database).
database-operator:
	$(GO) build -o bin/database-operator ./controllers/database/cmd/database-operator

# Chromium, in which the tests open the timeline pages and make demo takes
# their screenshots: Debian's package, installed when none is found (as
# root, or through sudo). KUBEPROP_CHROMIUM names another binary.
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || command -v google-chrome >/dev/null || \
		[ -n "$$KUBEPROP_CHROMIUM" ] || { \
		echo "installing Debian's chromium package (for the timeline pages' test and screenshots)"; \
		if [ "$$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; }

# The tests build the binaries first when they are missing.
test: bins chromium
	$(GO) test $(TEST_FLAGS) ./...

# The benchmarks, then the detection report: each seeded bug searched
# with seeds 1..BENCH_SEEDS (time to the first failure and to the shrunk
# plan, shrunk length), the correct controllers' checks per minute and
# false alarms. Each bug is searched with the faults that reveal it, as go
# test does; BENCH_FLAGS= (empty) searches every fault.
# Last, how often each saved scenario reproduces what it expects, over
# BENCH_REPLAYS replays.
BENCH_SEEDS ?= 3
BENCH_FLAGS ?= -focused
BENCH_REPLAYS ?= 5
bench: bins
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...
	$(GO) run ./hack/demo -checks 20 -shrinktime 2m -seeds $(BENCH_SEEDS) $(BENCH_FLAGS)
	$(GO) test -count=1 -timeout 60m -run '^TestSavedScenarios$$' -v ./controllers -kubeprop.replay.count=$(BENCH_REPLAYS) 2>&1 | \
		grep -E 'kubeprop: .*(reproduced|passed) [0-9]+ of [0-9]+|failed in [0-9]+ of|held in all|--- FAIL'

# The main job: the conformance suite on the bundled controllers (the
# correct PodSet controller and its seeded bugs), a table of the outcomes,
# scenarios in reports/scenarios/, HTML timelines and their screenshots
# (without Chromium, none) in reports/.
# Exit 1 only when a correct controller failed or the harness did: a seeded
# bug missed is in the table and the summary line.
# DEMO_FLAGS passes flags on, e.g. DEMO_FLAGS='-only stalecache -seed 7'.
demo: bins
	-@$(MAKE) --no-print-directory chromium
	$(GO) run ./hack/demo -checks 20 -shrinktime 2m $(DEMO_FLAGS)

# The soak: SOAK_CASES cases of the correct PodSet controller (SOAK_TARGETS:
# comma-separated suite targets) in one process, harness.DefaultParallel at
# once (KUBEPROP_PARALLEL), each a plan of every fault; a line every 100 cases with the failures, the
# process's RSS, heap and goroutines, the case namespaces and pods left and
# the API server's RSS, then the growth over the run. Not part of test or
# bench: it runs for an hour or more. SOAK_FLAGS passes flags on, e.g. SOAK_FLAGS='-every 10 -seed 7'.
SOAK_CASES   ?= 1000
SOAK_TARGETS ?= podset
SOAK_FLAGS   ?=
soak: bins
	$(GO) run ./hack/soak -cases $(SOAK_CASES) -targets $(SOAK_TARGETS) $(SOAK_FLAGS)

clean-bins:
	rm -rf bin/k8s bin/kuberay "$(USER_BIN)"
