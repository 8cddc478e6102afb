#!/usr/bin/env bash
# Builds the release `memory` binary for a Linux target as the release workflow publishes it: static (musl, so
# it runs on any distribution whatever its glibc), profile `dist` (fat LTO, one codegen unit, stripped), and
# checks it: `--version`, index, search, and `serve` answering MCP (initialize, tools/list, a memory_search
# call). A binary for another architecture runs under qemu-user (Debian qemu-user-static).
#
# Needs: `rustup target add <target>`; for x86_64-unknown-linux-musl Debian's musl-tools; for
# aarch64-unknown-linux-musl on x86_64 also gcc-aarch64-linux-gnu and musl-dev:arm64 (dpkg --add-architecture
# arm64), and qemu-user-static to run it.
# Usage: scripts/build-release.sh <target> [out dir (default $CARGO_TARGET_DIR/release-binaries)]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
target="${1:?usage: scripts/build-release.sh <x86_64|aarch64>-unknown-linux-musl [out dir]}"
tdir="${CARGO_TARGET_DIR:-$here/target}"
out="${2:-$tdir/release-binaries}"
mkdir -p "$out"
arch="${target%%-*}"
host_arch="$(uname -m)"

# The C compiler for the target: musl-gcc here, or for another architecture the cross gcc with musl's headers
# (musl-gcc's specs for that architecture); the cross gcc links, with Rust's own musl start files and libc.
# sqlite-vec's C source declares its integer types from u_int8_t and friends without including <sys/types.h>,
# which musl declares only for _GNU_SOURCE (glibc always does): the wrapper adds both for that one file.
wrappers=$(mktemp -d)
trap 'rm -rf "$wrappers"' EXIT
cc="$wrappers/$arch-linux-musl-cc"
run=()
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

SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}" cargo build --profile dist --target "$target" -p memory-cli
bin="$out/memory-$target"
cp "$tdir/$target/dist/memory" "$bin"
file "$bin" | grep -Eq "statically linked|static-pie linked" || { echo "build-release: $bin is not statically linked: $(file "$bin")" >&2; exit 1; }

# The checks, in a scratch workspace and state folder.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" "$wrappers"' EXIT
mkdir -p "$scratch/ws/memory"
printf '# Memory\n\n- The gateway runs on the NUC in the hall closet.\n' > "$scratch/ws/MEMORY.md"
printf '# 2026-11-29\n\n- Fixed error E4012 in billing\n' > "$scratch/ws/memory/2026-11-29.md"
m=("${run[@]}" "$bin" --workspace "$scratch/ws" --state-dir "$scratch/state")
version=$("${run[@]}" "$bin" --version)
case "$version" in "memory $(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="memory-cli"))')"*) ;; *) echo "build-release: --version says $version" >&2; exit 1 ;; esac
"${m[@]}" index --json | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["filesAdded"]==2, r'
"${m[@]}" search "which error in billing" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); assert r["results"][0]["path"]=="memory/2026-11-29.md", r'
python3 scripts/release/mcp_smoke.py "${m[@]}" serve --no-watch
echo "build-release: $bin: $version; $(stat -c %s "$bin") bytes ($(( $(stat -c %s "$bin") / 1048576 )) MiB), static; --version, index, search and serve answer${run:+ under ${run[*]}}"
