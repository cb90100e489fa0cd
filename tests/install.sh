#!/usr/bin/env bash
# tests/install.sh - installs the library alone (make install-lib) into a
# scratch prefix and uses it as a C program outside this tree would: the
# shared library's SONAME and exports (exactly the functions lib/attn.h
# declares), attn_version against the header, and examples/lib_example.c
# built with pkg-config's flags, shared and static, its numbers checked
# against PyTorch (examples/lib_example_check.py); the public structs'
# layout, the enums' values and the functions' types against
# tests/abi_layout.txt.
#
# Usage: tests/install.sh MAKE BUILD_DIR     (make test-install)
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE_CMD=${1:?usage: $0 MAKE BUILD_DIR}
BUILD_DIR=${2:?usage: $0 MAKE BUILD_DIR}
PY=${PYTHON:-/usr/bin/python3}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
passed=0 failed=0
check() { # check WHAT COMMAND...: one check, its output shown when it fails
    local what=$1; shift
    if out=$("$@" 2>&1); then
        echo "ok - $what"
        passed=$((passed + 1))
    else
        echo "not ok - $what"
        printf '%s\n' "$out" | sed 's/^/    /'
        failed=$((failed + 1))
    fi
}

check "make install-lib PREFIX=... (no server built)" \
    "$MAKE_CMD" --no-print-directory install-lib PREFIX="$PREFIX" BUILD="$BUILD_DIR"
major=$(sed -n 's/^#define ATTN_VERSION_MAJOR //p' lib/attn.h)
version=$(sed -n 's/^#define ATTN_VERSION_\(MAJOR\|MINOR\|PATCH\) //p' lib/attn.h | paste -sd.)
so=$PREFIX/lib/libattn.so.$major
check "the shared library's SONAME is libattn.so.$major" \
    sh -c "readelf -d '$so' | grep -F '(SONAME)' | grep -qF '[libattn.so.$major]'"

# The interface programs built against the shared library rely on, held
# to tests/abi_layout.txt: the public structs' layout (size, alignment and
# every field's offset, x86-64), every enumerator's value, and every
# function's type. A change there breaks those programs, so it must come
# with a new ATTN_VERSION_MAJOR and the file written anew (WRITE_ABI=1 make
# test-install); a new function only needs recording. All of it is read
# from the header's text.
"$PY" - lib/attn.h "$TMP" <<'PYEOF'
import re, sys
src = re.sub(r"/\*.*?\*/|//[^\n]*", "", open(sys.argv[1]).read(), flags=re.S)
out = ["#include <stdalign.h>", "#include <stddef.h>", "#include <stdio.h>", "#include <attn.h>",
       "int main(void) {", '    printf("major %d\\n", ATTN_VERSION_MAJOR);']
