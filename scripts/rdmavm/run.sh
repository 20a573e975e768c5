#!/usr/bin/env bash
# Boots a Soft-RoCE (rdma_rxe) VM under QEMU/TCG, runs the given steps in it
# and exits with their verdict: 0 if every step passed, 1 if one failed, 2 on
# a usage or setup error, 3 if the VM did not report (boot failure, crash or
# timeout). The guest console streams to stdout.
#
# usage: run.sh [--timeout SECS] [--step-timeout SECS] [--mem MB] [--smp N]
#               [--bin FILE]... [--file SRC:DEST]... [--env NAME=VALUE]...
#               [--append KERNEL-ARGS] STEP|DIR...
# See mkinitramfs.sh for steps and binaries, guest/init for what steps see.
# RDMAVM_LOG=FILE keeps a copy of the console log.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

timeout_s=2400 step_timeout=420 mem=2048 smp=2 mkargs=() append=
while [ $# -gt 0 ]; do
	case $1 in
	--timeout) timeout_s=$2; shift 2 ;;
	--step-timeout) step_timeout=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	--smp) smp=$2; shift 2 ;;
	--bin) mkargs+=(-b "$2"); shift 2 ;;
	--file) mkargs+=(-f "$2"); shift 2 ;;
	--env) mkargs+=(-e "$2"); shift 2 ;;
	--append) append=$2; shift 2 ;;
	--) shift; break ;;
	-*) die "unknown option $1" ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || die "usage: run.sh [options] STEP|DIR..."

kdir=$("$RDMAVM_DIR/deps.sh" | tail -n1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
token=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
"$RDMAVM_DIR/mkinitramfs.sh" -k "$kdir" -o "$work/initramfs.gz" -t "$token" "${mkargs[@]}" "$@"

log "booting $(cat "$kdir/kver") (TCG, ${smp} cpus, ${mem} MiB, timeout ${timeout_s}s)"
start=$(date +%s)
# KVM does not work nested here (see docs); TCG is slow but sure. The guest
# powers off when done; -no-reboot turns a guest panic into an exit too.
set +e
timeout --foreground -k 10 "$timeout_s" qemu-system-x86_64 -accel tcg -cpu max -m "$mem" -smp "$smp" \
	-nographic -no-reboot -nic none -monitor none -serial stdio \
	-kernel "$kdir/vmlinuz" -initrd "$work/initramfs.gz" \
	-append "console=ttyS0 quiet panic=-1 rdmavm.step_timeout=$step_timeout $append" </dev/null |
	tee "$work/console.log"
qrc=${PIPESTATUS[0]}
set -e
secs=$(($(date +%s) - start))
# RDMAVM_LOG=FILE keeps the console log (without carriage returns).
[ -n "${RDMAVM_LOG:-}" ] && tr -d '\r' <"$work/console.log" >"$RDMAVM_LOG"

v=$(tr -d '\r' <"$work/console.log" | awk -v t="$token" '$1 == "RDMAVM-VERDICT:" && $3 == t {v = $2} END {print v}')
case $v in
PASS) log "PASS in ${secs}s"; exit 0 ;;
FAIL) log "FAIL in ${secs}s"; exit 1 ;;
*)
	[ "$qrc" -eq 124 ] && log "timeout after ${timeout_s}s" || log "VM ended (rc $qrc) without a verdict"
	exit 3
	;;
esac
