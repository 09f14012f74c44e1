#!/bin/bash
# `make install` stages the expected files (libraries and the NCCL plugin in
# GNUInstallDirs' libdir, udev rule and modprobe.d file where udev and kmod
# read them), a C program builds and runs against the staged tree with
# nothing but pkg-config (dynamic, and static with --static), the staged
# tools say the version, and the staged hmemreg_bench finds the staged
# plugin, not the build tree's.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$HMEMREG_BUILD/CMakeCache.txt")
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$HMEMREG_BUILD/CMakeCache.txt")
[ "$prefix" = /usr/local ] || { echo "SKIP: $HMEMREG_BUILD is configured for prefix $prefix, this lane checks /usr/local"; exit 77; }
DESTDIR=$stage cmake --install "$HMEMREG_BUILD" > "$stage.log"
! grep -q ldconfig "$stage.log" || { cat "$stage.log"; echo "ldconfig ran for a DESTDIR staging"; exit 1; }
rm -f "$stage.log"
p=$stage/usr/local
l=$p/$libdir
ver=$(cat "$HMEMREG_TOP/VERSION")
expect=(
	"$l/libhmemreg.so" "$l/libhmemreg.so.0" "$l/libhmemreg.so.$ver" "$l/libhmemreg.a" "$l/pkgconfig/hmemreg.pc"
	"$l/libnccl-net-hmemreg.so"
	"$p/include/hmemreg/hmemreg.h" "$p/include/hmemreg/common.h" "$p/include/hmemreg/version.h"
	"$p/include/hmemreg/fabric_compat.h"
	"$p/include/linux/hmemreg.h" "$p/bin/hmemreg_bench"
	"$p/lib/udev/rules.d/99-hmemreg.rules" "$p/lib/modprobe.d/hmemreg.conf"
)
[ -x "$HMEMREG_BUILD/tools/mr_cache_stat" ] && expect+=("$p/bin/mr_cache_stat" "$p/share/man/man1/mr_cache_stat.1")
missing=0
for f in "${expect[@]}"; do [ -e "$f" ] || { echo "not installed: ${f#"$stage"}"; missing=1; }; done
[ $missing = 0 ]
echo "installed $(find "$stage" -type f | wc -l) files"
grep -q '^options hmemreg devmem_mb=0$' "$p/lib/modprobe.d/hmemreg.conf" || { echo "modprobe.d file without devmem_mb=0"; exit 1; }

# hmemreg.pc holds the real (absolute) paths: a staged tree is a sysroot.
export PKG_CONFIG_PATH=$l/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage
[ "$(pkg-config --modversion hmemreg)" = "$ver" ] || { echo "hmemreg.pc says $(pkg-config --modversion hmemreg), VERSION $ver"; exit 1; }
prog=$HMEMREG_TOP/tests/deb/prog.c
# shellcheck disable=SC2046
cc -Wall -Werror -o "$stage/prog" "$prog" $(pkg-config --cflags --libs hmemreg)
LD_LIBRARY_PATH=$l "$stage/prog"
# Static: libhmemreg.a and what `pkg-config --static` adds (C++ runtime...).
# shellcheck disable=SC2046
cc -Wall -Werror -o "$stage/prog-static" "$prog" $(pkg-config --cflags hmemreg) \
	-Wl,-Bstatic -lhmemreg -Wl,-Bdynamic $(pkg-config --static --libs hmemreg | sed 's/-lhmemreg / /')
! readelf -d "$stage/prog-static" | grep -q 'NEEDED.*libhmemreg' || { echo "prog-static needs libhmemreg.so"; exit 1; }
"$stage/prog-static"

[ "$("$p/bin/hmemreg_bench" --version)" = "hmemreg_bench $ver" ]
[ ! -x "$p/bin/mr_cache_stat" ] || [ "$("$p/bin/mr_cache_stat" --version)" = "mr_cache_stat $ver" ]
echo "tools: $ver"
# The staged bench loads the staged plugin (bindir/../libdir): there is no
# build tree beside it, and the loader's path has no plugin.
timeout 120 "$p/bin/hmemreg_bench" nccl --sizes 65536 --seconds 0.05 --repeat 1 --no-ref
