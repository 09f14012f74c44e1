#!/bin/bash
# Inside the VM (tests/host.d/27-deb.sh boots it): the root the packages
# were installed on (LAYER, the host overlay's upper folder as a tar) laid
# over the guest's view of /, and in it: udevd running, `modprobe hmemreg`
# loads the DKMS-built module with the packaged options, /dev/hmemreg is mode
# 0660 group hmemreg, a member of the group may open it and nobody else, and
# the tools and the module say VERSION.
#   tests/deb/in-vm.sh LAYER.tar VERSION LANEDIR
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
require_vm
layer=$1 ver=$2 lane=$3
m=$(mktemp -d /tmp/deb-vm.XXXXXX)
# Layers must not overlap: the installed layer lives in a tmpfs of its own.
mount -t tmpfs tmpfs "$m"
mkdir "$m"/{layer,upper,work,root}
tar -C "$m/layer" --xattrs --xattrs-include='trusted.overlay.opaque' -xf "$layer"
mount -t overlay overlay -o "lowerdir=$m/layer:/,upperdir=$m/upper,workdir=$m/work" "$m/root"
r=$m/root
mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys"
mount -t devtmpfs devtmpfs "$r/dev"
mount -t tmpfs tmpfs "$r/run"
mount -t tmpfs tmpfs "$r/tmp"
mkdir -p "$r/tmp/lane"
mount --bind "$lane" "$r/tmp/lane"
inroot() { chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LC_ALL=C.UTF-8 "$@"; }
bad=0
. "$(dirname "$0")/checks.sh"

# udevd in the foreground, so that its pid is ours to end; udevadm ignores
# requests from a chroot unless told otherwise.
chroot "$r" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin /lib/systemd/systemd-udevd &
udevd=$!
for _ in $(seq 50); do
	inroot env SYSTEMD_IGNORE_CHROOT=1 udevadm control --ping 2>/dev/null && break
	sleep 0.2
done
check "modprobe hmemreg (DKMS module, packaged options)" modprobe hmemreg
inroot env SYSTEMD_IGNORE_CHROOT=1 udevadm settle --timeout=60
check "/dev/hmemreg is 0660 root:hmemreg" sh -c \
	's=$(stat -c "%a %U:%G" /dev/hmemreg); echo "/dev/hmemreg: $s"; [ "$s" = "660 root:hmemreg" ]'
check "module $ver loaded without the test pool" sh -c \
	"[ \"\$(cat /sys/module/hmemreg/version)\" = $ver ] && [ \"\$(cat /sys/module/hmemreg/parameters/devmem_mb)\" = 0 ]"
check "tools --version say $ver" sh -c \
	"[ \"\$(hmemreg_bench --version)\" = 'hmemreg_bench $ver' ] && [ \"\$(mr_cache_stat --version)\" = 'mr_cache_stat $ver' ]"
check "mr_cache_stat --kernel reads the ledger" mr_cache_stat --kernel
check_out "a member of group hmemreg opens /dev/hmemreg" "kernel module: loaded" \
	setpriv --reuid=nobody --regid=nogroup --groups=hmemreg /tmp/lane/prog-dyn
check_out "anyone else may not" "kernel module: permission denied" \
	setpriv --reuid=nobody --regid=nogroup --clear-groups /tmp/lane/prog-dyn
check "the static program talks to the module" sh -c '/tmp/lane/prog-static | grep -q "kernel module: loaded"'
check "modprobe -r hmemreg" modprobe -r hmemreg
kill "$udevd"
wait "$udevd" || true
umount -R "$r" || umount -lR "$r"
umount -l "$m"
exit $bad
