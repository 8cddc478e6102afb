#!/usr/bin/env bash
# One command for the side-by-side benchmark: installs the reference tools (idempotent), builds memory-rs and
# the bench in release, runs `memory-bench compare` and writes docs/compare.md, docs/bench/results.json and
# docs/bench/*.png. Extra arguments go to `memory-bench compare` (e.g. --sizes 2000 --hybrid-sizes 2000).
# Not part of CI. Expect 20 minutes (a quiet 2-core machine) to an hour (a busy one) with the default sizes.
set -euo pipefail
cd "$(dirname "$0")/../.."

# QMD (Node 22) and the local embedding model; prints export lines (MEMORY_TEST_MODEL, ...).
eval "$(bash scripts/setup.sh | grep '^export ')"
# OpenClaw (Node 24) into ~/.cache/memory-rs/bench; prints OPENCLAW_NODE / OPENCLAW_ENTRY.
eval "$(bash scripts/bench/setup-openclaw.sh | grep '^export ')"

cargo build --release -p memory-cli -p bench
target_dir="${CARGO_TARGET_DIR:-target}"
exec "$target_dir/release/memory-bench" compare --dataset "${CRANFIELD:-../shared/datasets/cranfield}" --out docs "$@"
