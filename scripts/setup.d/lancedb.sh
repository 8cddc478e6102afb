#!/usr/bin/env bash
# LanceDB engine tests: an S3-compatible server (moto's server mode, PyPI `moto[server]`) in a venv under the
# cache. The S3 tests start it themselves on 127.0.0.1 with an ephemeral port and stop it afterwards.
set -euo pipefail
CACHE="${CACHE:-${MEMORY_RS_CACHE:-$HOME/.cache/memory-rs}}"
VENV="$CACHE/moto-venv"
if [ ! -x "$VENV/bin/moto_server" ]; then
  . "$(cd "$(dirname "$0")" && pwd)/../lib/venv.sh"
  fresh_venv "$VENV" "moto[server]" "moto[server]>=5.1,<6"
fi
