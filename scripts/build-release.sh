#!/usr/bin/env bash
# Builds the release `memory` binary for a target as the release workflow publishes it, profile `dist` (fat LTO,
# one codegen unit, stripped), and checks it: `--version`, index, search, and `serve` answering MCP (initialize,
# tools/list, a memory_search call). Linux: static (musl, so it runs on any distribution whatever its glibc); a
# binary for another architecture runs under qemu-user (Debian qemu-user-static). Windows (x86_64-pc-windows-gnu,
# mingw): checked under Wine.
#
# Needs: `rustup target add <target>`; for x86_64-unknown-linux-musl Debian's musl-tools; for
# aarch64-unknown-linux-musl on x86_64 also gcc-aarch64-linux-gnu and musl-dev:arm64 (dpkg --add-architecture
# arm64), and qemu-user-static to run it; for x86_64-pc-windows-gnu gcc-mingw-w64-x86-64 and wine64 (Wine 8 lacks
# one DLL Rust's standard library needs: scripts/release/wine/ supplies it, for the check only).
# Usage: scripts/build-release.sh <x86_64|aarch64>-unknown-linux-musl|x86_64-pc-windows-gnu [out dir (default $CARGO_TARGET_DIR/release-binaries)]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
target="${1:?usage: scripts/build-release.sh <x86_64|aarch64>-unknown-linux-musl|x86_64-pc-windows-gnu [out dir]}"
tdir="${CARGO_TARGET_DIR:-$here/target}"
out="${2:-$tdir/release-binaries}"
mkdir -p "$out"
arch="${target%%-*}"
host_arch="$(uname -m)"

scratch=$(mktemp -d)
# Wine's server keeps its prefix open a moment after the last program: it is stopped before the prefix goes.
stop_wine=true
trap '$stop_wine; rm -rf "$scratch"' EXIT
run=()
# How a path of this machine is written for the binary (under Wine, on drive Z:).
winpath() { printf '%s' "$1"; }
case "$target" in
*-linux-musl)
    # The C compiler for the target: musl-gcc here, or for another architecture the cross gcc with musl's headers
    # (musl-gcc's specs for that architecture); the cross gcc links, with Rust's own musl start files and libc.
    # sqlite-vec's C source declares its integer types from u_int8_t and friends without including <sys/types.h>,
    # which musl declares only for _GNU_SOURCE (glibc always does): the wrapper adds both for that one file.
    cc="$scratch/$arch-linux-musl-cc"
    if [ "$arch" = "$host_arch" ]; then
        real_cc="musl-gcc"
    else
        real_cc="$arch-linux-gnu-gcc -specs /usr/lib/$arch-linux-musl/musl-gcc.specs"
        export "CARGO_TARGET_$(echo "$target" | tr 'a-z-' 'A-Z_')_LINKER=$arch-linux-gnu-gcc"
        run=(qemu-"$arch"-static)
    fi
    cat > "$cc" <<CC
#!/bin/sh
case "\$*" in *sqlite-vec.c*) exec $real_cc -D_GNU_SOURCE -include sys/types.h "\$@" ;; esac
exec $real_cc "\$@"
CC
    chmod +x "$cc"
    export "CC_$(echo "$target" | tr '-' '_')=$cc"
    built=memory
    bin="$out/memory-$target"
    ;;
x86_64-pc-windows-gnu)
    built=memory.exe
    bin="$out/memory-$target.exe"
    export WINEPREFIX="$scratch/wine" WINEDEBUG=-all
    run=("${WINE:-$(command -v wine64 || echo /usr/lib/wine/wine64)}")
    stop_wine="$(command -v wineserver || echo /usr/lib/wine/wineserver64) -k"
    winpath() { printf 'Z:%s' "$(printf '%s' "$1" | tr / '\\')"; }
    ;;
*)
    echo "build-release: no recipe for $target (x86_64-unknown-linux-musl, aarch64-unknown-linux-musl, x86_64-pc-windows-gnu)" >&2
    exit 2
    ;;
esac

SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}" cargo build --profile dist --target "$target" -p memory-cli
cp "$tdir/$target/dist/$built" "$bin"
checked="$bin"
case "$target" in
*-linux-musl)
    file "$bin" | grep -Eq "statically linked|static-pie linked" || { echo "build-release: $bin is not statically linked: $(file "$bin")" >&2; exit 1; }
    ;;
*-windows-gnu)
    file "$bin" | grep -q "PE32+ executable" || { echo "build-release: $bin is not a Windows executable: $(file "$bin")" >&2; exit 1; }
    # Checked as a copy beside the DLL Wine lacks; the published binary is the one built.
    mkdir -p "$scratch/bin"
    checked="$scratch/bin/$built"
    cp "$bin" "$checked"
    x86_64-w64-mingw32-gcc -shared -O2 -o "$scratch/bin/bcryptprimitives.dll" \
        scripts/release/wine/bcryptprimitives.c scripts/release/wine/bcryptprimitives.def -ladvapi32
    ;;
esac

# The checks, in a scratch workspace and state folder.
mkdir -p "$scratch/ws/memory"
printf '# Memory\n\n- The gateway runs on the NUC in the hall closet.\n' > "$scratch/ws/MEMORY.md"
printf '# 2026-11-29\n\n- Fixed error E4012 in billing\n' > "$scratch/ws/memory/2026-11-29.md"
m=("${run[@]}" "$checked" --workspace "$(winpath "$scratch/ws")" --state-dir "$(winpath "$scratch/state")")
version=$("${run[@]}" "$checked" --version | tr -d '\r')
case "$version" in "memory $(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="memory-cli"))')"*) ;; *) echo "build-release: --version says $version" >&2; exit 1 ;; esac
"${m[@]}" index --json | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["filesAdded"]==2, r'
"${m[@]}" search "which error in billing" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["results"][0]["path"]=="memory/2026-11-29.md", r'
python3 scripts/release/mcp_smoke.py "${m[@]}" serve --no-watch
echo "build-release: $bin: $version; $(stat -c %s "$bin") bytes ($(( $(stat -c %s "$bin") / 1048576 )) MiB); --version, index, search and serve answer${run:+ under ${run[*]}}"
