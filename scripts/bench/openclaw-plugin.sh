#!/usr/bin/env bash
# memory_search through the real OpenClaw gateway: the memory-rs plugin vs the bundled memory-core, on the same
# workspace, through the same endpoint (POST /tools/invoke), each in its own isolated state folder.
# Reports p50/p90 over N calls (after 3 warm-up calls) and the resident memory of the gateway (and of its
# `memory serve` child for the plugin), read from /proc.
# Usage: scripts/bench/openclaw-plugin.sh [path/to/memory] [N=50]
# Needs: eval "$(bash scripts/setup.sh | grep '^export ')" (MEMORY_OPENCLAW_NODE, MEMORY_OPENCLAW_ENTRY).
set -euo pipefail

MEMORY_BIN="$(readlink -f "${1:-${CARGO_TARGET_DIR:-target}/release/memory}")"
N="${2:-50}"
NODE="${MEMORY_OPENCLAW_NODE:?run scripts/setup.sh first}"
ENTRY="${MEMORY_OPENCLAW_ENTRY:?run scripts/setup.sh first}"
[ -x "$MEMORY_BIN" ] || { echo "no memory binary at $MEMORY_BIN" >&2; exit 1; }

ROOT=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$ROOT"; }
trap cleanup EXIT

# The workspace: MEMORY.md plus 60 daily logs.
WS="$ROOT/workspace"
mkdir -p "$WS/memory"
printf '# Memory\n\n## Infrastructure\nThe gateway runs on the Mac Studio in the attic.\nBackups go to the NAS every night.\n' > "$WS/MEMORY.md"
for i in $(seq 1 60); do
  d=$(date -u -d "2026-09-01 +$i day" +%F)
  printf '# %s\n\n- Worked on ticket T-%d with Alice\n- Deploy %d went through the canary first\n- Note: error E%04d fixed in billing\n' "$d" "$i" "$i" "$i" > "$WS/memory/$d.md"
done

own_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
tree_kb() { # the process and all its descendants
  local total p; total=$(own_kb "$1")
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do total=$((total + $(tree_kb "$p"))); done
  echo "$total"
}
engine_kb() { # memory serve children (the plugin's engine), if any
  local total=0 p
  for p in $(pgrep -f -- "--workspace $WS --agent main serve" 2>/dev/null); do total=$((total + $(own_kb "$p"))); done
  echo "$total"
}

run_case() { # name plugin(memory-rs|memory-core)
  local name="$1" kind="$2" dir="$ROOT/$1" port token
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  token="bench-$port"
  mkdir -p "$dir/home" "$dir/state" "$dir/memory-state"
  local plugins='{}'
  [ "$kind" = memory-rs ] && plugins="{\"entries\":{\"memory-rs\":{\"config\":{\"command\":\"$MEMORY_BIN\"}}}}"
  cat > "$dir/state/openclaw.json" <<EOF
{"gateway":{"mode":"local","port":$port,"bind":"loopback","auth":{"mode":"token","token":"$token"}},
 "agents":{"defaults":{"workspace":"$WS"}},"logging":{"file":"$dir/openclaw.log"},"plugins":$plugins}
EOF
  export HOME="$dir/home" OPENCLAW_STATE_DIR="$dir/state" OPENCLAW_CONFIG_PATH="$dir/state/openclaw.json" MEMORY_STATE_DIR="$dir/memory-state"
  unset CI
  if [ "$kind" = memory-rs ]; then
    "$MEMORY_BIN" openclaw install --disable-memory-core --openclaw "$ENTRY" --node "$NODE" >/dev/null
  fi
  "$NODE" "$ENTRY" gateway run --port "$port" > "$dir/console.log" 2>&1 &
  local gw=$!
  PIDS+=("$gw")
  for _ in $(seq 1 300); do curl -fsS "http://127.0.0.1:$port/health" >/dev/null 2>&1 && break; sleep 0.5; done
  local idle; idle=$(own_kb "$gw")
  PORT=$port TOKEN=$token N=$N "$NODE" --input-type=module -e '
    const url = `http://127.0.0.1:${process.env.PORT}/tools/invoke`;
    const call = async (query) => {
      const t = performance.now();
      const r = await fetch(url, { method: "POST", headers: { authorization: `Bearer ${process.env.TOKEN}`, "content-type": "application/json" },
        body: JSON.stringify({ tool: "memory_search", args: { query } }) });
      const body = await r.json();
      return { ms: performance.now() - t, body };
    };
    const queries = ["where does the gateway run", "canary deploy", "error fixed in billing", "Alice ticket", "backups NAS"];
    let first;
    for (let i = 0; i < 3; i++) first = (await call(queries[i % queries.length])).body;
    const ms = [], tool = [];
    for (let i = 0; i < Number(process.env.N); i++) {
      const r = await call(queries[i % queries.length]);
      ms.push(r.ms);
      const t = r.body?.result?.details?.debug?.toolMs;
      if (typeof t === "number") tool.push(t);
    }
    ms.sort((a, b) => a - b);
    tool.sort((a, b) => a - b);
    const d = first?.result?.details ?? {};
    console.log(JSON.stringify({ p50: ms[Math.floor(ms.length / 2)].toFixed(1), p90: ms[Math.floor(ms.length * 0.9)].toFixed(1),
      toolMsP50: tool.length ? tool[Math.floor(tool.length / 2)] : null,
      provider: d.provider, mode: d.mode, hits: d.results?.length, top: d.results?.[0]?.path, error: d.error ?? first?.error }));
  ' > "$dir/latency.json"
  local busy tree engine; busy=$(own_kb "$gw"); tree=$(tree_kb "$gw"); engine=$(engine_kb)
  echo "$name: $(cat "$dir/latency.json") RSS MiB: gateway idle=$((idle / 1024)) after=$((busy / 1024))" \
       "process-tree=$((tree / 1024)) memory-serve=$((engine / 1024))" \
       "conflicts=$(grep -ci 'tool name conflict' "$dir/openclaw.log" "$dir/console.log" 2>/dev/null | awk -F: '{s+=$2} END {print s+0}')"
  kill "$gw"; wait "$gw" 2>/dev/null || true
}

echo "OpenClaw $("$NODE" "$ENTRY" --version 2>/dev/null | head -1), Node $("$NODE" --version), memory $("$MEMORY_BIN" --version), N=$N"
run_case memory-rs memory-rs
run_case memory-core memory-core
