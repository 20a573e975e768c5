#!/usr/bin/env bash
# Builds a busybox initramfs that boots straight into guest/init, with the
# RDMA modules, the rxe provider, perftest, and the caller's binaries and
# steps.
#
# usage: mkinitramfs.sh -k KERNEL_DIR -o OUT.cpio.gz [-t TOKEN] [-b BIN]...
#                       [-f SRC:DEST]... [-e NAME=VALUE]... STEP...
#   -k  directory from deps.sh (vmlinuz, kver, root/lib/modules)
#   -b  extra executable, shipped in /kvd/bin (on PATH) with its libraries
#   -f  extra file copied to DEST inside the guest
#   -e  NAME=VALUE exported to every step
#   -t  token the guest prints with its verdict (so test output cannot forge it)
#   STEP  executable (ELF or script) run in order by the guest; a directory
#         stands for every file in it, in name order. A file there that is
#         not executable, or a directory without steps, is an error: a step
#         is never skipped silently.
# guest/gotest is always shipped in /kvd/bin (steps run Go tests through it).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Modules to load; their dependencies are added in order by modprobe.
MODULES=(crc32_generic udp_tunnel ip6_udp_tunnel ib_core ib_uverbs rdma_rxe
	configfs ib_cm iw_cm rdma_cm rdma_ucm dummy)
# Host tools the guest uses besides busybox.
TOOLS=(/usr/sbin/ip /usr/bin/rdma /usr/bin/ibv_devinfo /usr/bin/ib_read_lat /usr/bin/ib_send_lat)
PROVIDER=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
# glibc loads libgcc_s at run time (pthread_exit, cancellation).
DLOPENED=(/usr/lib/x86_64-linux-gnu/libgcc_s.so.1)

kdir= out= token=none bins=() files=() steps=() envs=()
while getopts k:o:t:b:f:e: opt; do
	case $opt in
	k) kdir=$OPTARG ;; o) out=$OPTARG ;; t) token=$OPTARG ;;
	b) bins+=("$OPTARG") ;; f) files+=("$OPTARG") ;; e) envs+=("$OPTARG") ;;
	*) die "bad option" ;;
	esac
done
shift $((OPTIND - 1))
[ -n "$kdir" ] && [ -n "$out" ] || die "usage: mkinitramfs.sh -k KERNEL_DIR -o OUT [-t TOKEN] [-b BIN]... [-f SRC:DEST]... STEP..."
for s in "$@"; do
	if [ -d "$s" ]; then
		n=${#steps[@]}
		for f in "$s"/*; do
			[ -e "$f" ] || continue # empty directory
			[ -f "$f" ] && [ -x "$f" ] || die "step $f is not an executable file (chmod +x it, or move it out of $s)"
			steps+=("$f")
		done
		[ ${#steps[@]} -gt "$n" ] || die "step directory $s has no steps"
	else
		[ -f "$s" ] && [ -x "$s" ] || die "step $s is not an executable file"
		steps+=("$s")
	fi
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,bb,proc,sys,dev,tmp,run,etc/libibverbs.d,kvd/bin,kvd/steps}
for d in bin sbin lib lib64; do ln -s usr/$d "$root/$d"; done

# copy_with_libs copies an ELF file to the same path in the image (or to
# $2), followed by every library ldd lists for it.
copy_with_libs() {
	local src=$1 dst=${2:-$1} lib
	mkdir -p "$root$(dirname "$dst")"
	cp -L "$src" "$root$dst"
	ldd "$src" 2>/dev/null | grep -o '/[^ ]*' | while read -r lib; do
		[ -e "$root$lib" ] && continue
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done || true
}
is_elf() { [ "$(head -c4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }

cp /bin/busybox "$root/bb/busybox"
ln -s /bb/busybox "$root/usr/bin/sh"
for t in "${TOOLS[@]}"; do copy_with_libs "$t"; done
copy_with_libs "$PROVIDER"
for f in "${DLOPENED[@]}"; do copy_with_libs "$f"; done
cp /etc/libibverbs.d/rxe.driver "$root/etc/libibverbs.d/"

kver=$(cat "$kdir/kver")
mods=$(for m in "${MODULES[@]}"; do
	modprobe -d "$kdir/root" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++')
mkdir -p "$root/kvd/modules"
: >"$root/kvd/modules.order"
for m in $mods; do
	cp "$m" "$root/kvd/modules/"
	basename "$m" >>"$root/kvd/modules.order"
done

cp "$RDMAVM_DIR/guest/gotest" "$root/kvd/bin/gotest"
for b in "${bins[@]}"; do
	if is_elf "$b"; then copy_with_libs "$b" "/kvd/bin/$(basename "$b")"; else cp "$b" "$root/kvd/bin/"; fi
done
for f in "${files[@]}"; do
	mkdir -p "$root$(dirname "${f#*:}")"
	cp -L "${f%%:*}" "$root${f#*:}"
done
i=10
for s in "${steps[@]}"; do
	name=$(basename "$s")
	case $name in [0-9]*) ;; *) name=$i-$name ;; esac # keep given order
	if is_elf "$s"; then copy_with_libs "$s" "/kvd/steps/$name"; else cp "$s" "$root/kvd/steps/$name"; fi
	i=$((i + 1))
done
echo "$token" >"$root/kvd/token"
for e in "${envs[@]}"; do
	case $e in [A-Za-z_]*=*) ;; *) die "bad -e $e (want NAME=VALUE)" ;; esac
	printf 'export %s=%q\n' "${e%%=*}" "${e#*=}"
done >"$root/kvd/env"
cp "$RDMAVM_DIR/guest/init" "$root/init"
chmod +x "$root/init" "$root"/kvd/steps/* "$root"/kvd/bin/* 2>/dev/null || true

(cd "$root" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) | gzip -1 >"$out"
log "initramfs $out: $(du -h "$out" | cut -f1), ${#steps[@]} step(s), $(echo "$mods" | wc -w) modules"
