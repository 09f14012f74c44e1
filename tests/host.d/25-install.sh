#!/bin/bash
# `make install` stages the expected files, and a C program builds and runs
# against the staged tree with nothing but `pkg-config --cflags --libs hmemreg`.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
DESTDIR=$stage cmake --install "$HMEMREG_BUILD" --prefix /usr/local >/dev/null
p=$stage/usr/local
expect=(
	"$p/lib/libhmemreg.so" "$p/lib/libhmemreg.a" "$p/lib/pkgconfig/hmemreg.pc"
	"$p/include/hmemreg/hmemreg.h" "$p/include/hmemreg/common.h" "$p/include/linux/hmemreg.h"
	"$p/bin/hmemreg_bench" "$stage/etc/udev/rules.d/99-hmemreg.rules"
)
[ -x "$HMEMREG_BUILD/tools/mr_cache_stat" ] && expect+=("$p/bin/mr_cache_stat" "$p/share/man/man1/mr_cache_stat.1")
missing=0
for f in "${expect[@]}"; do [ -e "$f" ] || { echo "not installed: ${f#"$stage"}"; missing=1; }; done
[ $missing = 0 ]
echo "installed $(find "$stage" -type f | wc -l) files"

cat > "$stage/prog.c" <<'C'
#include <hmemreg/hmemreg.h>
#include <stdio.h>
int main(void)
{
	struct hmemreg_kmod_info info;
	int rc = hmemreg_kmod_query(&info);
	printf("libhmemreg %u.%u: kernel module: %s\n", hmemreg_library_version() >> 16,
	       hmemreg_library_version() & 0xffff, rc ? hmemreg_strerror(rc) : "loaded");
	return hmemreg_kmod_query(NULL) == -HMEMREG_EINVAL ? 0 : 1;
}
C
export PKG_CONFIG_PATH=$p/lib/pkgconfig
# shellcheck disable=SC2046
cc -Wall -Werror -o "$stage/prog" "$stage/prog.c" $(pkg-config --cflags --libs hmemreg)
LD_LIBRARY_PATH=$p/lib "$stage/prog"
