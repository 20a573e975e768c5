# kvd: the two commands a newcomer needs are `make run` and `make test`.
GO       ?= go
BIN      := bin
PKGS     := ./...
# Where `make run` keeps its three nodes' data (wiped by `make clean`).
RUN_DIR  ?= data
# What kvd --version, kvctl version, /version and kvd_build_info report
# (internal/version).
VERSION  ?= $(shell git describe --always --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -X github.com/kvd-project/kvd/internal/version.Version=$(VERSION) \
            -X github.com/kvd-project/kvd/internal/version.Revision=$(REVISION)

.PHONY: all build build-rdma run test test-short test-go test-rdma vet bench bench-quick bench-redis bench-etcd bench-writepath clean

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

build-rdma:
	$(GO) build -tags rdma -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

# Starts a local 3-node cluster in the foreground; Ctrl-C stops it.
run: build
	@scripts/run-cluster.sh $(BIN) $(RUN_DIR)

vet:
	$(GO) vet $(PKGS)

# scripts/deps.sh installs the tools tests run (jq, etcdctl 3.4 and 3.7) if they
# are missing.
test-go: vet
	@scripts/deps.sh
	$(GO) test -race -count=1 -timeout 20m $(PKGS)
	KVD_TEST_RAFT_LOG=pebble $(GO) test -race -count=1 -timeout 20m ./raft/

# Boots a Soft-RoCE VM and runs the RDMA suites inside it (root, installs
# its own packages).
test-rdma:
	scripts/rdmavm/test-rdma.sh

test: test-go test-rdma

# The edit-test loop: vet, then go test -short without -race (slow suites skip).
test-short: vet
	@scripts/deps.sh
	$(GO) test -short -timeout 10m $(PKGS)

# The full RDMA-vs-TCP comparison (TCP on the host, both transports in the
# Soft-RoCE VM on 3 nodes), written to bench/results/ only if every series
# was measured; otherwise they exit 1 and leave bench/results alone. Like
# test-rdma they install the RDMA part's packages first (root), or fail.
# bench-quick is a reduced run. bench also runs the etcd series.
bench: build bench-etcd
	BENCH_RDMA=1 bench/bench.sh

# etcd's benchmark tool against a 3-member etcd, kvd's nodes and a kvd
# gateway in one run: bench/results/etcd.md and etcd.json, written only if
# every measurement succeeded. The tool is built (once: a heavy build of
# etcd's server packages, so not part of make test) by
# scripts/etcd-benchmark.sh; bin/etcd comes from scripts/deps.sh.
bench-etcd: build
	@scripts/deps.sh
	scripts/etcd-benchmark.sh
	$(BIN)/kvbench etcd --bin $(BIN) --out bench/results

bench-quick: build
	QUICK=1 BENCH_RDMA=1 bench/bench.sh

# The Redis series alone (bench also runs it): redis-benchmark against a
# kvd gateway, a kvd node, go-floor (kvbench resp-floor, a minimal Go RESP
# server) and two redis-servers, into bench/results/redis.*.
bench-redis: build
	$(BIN)/kvbench redis --bin $(BIN) --out bench/results

# The write path alone (bench also runs it): the floor, the Pebble floor and
# kvd with each Raft log alternated in 3 rounds, into bench/results/writepath.*
# (only if every point was measured). BASELINE_BIN=DIR adds DIR/kvd, the
# previous commit's build, as the baseline.
bench-writepath: build
	$(BIN)/kvbench writepath --bin $(BIN) $(if $(BASELINE_BIN),--baseline-bin $(BASELINE_BIN)) --out bench/results

clean:
	rm -rf $(BIN) $(RUN_DIR)
