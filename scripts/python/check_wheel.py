"""Run by scripts/package-python.sh inside a fresh virtualenv where the built wheel is installed: the Python API
indexes and searches a workspace, every call and its asyncio twin answer, the errors name their cause, the
`memory` command is on PATH, and a search through Python is timed against the same search timed inside Rust.
Exits non-zero (an AssertionError with what differed) on any failure."""

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

import memory_rs
from memory_rs import ClosedError, ConfigError, Hit, InvalidInputError, Memory, WorkspaceError

tmp = tempfile.mkdtemp(prefix="memory-rs-wheel-")
ws = os.path.join(tmp, "workspace")
state = os.path.join(tmp, "state")
os.makedirs(os.path.join(ws, "memory"))
with open(os.path.join(ws, "MEMORY.md"), "w") as f:
    f.write("# Memory\n\n- The gateway runs on the NUC in the hall closet. <!-- trigger: where is the gateway -->\n")
with open(os.path.join(ws, "memory", "2026-11-29.md"), "w") as f:
    f.write("# 2026-11-29\n\n- Fixed error E4012 in billing\n- Lunch with Alice\n")
# A few hundred more notes, so the search has real work to do (the benchmark below).
for i in range(300):
    with open(os.path.join(ws, "memory", f"note-{i:03}.md"), "w") as f:
        f.write(f"# Note {i}\n\nTopic {i % 17}: deploy checklist item {i}, canary rollout, billing run {i % 5}.\n")

m = Memory(ws, state_dir=state)
report = m.index()
assert report["filesAdded"] == 302, report
hits = m.search("which error did I fix in billing?")
assert hits and isinstance(hits[0], Hit), hits
top = hits[0]
assert top.path == "memory/2026-11-29.md" and top.start_line >= 1 and top.end_line >= top.start_line, top
assert top.citation.startswith("memory/2026-11-29.md#L") and top.source == "memory" and 0 < top.score <= 1, top
assert "E4012" in top.snippet, top
assert len(m.search("deploy checklist", max_results=3)) == 3
assert len(m.search("deploy checklist", max_results=20, min_score=0.0)) == 20
# after/before: the day's log within its day, nothing after it; a day that is not one names the argument.
assert [h.path for h in m.search("E4012 billing", after="2026-11-29", before="2026-11-29")][:1] == ["memory/2026-11-29.md"]
assert m.search("E4012 billing", after="2026-11-30") == []
try:
    m.search("E4012 billing", before="yesterday")
    raise AssertionError("a before that is not a day was accepted")
except InvalidInputError as e:
    assert "before" in str(e), e
# explain: the same results, each hit's factors, and where a named file is.
explained = m.explain("which error did I fix in billing?", path="memory/2026-11-29.md")
assert [r["path"] for r in explained["results"]] == [h.path for h in m.search("which error did I fix in billing?")], explained
assert explained["explanation"]["hits"][0]["path"] == "memory/2026-11-29.md", explained["explanation"]
assert explained["explanation"]["path"]["verdict"] == "result", explained["explanation"]["path"]
try:
    m.explain("billing", path="/etc/passwd")
    raise AssertionError("an explain path outside the workspace was accepted")
except InvalidInputError as e:
    assert "explainPath" in str(e), e
doc = m.get("memory/2026-11-29.md", from_=3, lines=1)
assert doc.text.strip() == "- Fixed error E4012 in billing" and doc.from_ == 3 and doc.total_lines == 4, (doc, doc.text)
appended = m.append("Alice prefers Tuesday meetings")
assert appended["indexed"] is True and appended["path"].startswith("memory/"), appended
assert m.search("when does Alice like meetings?")[0].path == appended["path"]
recalled = m.recall("where is the gateway again?")
assert recalled and recalled[0].path == "MEMORY.md" and recalled[0].trigger == "where is the gateway", recalled
status = m.status()
assert status["backend"] == "builtin" and status["files"] >= 303, status


async def twins():
    hits = await m.asearch("canary rollout", max_results=2)
    doc = await m.aget("MEMORY.md")
    rec = await m.arecall("where is the gateway")
    st = await m.astatus()
    rep = await m.aindex()
    why = await m.aexplain("canary rollout", max_results=2)
    assert [r["path"] for r in why["results"]] == [h.path for h in hits], (why, hits)
    # Concurrent searches: each releases the GIL, so they overlap instead of queueing behind it.
    many = await asyncio.gather(*(m.asearch(f"topic {i}") for i in range(8)))
    return hits, doc, rec, st, rep, many


hits2, doc2, rec2, st2, rep2, many = asyncio.run(twins())
assert len(hits2) == 2 and "gateway" in doc2.text and rec2 and st2["files"] >= 303 and rep2["filesChanged"] == 0
assert all(len(h) > 0 for h in many)

# The benchmark: the same search, timed inside Rust (no Python in the loop) and through the Python API.
QUERY, N = "deploy checklist canary rollout", 300
for _ in range(30):
    m.search(QUERY)
rust = sorted(m._rust_search_seconds(QUERY, N))
python = []
for _ in range(N):
    t = __import__("time").perf_counter()
    m.search(QUERY)
    python.append(__import__("time").perf_counter() - t)
rust_p50 = statistics.median(rust) * 1000
py_p50 = statistics.median(python) * 1000
print(f"search p50: Rust in-process {rust_p50:.3f} ms, through Python {py_p50:.3f} ms, ratio {py_p50 / rust_p50:.3f}")

# Errors name their cause.
m.close()
m.close()
try:
    m.search("anything")
    raise AssertionError("a search on a closed Memory answered")
except ClosedError as e:
    assert "closed" in str(e), e
try:
    Memory(os.path.join(tmp, "no-such-folder"), state_dir=state)
    raise AssertionError("a missing workspace opened")
except WorkspaceError as e:
    assert "no-such-folder" in str(e) and "not a folder" in str(e), e
bad = os.path.join(tmp, "bad.json5")
with open(bad, "w") as f:
    f.write("{ memory: { search: { query: { maxResult: 3 } } } }")
try:
    Memory(ws, config=bad, state_dir=state)
    raise AssertionError("a config with an unknown key opened")
except ConfigError as e:
    assert "maxResult" in str(e) and "bad.json5" in str(e), e
assert issubclass(ClosedError, memory_rs.MemoryRsError) and issubclass(ConfigError, memory_rs.MemoryRsError)
with Memory(ws, state_dir=state) as m2:
    assert m2.search("E4012")
assert m2.closed

# The `memory` command came with the wheel, on the virtualenv's PATH.
exe = shutil.which("memory")
assert exe and os.path.dirname(exe) == os.path.dirname(sys.executable), (exe, sys.executable)
version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True).stdout.strip()
assert version.startswith(f"memory {memory_rs.__version__}"), version
out = subprocess.run([exe, "--workspace", ws, "--state-dir", state, "search", "E4012", "--json"], capture_output=True, text=True, check=True).stdout
assert "memory/2026-11-29.md" in out, out
print(f"memory on PATH: {exe}: {version}")
shutil.rmtree(tmp)
print("wheel check: OK")
