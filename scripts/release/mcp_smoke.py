"""`memory serve` answers MCP over stdio: initialize, tools/list (memory_search and memory_get), and a
memory_search call that finds the billing note. Usage: mcp_smoke.py <memory command and args...>
(scripts/build-release.sh runs it on each release binary, under qemu-user for another architecture)."""

import json
import subprocess
import sys

proc = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def send(msg):
    proc.stdin.write(json.dumps(msg) + "\n")
    proc.stdin.flush()


def answer(id_):
    while True:
        line = proc.stdout.readline()
        assert line, f"memory serve closed its output before answering {id_}"
        msg = json.loads(line)
        if msg.get("id") == id_:
            assert "error" not in msg, msg
            return msg["result"]


send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "smoke", "version": "0"}}})
init = answer(1)
assert init["serverInfo"], init
send({"jsonrpc": "2.0", "method": "notifications/initialized"})
send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
tools = {t["name"] for t in answer(2)["tools"]}
assert {"memory_search", "memory_get"} <= tools, tools
send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "memory_search", "arguments": {"query": "E4012 billing"}}})
result = answer(3)
text = json.dumps(result)
assert "memory/2026-11-29.md" in text, text
proc.stdin.close()
assert proc.wait(timeout=30) == 0, proc.returncode
print(f"serve: MCP initialize, tools/list ({', '.join(sorted(tools))}) and memory_search answer")
