#!/usr/bin/env bash
# One command for CI and make: installs what is missing, builds the RDMA
# test binaries with -tags rdma, boots the Soft-RoCE VM and runs every step
# in scripts/rdmavm/steps (in name order) plus any STEP given here. Exits 0
# only if every step passed (see run.sh for the other codes).
#
# usage: test-rdma.sh [run.sh options] [STEP...]
#
# To add a test: add its binary to BUILDS below (it lands on the guest's
# PATH) and an executable step script to scripts/rdmavm/steps/; Go tests
# run through gotest (README.md, "When a step passes").
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# name|go arguments, built from $REPO with CGO enabled.
BUILDS=(
	"transport-rdma.test|test -c -tags rdma ./transport/rdma"
	"transport-rdma-race.test|test -c -race -tags rdma ./transport/rdma"
	"kvd|build -tags rdma ./cmd/kvd"
	"kvctl|build -tags rdma ./cmd/kvctl"
	"chaos-rdma.test|test -c -tags rdma ./internal/chaos"
)

start=$(date +%s)
"$RDMAVM_DIR/deps.sh" >/dev/null
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
bins=()
for b in "${BUILDS[@]}"; do
	name=${b%%|*}
	read -ra words <<<"${b#*|}" # go subcommand, then its flags and package
	(cd "$REPO" && CGO_ENABLED=1 "$GO" "${words[0]}" -o "$out/$name" "${words[@]:1}") || die "build of $name failed"
	bins+=(--bin "$out/$name")
done
log "built ${#BUILDS[@]} binaries in $(($(date +%s) - start))s"

opts=() steps=()
while [ $# -gt 0 ]; do
	case $1 in
	--timeout | --step-timeout | --mem | --smp | --bin | --file | --env) opts+=("$1" "$2"); shift 2 ;;
	*) steps+=("$1"); shift ;;
	esac
done
set +e
"$RDMAVM_DIR/run.sh" "${opts[@]}" "${bins[@]}" "$RDMAVM_DIR/steps" "${steps[@]}"
rc=$?
log "total wall time $(($(date +%s) - start))s"
exit $rc
