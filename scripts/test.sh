#!/usr/bin/env bash
# Runs every test: installs what the tests need (scripts/setup.sh), then the whole workspace's tests.
# The build cache lives outside the clone so repeated runs are fast.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/memory-rs/target}"
eval "$(bash scripts/setup.sh | grep '^export ')"
cargo test --workspace --features memory-cli/lancedb "$@"
