# shellcheck shell=bash
# Shared helpers for the rdmavm scripts. Sourced, not run.

set -euo pipefail

RDMAVM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=${REPO:-$(cd "$RDMAVM_DIR/../.." && pwd)}
# VM_CACHE holds the extracted kernel and modules between runs (gitignored).
VM_CACHE=${VM_CACHE:-$REPO/.vm}

log() { printf 'rdmavm: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 2; }
