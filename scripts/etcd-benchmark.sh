#!/usr/bin/env bash
# Builds etcd's benchmark tool (go.etcd.io/etcd/v3/tools/benchmark, the
# version bench/etcdbench/go.mod pins) into bin/etcd-benchmark, for the etcd
# series of the benchmarks (make bench; bench/README.md). Not part of make
# test: the tool pulls in etcd's server packages, a heavy build.
#
# The root module go.etcd.io/etcd/v3 has replace directives, so `go install
# ...@version` refuses it; bench/etcdbench is a module of its own that
# requires it (outside kvd's graph and `go test ./...`). Idempotent: does
# nothing while bin/etcd-benchmark is newer than that go.mod and go.sum.
#
# Environment: BIN=bin (where the binary goes), GO=go.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BIN:-$root/bin}
GO=${GO:-go}
mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd)
out=$BIN/etcd-benchmark
mod=$root/bench/etcdbench
if [[ -x $out && ! $mod/go.mod -nt $out && ! $mod/go.sum -nt $out ]]; then
  exit 0
fi
echo "scripts/etcd-benchmark.sh: building etcd's benchmark tool into $out" >&2
(cd "$mod" && GOFLAGS=-mod=mod "$GO" build -o "$out.tmp" go.etcd.io/etcd/v3/tools/benchmark)
mv "$out.tmp" "$out"
