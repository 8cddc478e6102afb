#!/usr/bin/env bash
# Packs the npm packages of the OpenClaw plugin as they are published (esbuild's and biome's layout):
#   - memory-rs-openclaw-<version>.tgz: the plugin (integrations/openclaw), with one optional dependency per
#     platform a binary is published for (engine.js PREBUILT_PLATFORMS), so npm installs only the matching one;
#   - memory-rs-openclaw-<platform>-<version>.tgz: that platform's `memory` binary (bin/memory), with `os` and
#     `cpu` fields, so npm skips it elsewhere.
# The plugin finds the platform package's binary before PATH; `npx memory-rs-openclaw <args>` runs it.
# Usage: scripts/pack-npm.sh [memory binary (default $CARGO_TARGET_DIR/release/memory)] [out dir (default .)]
#                            [platform as Node names it (default this machine's, e.g. linux-x64)]
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(readlink -f "${1:-${CARGO_TARGET_DIR:-$here/target}/release/memory}")"
out="$(mkdir -p "${2:-.}" && cd "${2:-.}" && pwd)"
platform="${3:-$(node -p 'process.platform + "-" + process.arch')}"
[ -x "$bin" ] || { echo "pack-npm: no memory binary at $bin (cargo build --release -p memory-cli)" >&2; exit 1; }
os="${platform%-*}"
cpu="${platform#*-}"
plugin="$here/integrations/openclaw"
version=$(node -p "require('$plugin/package.json').version")
platforms=$(cd "$plugin" && node --input-type=module -e 'const m = await import("./lib/engine.js"); console.log(m.PREBUILT_PLATFORMS.join(" "))')
case " $platforms " in *" $platform "*) ;; *) echo "pack-npm: $platform is not in PREBUILT_PLATFORMS ($platforms) of lib/engine.js" >&2; exit 1 ;; esac
# A binary of another version would answer the plugin with another protocol: refuse it. (A cross-built binary
# cannot run here; its version is then not checked.)
if ver=$("$bin" --version 2>/dev/null); then
    case "$ver" in "memory $version "*|"memory $version") ;; *) echo "pack-npm: $bin is \`$ver\`, the plugin is $version" >&2; exit 1 ;; esac
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# The platform package.
exe=memory
[ "$os" = win32 ] && exe=memory.exe
mkdir -p "$stage/platform/bin"
cp "$bin" "$stage/platform/bin/$exe"
chmod 755 "$stage/platform/bin/$exe"
node - "$stage/platform/package.json" "$version" "$platform" "$os" "$cpu" "$exe" <<'JS'
const [file, version, platform, os, cpu, exe] = process.argv.slice(2);
const pkg = {
  name: `memory-rs-openclaw-${platform}`,
  version,
  description: `The memory-rs \`memory\` binary for ${platform} (used by the memory-rs-openclaw plugin)`,
  license: "MIT OR Apache-2.0",
  os: [os],
  cpu: [cpu],
  files: [`bin/${exe}`],
  preferUnplugged: true,
};
require("node:fs").writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
JS
printf '# memory-rs-openclaw-%s\n\nThe `memory` binary of memory-rs for %s, installed by npm as an optional dependency of\n`memory-rs-openclaw` on this platform only. Not used directly.\n' "$platform" "$platform" > "$stage/platform/README.md"

# The plugin: its files, with the optional dependencies on every platform package of this version.
mkdir -p "$stage/plugin"
cp -R "$plugin/." "$stage/plugin/"
rm -rf "$stage/plugin/bin"
node - "$stage/plugin/package.json" "$version" $platforms <<'JS'
const [file, version, ...platforms] = process.argv.slice(2);
const fs = require("node:fs");
const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
pkg.optionalDependencies = Object.fromEntries(platforms.map((p) => [`memory-rs-openclaw-${p}`, version]));
fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
JS

(cd "$stage/platform" && npm pack --silent --pack-destination "$out")
(cd "$stage/plugin" && npm pack --silent --pack-destination "$out")
