#!/usr/bin/env bash
# Installs what the RDMA VM needs on a Debian bookworm host (as root) and
# caches a Debian kernel with its modules under $VM_CACHE/kernel. Idempotent:
# a second run installs and downloads nothing.
#
# Prints the cached kernel's directory (containing vmlinuz and lib/modules)
# on stdout.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PKGS=(libibverbs-dev librdmacm-dev rdma-core ibverbs-providers libibverbs1 librdmacm1
	ibverbs-utils rdmacm-utils perftest iproute2 qemu-system-x86 busybox-static kmod cpio)

install_pkgs() {
	local missing=() p
	for p in "${PKGS[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	[ "$(id -u)" -eq 0 ] || die "need root to install: ${missing[*]}"
	log "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# kernel_pkg names the concrete linux-image package the metapackage points at,
# unless KERNEL_PKG is set.
kernel_pkg() {
	if [ -n "${KERNEL_PKG:-}" ]; then echo "$KERNEL_PKG"; return; fi
	local dep
	dep=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	if [ -z "$dep" ]; then
		apt-get update -qq >&2
		dep=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
	fi
	[ -n "$dep" ] || die "cannot find the Debian kernel package behind linux-image-amd64"
	echo "$dep"
}

# fetch_kernel extracts the kernel package into $VM_CACHE/kernel/<pkg> and
# generates modules.dep there (the package leaves that to its postinst).
fetch_kernel() {
	local pkg dir kver tmp
	pkg=$(kernel_pkg)
	dir=$VM_CACHE/kernel/$pkg
	if [ -f "$dir/.complete" ]; then echo "$dir"; return; fi
	log "downloading $pkg into $dir"
	rm -rf "$dir" && mkdir -p "$dir"
	tmp=$(mktemp -d) && chmod 755 "$tmp" # lets apt download as _apt
	(cd "$tmp" && apt-get download -qq "$pkg" >&2)
	dpkg -x "$tmp"/*.deb "$dir/root"
	rm -rf "$tmp"
	kver=$(ls "$dir/root/lib/modules")
	cp "$dir/root/boot/vmlinuz-$kver" "$dir/vmlinuz"
	depmod -b "$dir/root" "$kver"
	echo "$kver" >"$dir/kver"
	touch "$dir/.complete"
	echo "$dir"
}

install_pkgs
fetch_kernel