for m in re.finditer(r"typedef struct(?:\s+\w+)?\s*\{(.*?)\}\s*(attn_\w+)\s*;", src, flags=re.S):
    body, name = m.groups()
    out.append('    printf("%s %%zu %%zu\\n", sizeof(%s), alignof(%s));' % (name, name, name))
    for decl in filter(None, (" ".join(d.split()) for d in body.split(";"))):
        parts = decl.split(",")
        for field in [parts[0].split()[-1]] + parts[1:]:
            field = field.strip().lstrip("*").split("[")[0]
            out.append('    printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (name, field, name, field))
for m in re.finditer(r"typedef enum\s*\{(.*?)\}\s*(attn_\w+)\s*;", src, flags=re.S):
    body, name = m.groups()
    for item in filter(None, (i.split("=")[0].strip() for i in body.split(","))):
        out.append('    printf("%s.%s %%d\\n", (int)%s);' % (name, item, item))
out.append("    return 0;\n}")
open(sys.argv[2] + "/layout.c", "w").write("\n".join(out) + "\n")
# One line a function: "fn NAME DECLARATION", the declaration on one line.
fn_types = r"typedef\s+\w+\s*\(\s*\*\s*\w+\s*\)\s*\([^;{}]*\)\s*;"  # attn_interrupt_fn's kind
decls = re.finditer(r"^(?!typedef|#)[^;{}#]*?\b(attn_\w+)\s*\([^;{}]*\)\s*;", re.sub(fn_types, "", src),
                    flags=re.M)
open(sys.argv[2] + "/functions.txt", "w").write(
    "".join("fn %s %s\n" % (m.group(1), " ".join(m.group(0).split())) for m in decls))
PYEOF
# The header's functions (read above, one "fn NAME DECLARATION" line each).
cut -d' ' -f2 "$TMP/functions.txt" | sort -u >"$TMP/declared"
nm -D --defined-only "$so" | awk '$2 ~ /^[TWDBR]$/ {print $3}' | sort -u >"$TMP/exported"
check "the shared library exports exactly the header's $(wc -l <"$TMP/declared") functions" \
    diff "$TMP/declared" "$TMP/exported"
check "pkg-config knows attn $version" \
    sh -c "[ \"\$(PKG_CONFIG_PATH='$PREFIX/lib/pkgconfig' pkg-config --modversion attn)\" = '$version' ]"

cat >"$TMP/version.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <attn.h>
int main(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", ATTN_VERSION_MAJOR, ATTN_VERSION_MINOR, ATTN_VERSION_PATCH);
    printf("%s %s\n", attn_version(), want);
    return strcmp(attn_version(), want) != 0;
}
C
PC="env PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig pkg-config"
for how in shared static; do
    flags=$($PC --cflags attn)
    libs=$($PC --libs attn)
    [ "$how" = static ] && libs="$PREFIX/lib/libattn.a $($PC --static --libs-only-l attn | sed 's/-lattn//')"
    check "$how: attn_version() is the header's version" \
        sh -c "cc $flags '$TMP/version.c' -o '$TMP/version-$how' $libs && LD_LIBRARY_PATH='$PREFIX/lib' '$TMP/version-$how'"
    check "$how: examples/lib_example.c built with pkg-config's flags matches PyTorch" \
        sh -c "cc -std=c11 $flags examples/lib_example.c -o '$TMP/example-$how' $libs &&
               LD_LIBRARY_PATH='$PREFIX/lib' '$TMP/example-$how' | '$PY' examples/lib_example_check.py"
done
if [ "$(uname -m)" = x86_64 ]; then
    cc -std=c11 -I"$PREFIX/include" "$TMP/layout.c" -o "$TMP/layout" && "$TMP/layout" >"$TMP/layout.txt"
    if [ "${WRITE_ABI:-0}" = 1 ]; then
        cat "$TMP/layout.txt" "$TMP/functions.txt" >tests/abi_layout.txt
    fi
    if [ "$(head -1 "$TMP/layout.txt")" = "$(head -1 tests/abi_layout.txt)" ]; then
        check "the public structs keep their sizes and field offsets, the enums their values (tests/abi_layout.txt; else bump ATTN_VERSION_MAJOR)" \
            diff <(grep -v '^fn ' tests/abi_layout.txt) "$TMP/layout.txt"
    else
        check "tests/abi_layout.txt is written for ATTN_VERSION_MAJOR $major (WRITE_ABI=1 make test-install)" false
    fi
else
    echo "skip - the struct layout check is recorded for x86-64"
    skipped=1
fi
# Each recorded function, renamed abi_NAME, must have the type the header
# gives NAME now (parameter names may change, types may not).
{
    echo '#include <attn.h>'
    sed -n 's/^fn \([a-z0-9_]*\) \(.*\)/\2\n_Static_assert(__builtin_types_compatible_p(__typeof__(\1), __typeof__(abi_\1)), "\1 changed type");/p' tests/abi_layout.txt |
        sed 's/\battn_\([a-z0-9_]*\)\s*(/abi_attn_\1(/'
} >"$TMP/functions.c"
check "every function of tests/abi_layout.txt keeps its type (else bump ATTN_VERSION_MAJOR)" \
    cc -std=gnu11 -fsyntax-only -I"$PREFIX/include" "$TMP/functions.c"
check "every function the header declares is recorded in tests/abi_layout.txt (WRITE_ABI=1 make test-install)" \
    diff <(sed -n 's/^fn \([a-z0-9_]*\) .*/\1/p' tests/abi_layout.txt | sort -u) "$TMP/declared"
check "the shared build really loads libattn.so.$major from the prefix" \
    sh -c "LD_LIBRARY_PATH='$PREFIX/lib' ldd '$TMP/example-shared' | grep -qF '$so'"
echo "$passed passed, $failed failed, ${skipped:-0} skipped"
[ "$failed" = 0 ]
