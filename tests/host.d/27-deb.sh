#!/bin/bash
# make deb's packages, the way a host image installs them: built and
# lintian-clean (tools/make-deb), installed with apt on a clean root, DKMS
# building the module for Debian's kernel, programs built with pkg-config
# (dynamic and static), the module loaded from that root in the VM
# (tests/deb/in-vm.sh: /dev/hmemreg 0660 group hmemreg through the packaged
# udev rule), then purged, with nothing left behind.
#
# The clean root is this machine's root under an overlay (a private mount
# namespace; the host is untouched): it has every dependency the packages
# name (make deps installs them), so apt needs no network, and a debootstrap
# root with a compiler and kernel headers for DKMS would cost minutes of
# downloads. Whatever of hmemreg the host holds (a group, DKMS trees) is
# removed in the overlay first. The overlay's upper folder records every
# change the packages make, so "nothing left" is checked file by file.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (mounts, chroot, apt)"; exit 77; }
for t in dpkg-buildpackage dh_dkms lintian apt-get unshare qemu-system-x86_64; do
	command -v "$t" >/dev/null || { echo "SKIP: $t missing (make deps)"; exit 77; }
done
# Everything below runs in a mount namespace of its own: its mounts vanish
# with it, whatever happens.
if [ "${HMEMREG_DEB_NS:-}" != 1 ]; then
	exec unshare -m --propagation private env HMEMREG_DEB_NS=1 "$0" "$@"
fi

ver=$(cat "$HMEMREG_TOP/VERSION")
kver=$(make -s -C "$HMEMREG_TOP/kmod" print-kver)
work=$HMEMREG_BUILD/deb-lane
rm -rf "$work"
mkdir -p "$work"/{changes,root,lane}
# The overlay's upper and work folders live on a tmpfs of this namespace, as
# the checkout may be on an overlayfs (a container's /), which cannot be one.
mount -t tmpfs tmpfs "$work/changes"
mkdir "$work/changes/upper" "$work/changes/work"
upper=$work/changes/upper
trap 'umount -R "$work/root" 2>/dev/null; umount "$work/changes" 2>/dev/null || true' EXIT
t0=$(date +%s)
step() { echo "---- $* (at $(($(date +%s) - t0)) s)"; }

# HMEMREG_DEBS=DIR: packages already built by `make deb` (DIR/*.deb) instead.
if [ -n "${HMEMREG_DEBS:-}" ]; then
	step "packages from $HMEMREG_DEBS (not rebuilt, not linted here)"
	mkdir -p "$work/lane/debs"
	cp "$HMEMREG_DEBS"/*.deb "$work/lane/debs/"
else
	step "make deb"
	"$HMEMREG_TOP/tools/make-deb" "$work/lane/debs" > "$work/make-deb.log" 2>&1 ||
		{ tail -n 40 "$work/make-deb.log"; echo "FAIL: make deb"; exit 1; }
	grep -E '^(make-deb:|dpkg-deb: building)' "$work/make-deb.log"
fi
rm -f "$work/lane/debs/"*-dbgsym_*.deb

step "clean root (overlay over /)"
mount -t overlay overlay -o "lowerdir=/,upperdir=$upper,workdir=$work/changes/work" "$work/root"
r=$work/root
mount -t proc proc "$r/proc"
mount --rbind /sys "$r/sys"
mount --rbind /dev "$r/dev"
mount -t tmpfs tmpfs "$r/run"
mount -t tmpfs tmpfs "$r/tmp"
mkdir -p "$r/tmp/lane"
mount --bind "$work/lane" "$r/tmp/lane"
inroot() {
	chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
		DEBIAN_FRONTEND=noninteractive "$@"
}
inroot sh -c 'getent group hmemreg >/dev/null && groupdel hmemreg;
	rm -rf /var/lib/dkms/hmemreg /usr/src/hmemreg-* /lib/modules/*/updates/dkms/hmemreg.ko*
	echo "man-db man-db/auto-update boolean false" | debconf-set-selections'
