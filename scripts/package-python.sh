#!/usr/bin/env bash
# Builds the PyPI wheel of memory-rs (crates/memory-py, with maturin) carrying the Python module `memory_rs` and
# the `memory` command, installs it into a fresh virtualenv, and checks it there (scripts/python/check_wheel.py):
# the API indexes and searches a workspace, its errors name their cause, `memory` is on the virtualenv's PATH,
# and a search through Python is timed against the same search timed inside Rust (the p50 ratio is printed).
#
# maturin comes from PyPI into a virtualenv of the shared cache ($MEMORY_RS_CACHE/maturin-venv), once.
# Usage: scripts/package-python.sh [out dir (default $CARGO_TARGET_DIR/wheels)]
#        scripts/package-python.sh --check WHEEL     (only the check, of a wheel built before or elsewhere)
# MEMORY_WHEEL_BINARY=<memory binary> puts that binary in the wheel instead of building one (the release
# workflow's static binary).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
target="${CARGO_TARGET_DIR:-$here/target}"
cache="${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}"

check() {
    local wheel="$1" venv
    venv=$(mktemp -d)
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$wheel"
    # The virtualenv's bin first, as `activate` would put it: the check asserts `memory` is found there.
    PATH="$venv/bin:$PATH" "$venv/bin/python" scripts/python/check_wheel.py
    rm -rf "$venv"
    echo "wheel: $wheel ($(du -k "$wheel" | cut -f1) KiB); the memory binary in it: $(unzip -l "$wheel" | awk '/scripts\/memory$/ {print int($1/1024) " KiB"}')"
}
if [ "${1:-}" = "--check" ]; then
    check "${2:?usage: scripts/package-python.sh --check WHEEL}"
    exit 0
fi
out="${1:-$target/wheels}"
mkdir -p "$out"

maturin="$cache/maturin-venv/bin/maturin"
if [ ! -x "$maturin" ]; then
    python3 -m venv "$cache/maturin-venv"
    "$cache/maturin-venv/bin/pip" install --quiet "maturin>=1.9,<2"
fi

# The `memory` command goes into the wheel's scripts (pip puts it on PATH).
binary="${MEMORY_WHEEL_BINARY:-}"
if [ -z "$binary" ]; then
    cargo build --release -p memory-cli
    binary="$target/release/memory"
fi
data=crates/memory-py/memory_rs.data/scripts
rm -rf crates/memory-py/memory_rs.data
mkdir -p "$data"
cp "$binary" "$data/memory"
strip "$data/memory"

rm -f "$out"/memory_rs-*.whl
"$maturin" build --release -m crates/memory-py/Cargo.toml --out "$out"
wheel=$(ls "$out"/memory_rs-*.whl)
rm -rf crates/memory-py/memory_rs.data
check "$wheel"
