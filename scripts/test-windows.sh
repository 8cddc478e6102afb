#!/usr/bin/env bash
# Runs memory-rs-contract's and memory-rs-core's unit tests, memory-rs-builtin's tests and memory-cli's `cli` tests (which drive
# memory.exe) as Windows programs under Wine (the tests the release workflow runs on Windows): the engine's
# file handling (appends, locks, atomic renames, paths with drive letters, case-insensitive names) as Windows
# does it, on this Linux machine. Not part of `scripts/test.sh` (it needs mingw and Wine, and Wine is not Windows:
# what fails here is worth a look, what passes is not a Windows release).
#
# Needs: `rustup target add x86_64-pc-windows-gnu`, Debian's gcc-mingw-w64-x86-64 and wine64.
# Usage: scripts/test-windows.sh [extra arguments for the test programs, e.g. a name filter]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
target=x86_64-pc-windows-gnu
scratch=$(mktemp -d)
export WINEPREFIX="$scratch/wine" WINEDEBUG=-all
wine="${WINE:-$(command -v wine64 || echo /usr/lib/wine/wine64)}"
wineserver="$(command -v wineserver || echo /usr/lib/wine/wineserver64)"
trap '"$wineserver" -k 2>/dev/null; rm -rf "$scratch"' EXIT
# Wine 8 lacks bcryptprimitives.dll (ProcessPrng), which Rust's standard library calls; Windows 10+ has it.
x86_64-w64-mingw32-gcc -shared -O2 -o "$scratch/bcryptprimitives.dll" \
    scripts/release/wine/bcryptprimitives.c scripts/release/wine/bcryptprimitives.def -ladvapi32
# The test programs cargo builds: memory-rs-contract's and memory-rs-core's unit tests, memory-rs-builtin's unit and integration tests,
# memory-cli's `cli` tests (they run the memory.exe built beside them, which gets the DLL too).
programs=$({
    cargo test --target "$target" -p memory-rs-contract --lib --no-run --message-format json
    cargo test --target "$target" -p memory-rs-core --lib --no-run --message-format json
    cargo test --target "$target" -p memory-rs-builtin --no-run --message-format json
    cargo test --target "$target" -p memory-cli --test cli --no-run --message-format json
} 2>/dev/null | python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])')
cp "$scratch/bcryptprimitives.dll" "${CARGO_TARGET_DIR:-$here/target}/$target/debug/"
status=0
for program in $programs; do
    copy="$scratch/$(basename "$program")"
    cp "$program" "$copy"
    echo "== $(basename "$program") under Wine"
    if ! "$wine" "$copy" --test-threads 2 "$@" > "$scratch/log" 2>&1; then
        status=1
    fi
    tr -d '\r' < "$scratch/log" | grep -E "^test .*FAILED|^test result|^FAILED " || true
done
exit $status
