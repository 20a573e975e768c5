#!/usr/bin/env bash
# Installs the tools the Go tests run besides go itself: jq (the kvctl
# tests check that -w json output round-trips through it), and Redis'
# clients for the Redis protocol's tests (internal/redisapi): redis-tools
# (redis-cli, redis-benchmark) and python3-redis (for Debian's
# /usr/bin/python3). Not redis-server. Idempotent and
# silent when everything is there; installing needs root and apt-get.
set -euo pipefail
missing=()
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v redis-cli >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || missing+=(python3-redis)
((${#missing[@]} == 0)) && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "scripts/deps.sh: missing ${missing[*]} and no apt-get: install them by hand" >&2
  exit 1
fi
sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null 2>&1 || { echo "scripts/deps.sh: missing ${missing[*]}: run as root to install them" >&2; exit 1; }
  sudo=(sudo)
fi
echo "scripts/deps.sh: installing ${missing[*]}" >&2
"${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null ||
  { "${sudo[@]}" apt-get update -qq && "${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null; }
