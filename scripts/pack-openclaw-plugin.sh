#!/usr/bin/env bash
# Packs the OpenClaw plugin (integrations/openclaw) with `npm pack`, carrying a memory binary for this platform
# at bin/<platform>-<arch>/memory (the plugin runs it before looking on PATH), so users need no Rust toolchain.
# Usage: scripts/pack-openclaw-plugin.sh [memory binary (default target/release/memory)] [out dir (default .)]
# Install the result with: openclaw plugins install npm-pack:<tgz> --force --accept-capabilities
#   (or: memory openclaw install --plugin <tgz>), then: openclaw plugins disable memory-core
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
bin="$(readlink -f "${1:-${CARGO_TARGET_DIR:-$here/target}/release/memory}")"
out="$(mkdir -p "${2:-.}" && cd "${2:-.}" && pwd)"
[ -x "$bin" ] || { echo "pack: no memory binary at $bin (cargo build --release -p memory-cli)" >&2; exit 1; }
node_os=$(uname -s | tr 'A-Z' 'a-z'); case "$(uname -m)" in x86_64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
cp -R "$here/integrations/openclaw/." "$stage/"
rm -rf "$stage/bin"
mkdir -p "$stage/bin/$node_os-$arch"
cp "$bin" "$stage/bin/$node_os-$arch/memory"
chmod 755 "$stage/bin/$node_os-$arch/memory"
(cd "$stage" && npm pack --silent --pack-destination "$out")
