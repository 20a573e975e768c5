#!/usr/bin/env bash
# Installs the tools the Go tests run besides go itself: jq (the kvctl
# tests check that -w json output round-trips through it); Redis'
# clients for the Redis protocol's tests (internal/redisapi): redis-tools
# (redis-cli, redis-benchmark) and python3-redis (for Debian's
# /usr/bin/python3), not redis-server; Debian's python3-etcd3 (etcd's
# Python client, for /usr/bin/python3; cmd/kvd's etcd API test runs a
# script with it); Debian's etcd-client (etcdctl 3.4)
# and etcdctl 3.7, built from the module proxy through
# internal/etcdapi/etcdtools (a module of its own, outside kvd's graph)
# into bin/etcdctl-3.7: the etcd API tests run both unmodified.
# Debian's etcd server (3.4) is not installed, since its package starts a
# daemon on 2379: its .deb is downloaded and only the etcd binary is
# unpacked into bin/etcd, for the tests and benchmarks that compare kvd
# with a real etcd cluster they start themselves on other ports.
# Idempotent and silent when everything is there; installing needs root
# and apt-get.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# etcdctl 3.7: the version internal/etcdapi/etcdtools/go.mod pins.
etcdctl37=$root/bin/etcdctl-3.7
if [[ ! -x $etcdctl37 || $root/internal/etcdapi/etcdtools/go.mod -nt $etcdctl37 ]]; then
  echo "scripts/deps.sh: building etcdctl 3.7 into bin/" >&2
  (cd "$root/internal/etcdapi/etcdtools" && GOFLAGS=-mod=mod go build -o "$etcdctl37" go.etcd.io/etcd/etcdctl/v3)
fi

# etcd 3.4's server binary, out of Debian's etcd-server package.
if [[ ! -x $root/bin/etcd ]]; then
  command -v apt-get >/dev/null 2>&1 || { echo "scripts/deps.sh: no apt-get to fetch etcd-server: put an etcd 3.4 binary at bin/etcd" >&2; exit 1; }
  echo "scripts/deps.sh: unpacking Debian's etcd-server into bin/etcd" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download etcd-server >/dev/null 2>&1 || { ((EUID == 0)) && apt-get update -qq && apt-get download etcd-server >/dev/null 2>&1; }; } \
    && dpkg-deb -x etcd-server_*.deb x && install -D -m 0755 x/usr/bin/etcd "$root/bin/etcd")
  rm -rf "$tmp"
  [[ -x $root/bin/etcd ]] || { echo "scripts/deps.sh: could not fetch Debian's etcd-server" >&2; exit 1; }
fi

missing=()
command -v jq >/dev/null 2>&1 || missing+=(jq)
command -v redis-cli >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
/usr/bin/python3 -c 'import redis' >/dev/null 2>&1 || missing+=(python3-redis)
/usr/bin/python3 -c 'import etcd3' >/dev/null 2>&1 || missing+=(python3-etcd3)
[[ -x /usr/bin/etcdctl ]] || missing+=(etcd-client)
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
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