if inroot dpkg-query -W 'hmemreg*' 'libhmemreg*' 'libnccl-net-hmemreg' 2>/dev/null | grep -q .; then
	echo "FAIL: hmemreg packages already installed on this host: not a clean root"; exit 1
fi

# Upper entries that differ from the host's root, less the files package
# managers rewrite anyway (their databases, caches, logs, the loader cache,
# depmod's indexes, the user database's backups, and DKMS's machine-owner
# signing key: made at its first build, shared by every DKMS module).
state='^(var/lib/dpkg/(status|status-old|available|available-old|lock.*|triggers(/.*)?|diversions.*|statoverride.*)|var/lib/apt(/.*)?|var/cache(/.*)?|var/log(/.*)?|etc/ld\.so\.cache|(usr/)?lib/modules/[^/]+/modules\.[a-z.]+|etc/(group|gshadow|passwd|shadow)-|var/lib/dkms/mok\.(key|pub))$'
changes() {
	(cd "$upper" && find . -mindepth 1 -printf '%y %P\n') | sort -k2 | while read -r t p; do
		[[ $p =~ $state ]] && continue
		case $t in
		d) [ -d "/$p" ] && [ ! -L "/$p" ] && continue ;;
		f) [ -f "/$p" ] && cmp -s "$upper/$p" "/$p" && continue
		   t="f $(sha256sum < "$upper/$p" | cut -c1-16)" ;;
		l) [ "$(readlink "$upper/$p")" = "$(readlink "/$p" 2>/dev/null)" ] && continue ;;
		c) t="removed" ;;
		esac
		echo "$t $p"
	done
}
changes | sort > "$work/before"

