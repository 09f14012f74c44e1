#!/bin/bash
# Outside userlib/, libhmemreg is used through its installed interface only,
# as an outside collective library would: no build file or source outside
# userlib/ and tests/ names userlib/src (an include path into the library's
# internals) or links the static library, the shared library exports the C
# API and nothing else (what debian/libhmemreg0.symbols lists), and a C++
# program built against the installed headers and libhmemreg.so alone
# (tests/public/engine_pair.cpp, through hmemreg/engine.hpp) moves data
# between two engines; hmemreg/fabric_compat.h matches libfabric's own.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
cd "$HMEMREG_TOP"

# 1. The source tree: build files and sources outside userlib/ and tests/.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	files=$(git ls-files --cached --others --exclude-standard)
else
	files=$(find . -type f -not -path './build*' | sed 's|^\./||')
fi
outside=$(grep -vE '^(userlib|tests)/' <<<"$files" |
	grep -E '(^|/)(CMakeLists\.txt|Makefile|[^/]*\.(cmake|mk|c|cc|cpp|h|hpp|inl))$' || true)
bad=0
if hits=$(grep -nE 'userlib/src' $outside 2>/dev/null); then
	echo "FAIL: userlib/src (the library's internals) named outside userlib/ and tests/:"
	echo "$hits"
	bad=1
fi
if hits=$(grep -nE '\bhmemreg_static\b|\bhmemreg_obj\b' $outside 2>/dev/null); then
	echo "FAIL: the static library linked outside userlib/ and tests/ (link libhmemreg.so, target hmemreg):"
	echo "$hits"
	bad=1
fi
[ $bad = 0 ] && echo "ok: $(wc -w <<<"$outside") build files and sources outside userlib/ and tests/ use the public interface only"

# 2. The built library exports the C API alone, as the symbols file says.
so=$HMEMREG_BUILD/userlib/libhmemreg.so
[ -e "$so" ] || { echo "no $so (run make)"; exit 1; }
exported=$(nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | sort -u)
listed=$(sed -n 's/^ \([^@ ]*\)@.*/\1/p' debian/libhmemreg0.symbols | sort -u)
if [ "$exported" != "$listed" ]; then
	echo "FAIL: libhmemreg.so exports (>) and debian/libhmemreg0.symbols lists (<) differ:"
	diff <(echo "$listed") <(echo "$exported") | grep '^[<>]' || true
	bad=1
else
	echo "ok: libhmemreg.so exports the $(wc -l <<<"$exported") symbols the symbols file lists"
fi
if odd=$(grep -vE '^(hmemreg_|HMEMREG_0$|shmat$|remap_file_pages$)' <<<"$exported"); then
	echo "FAIL: exported beyond the C API: $odd"
	bad=1
fi

# 3. A program against the installed headers and libhmemreg.so alone.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' "$HMEMREG_BUILD/CMakeCache.txt")
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$HMEMREG_BUILD/CMakeCache.txt")
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
DESTDIR=$stage cmake --install "$HMEMREG_BUILD" >/dev/null
inc=$stage$prefix/include lib=$stage$libdir
[ -e "$inc/hmemreg/engine.hpp" ] || { echo "FAIL: hmemreg/engine.hpp is not installed"; exit 1; }
# -nostdinc++ is not wanted; what matters is that no -I points into the tree.
${CXX:-c++} -std=c++20 -Wall -Wextra -Werror -I"$inc" -o "$stage/engine_pair" tests/public/engine_pair.cpp \
	-L"$lib" -lhmemreg -Wl,-rpath,"$lib"
# Built without the tree's headers: its own includes resolve in the stage.
${CXX:-c++} -std=c++20 -I"$inc" -M tests/public/engine_pair.cpp | tr ' \\' '\n\n' | grep -E '/hmemreg/' |
	grep -v "^$inc/" && { echo "FAIL: engine_pair includes a hmemreg header from outside the installed tree"; bad=1; }
if ! readelf -d "$stage/engine_pair" | grep -q 'NEEDED.*libhmemreg\.so\.0'; then
	echo "FAIL: engine_pair does not link libhmemreg.so.0"
	bad=1
fi
FI_PROVIDER=shm timeout 120 "$stage/engine_pair" || bad=1

# 4. hmemreg/fabric_compat.h (FI_MR_DMABUF for builds against older libfabric
# headers) compiles as strict C and C++ on its own, and defines what
# libfabric 1.20+ headers define: the same flag and layout with Debian's 1.17
# headers (the header's own) as with 2.6's (libfabric's), where those are
# cached (tools/vendor/build-libfabric).
[ -e "$inc/hmemreg/fabric_compat.h" ] || { echo "FAIL: hmemreg/fabric_compat.h is not installed"; exit 1; }
compat=$HMEMREG_TOP/tests/public/fabric_compat.c
${CC:-cc} -std=c11 -Wall -Wextra -pedantic -Werror -I"$inc" -o "$stage/compat" "$compat"
${CXX:-c++} -std=c++20 -Wall -Wextra -Werror -I"$inc" -x c++ -fsyntax-only - <<<'#include <hmemreg/fabric_compat.h>'
own=$("$stage/compat") || { echo "FAIL: fabric_compat.c"; bad=1; }
lf2=${HMEMREG_LIBFABRIC2:-}
[ -n "$lf2" ] || for d in /var/cache/hmemreg/libfabric-2.6.0-*/.done; do [ -e "$d" ] && lf2=$(dirname "$d"); done
if [ -n "$lf2" ] && [ -e "$lf2/include/rdma/fi_domain.h" ]; then
	${CC:-cc} -std=c11 -Wall -Wextra -pedantic -Werror -I"$lf2/include" -I"$inc" -o "$stage/compat2" "$compat"
	grep -q 'define FI_MR_DMABUF' "$lf2/include/rdma/fi_domain.h" || { echo "FAIL: $lf2 has no FI_MR_DMABUF"; bad=1; }
	theirs=$("$stage/compat2") || { echo "FAIL: fabric_compat.c on $lf2"; bad=1; }
	if [ "$own" != "$theirs" ]; then
		echo "FAIL: hmemreg/fabric_compat.h differs from libfabric's own definitions:"
		echo "  own:       $own"
		echo "  libfabric: $theirs"
		bad=1
	else
		echo "ok: hmemreg/fabric_compat.h matches libfabric 2.6's FI_MR_DMABUF ($own)"
	fi
else
	echo "ok: hmemreg/fabric_compat.h compiles ($own); no cached libfabric 2.6 headers to compare with"
fi
exit $bad
