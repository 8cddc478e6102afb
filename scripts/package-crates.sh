#!/usr/bin/env bash
# Packs every crate a user or plugin author installs from crates.io (`cargo package`), then builds the packed
# sources, unpacked, as a workspace of their own: a file the package leaves out, or a path outside its crate,
# fails here as it would for a user of crates.io.
#
# Why not cargo's own verification (`cargo package --workspace` without --no-verify): it builds every package in
# a workspace of its own, without this workspace's [profile] settings, so all ~600 dependencies (LanceDB's ~500
# among them) build again from nothing, 40+ minutes on two cores. Here the packed crates build with this
# workspace's profiles in the usual target folder, so only the memory-rs crates themselves compile.
#
# Usage: scripts/package-crates.sh [--lancedb]   (--lancedb also builds the LanceDB engine; it needs protoc)
# The .crate files are left in $CARGO_TARGET_DIR/package.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
target="${CARGO_TARGET_DIR:-$here/target}"
lancedb=0
[ "${1:-}" = "--lancedb" ] && lancedb=1

# Uncommitted changes are packed too (a check before committing them).
cargo package --workspace --exclude bench --exclude memory-rs-example-scan --no-verify --allow-dirty

version=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="memory-cli"))')
crates=(memory-rs-contract memory-rs-core memory-rs-builtin memory-rs-qmd memory-rs-lancedb memory-rs-model-runtime memory-rs-providers
        memory-rs-conformance memory-rs-host memory-cli)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
members=""
patches=""
for c in "${crates[@]}"; do
    tar -xzf "$target/package/$c-$version.crate" -C "$scratch"
    members+="\"$c-$version\", "
    patches+="$c = { path = \"$c-$version\" }"$'\n'
done
# The published manifests name each other by version; the patch points those names at the unpacked packages.
{
    echo "[workspace]"
    echo "resolver = \"2\""
    echo "members = [$members]"
    echo "[patch.crates-io]"
    printf '%s' "$patches"
    # The same profiles as this workspace, so the dependencies already built are used.
    sed -n '/^\[profile/,$p' Cargo.toml
} > "$scratch/Cargo.toml"
cp Cargo.lock "$scratch/Cargo.lock"

cd "$scratch"
if [ "$lancedb" = 1 ]; then
    cargo build --workspace --features memory-cli/lancedb
else
    cargo build --workspace --exclude memory-rs-lancedb
fi
echo "package-crates: ${#crates[@]} crates packed in $target/package and built from their packages"