step "apt-get install"
apt_opts=(-y --no-install-recommends -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
debs=()
for d in "$work/lane/debs/"*.deb; do debs+=("/tmp/lane/debs/${d##*/}"); done
inroot apt-get install "${apt_opts[@]}" "${debs[@]}" > "$work/apt-install.log" 2>&1 ||
	{ tail -n 40 "$work/apt-install.log"; echo "FAIL: apt-get install"; exit 1; }
grep -E '^(Setting up|Building for|Building initial|Done|depmod)' "$work/apt-install.log" || true
bad=0
. "$HMEMREG_TOP/tests/deb/checks.sh"
check "packages installed at $ver" sh -c "for p in hmemreg-dkms libhmemreg0 libhmemreg-dev hmemreg-tools libnccl-net-hmemreg; do
	[ \"\$(dpkg-query -W -f='\${Status} \${Version}' \$p)\" = 'install ok installed $ver' ] || { echo \"\$p not installed at $ver\"; exit 1; }; done"
check "group hmemreg created (system)" sh -c 'gid=$(getent group hmemreg | cut -d: -f3) && [ "$gid" -lt 1000 ]'
check_out "dkms: hmemreg/$ver installed for $kver" ': installed' dkms status "hmemreg/$ver" -k "$kver"
check_out "modprobe finds the DKMS module with the packaged options (devmem_mb=0)" \
	"^insmod /lib/modules/$kver/updates/dkms/hmemreg\\.ko(\\.xz)? +devmem_mb=0" modprobe -S "$kver" -n -v hmemreg
check "module version $ver, built for $kver" sh -c \
	"[ \"\$(modinfo -k $kver -F version hmemreg)\" = $ver ] && modinfo -k $kver -F vermagic hmemreg | grep -q '^$kver '"
check "udev rule in the system rules folder" test -f /lib/udev/rules.d/99-hmemreg.rules
check "NCCL plugin in the multiarch folder" sh -c 'test -f /usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)/libnccl-net-hmemreg.so'
check "tools --version say $ver" sh -c "[ \"\$(hmemreg_bench --version)\" = 'hmemreg_bench $ver' ] && [ \"\$(mr_cache_stat --version)\" = 'mr_cache_stat $ver' ]"
check "the loader's cache has the plugin (ldconfig trigger)" sh -c 'ldconfig -p | grep -Eq "libnccl-net-hmemreg.so .*=> (/usr)?/lib/[^/]+/libnccl-net-hmemreg.so"'
check "the installed hmemreg_bench nccl runs the installed plugin" sh -c \
	'timeout 120 hmemreg_bench nccl --sizes 65536 --seconds 0.05 --repeat 1 --no-ref | grep -q "^ *nccl "'
check "pkg-config: hmemreg $ver" sh -c "[ \"\$(pkg-config --modversion hmemreg)\" = $ver ]"
cp "$HMEMREG_TOP/tests/deb/prog.c" "$work/lane/"
check "a program builds with pkg-config (dynamic) and runs" sh -c \
	'cd /tmp/lane && cc -Wall -Werror -o prog-dyn prog.c $(pkg-config --cflags --libs hmemreg) && ./prog-dyn'
# Static: libhmemreg.a, with what `pkg-config --static` says it needs.
check "a program builds with pkg-config --static (libhmemreg.a) and runs" sh -c \
	'cd /tmp/lane && cc -Wall -Werror -o prog-static prog.c $(pkg-config --cflags hmemreg) \
		-Wl,-Bstatic -lhmemreg -Wl,-Bdynamic $(pkg-config --static --libs hmemreg | sed "s/-lhmemreg / /") &&
	! readelf -d prog-static | grep -q "NEEDED.*libhmemreg" && ./prog-static'
check "man pages" sh -c 'man -w mr_cache_stat >/dev/null && man -w hmemreg >/dev/null'

step "in the VM: load the module from this root"
# What the packages changed, for the guest to lay over its own view of /.
tar -C "$upper" --xattrs --xattrs-include='trusted.overlay.opaque' \
	--exclude=./var/cache --exclude=./var/log --exclude=./var/lib/apt -cf "$work/lane/layer.tar" .
if ! "$HMEMREG_TOP/tests/vm/run" -t 600 "$HMEMREG_TOP/tests/deb/in-vm.sh" "$work/lane/layer.tar" "$ver" "$work/lane"; then
	echo "FAIL: in the VM"; bad=$((bad + 1))
fi

step "apt-get purge"
inroot apt-get purge "${apt_opts[@]}" hmemreg-dkms libhmemreg0 libhmemreg-dev hmemreg-tools libnccl-net-hmemreg \
	> "$work/apt-purge.log" 2>&1 || { tail -n 40 "$work/apt-purge.log"; echo "FAIL: apt-get purge"; exit 1; }
check "group hmemreg gone" sh -c '! getent group hmemreg'
check "dkms knows no hmemreg" sh -c '[ -z "$(dkms status hmemreg)" ]'
changes | sort > "$work/after"
if left=$(comm -13 "$work/before" "$work/after") && [ -n "$left" ]; then
	echo "FAIL: left behind after purge (or removed from the host's root):"; echo "$left"; bad=$((bad + 1))
else
	echo "ok: nothing left after purge"
fi

# `make install`'s last step on a real root (this disposable one): ldconfig.
step "cmake --install (make install) into the root"
if [ -f "$HMEMREG_BUILD/CMakeCache.txt" ] && grep -q '^CMAKE_INSTALL_PREFIX:PATH=/usr/local$' "$HMEMREG_BUILD/CMakeCache.txt"; then
	check "make install ran ldconfig: the library and the plugin are in the loader's cache" sh -c \
		"cmake --install '$HMEMREG_BUILD' | grep -i ldconfig && ldconfig -p | grep -q 'libhmemreg.so.0 .*/usr/local/lib/' &&
		ldconfig -p | grep -q 'libnccl-net-hmemreg.so .*/usr/local/lib/'"
else
	echo "skipped: $HMEMREG_BUILD is not configured for PREFIX=/usr/local"
fi
step "done"
exit $bad
