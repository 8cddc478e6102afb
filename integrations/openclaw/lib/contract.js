// What OpenClaw expects of a memory plugin, written for this plugin: the tool schemas and result shapes of the
// bundled memory-core (OpenClaw 2026.9.x), its memory prompt section, its pre-compaction flush plan and its
// classification of workspace memory files.

import { readdir, realpath } from "node:fs/promises";
import path from "node:path";

// The parameter schemas of memory-core's memory_search and memory_get; memory_search also takes this engine's
// after/before (notes dated inside, ISO days, inclusive), optional, so every call memory-core accepts is accepted.
export const MEMORY_SEARCH_PARAMETERS = {
  type: "object",
  properties: {
    query: { type: "string" },
    maxResults: { type: "integer", minimum: 1 },
    minScore: { type: "number" },
    corpus: { type: "string", enum: ["memory", "wiki", "all", "sessions"] },
    after: { type: "string", description: "Only notes dated on or after this day (YYYY-MM-DD)." },
    before: { type: "string", description: "Only notes dated on or before this day (YYYY-MM-DD)." },
  },
  required: ["query"],
  additionalProperties: false,
};

export const MEMORY_GET_PARAMETERS = {
  type: "object",
  properties: {
    path: { type: "string" },
    from: { type: "integer", minimum: 1 },
    lines: { type: "integer", minimum: 1 },
    corpus: { type: "string", enum: ["memory", "wiki", "all"] },
  },
  required: ["path"],
  additionalProperties: false,
};

/** What the agent's memory is made of, for the tool descriptions. */
export function memoryFilesText(settings) {
  const parts = ["MEMORY.md, USER.md and the Markdown files under memory/"];
  if (settings.extraPaths.length > 0) parts.push("the configured extra paths");
  return parts.join(", ");
}

export function searchDescription(settings) {
  const files = memoryFilesText(settings);
  const what = settings.sources.includes("sessions") ? `${files} and indexed session transcripts` : files;
  return (
    `Mandatory recall step: search ${what} (memory-rs engine, hybrid keyword and semantic ranking) before answering ` +
    "questions about prior work, decisions, dates, people, preferences or todos. Returns ranked snippets with path, " +
    "startLine, endLine and score; read more with memory_get. `corpus=memory` keeps memory files only, " +
    "`corpus=sessions` session transcripts only (unavailable unless session indexing is enabled); `wiki` and `all` " +
    "add compiled-wiki supplements, of which this plugin has none. Session hits are transcript references, not " +
    "readable memory-file paths. A warning in the answer means results are partial: tell the user."
  );
}

export function getDescription(settings) {
  return (
    `Read an exact excerpt of ${memoryFilesText(settings)} (a memory_search hit's path; from = first line, lines = ` +
    "how many). Other paths and session transcripts are refused. Without `lines` a bounded excerpt is returned, with " +
    "truncated/nextFrom when more follows. status=ok: read; status=not_found: the file does not exist (yet); " +
    "status=error: the read failed, memory is not disabled."
  );
}

/** The tool result OpenClaw's tools return: the payload as JSON text (what the model reads) and as details. */
export function jsonResult(payload) {
  return { content: [{ type: "text", text: JSON.stringify(payload, null, 2) }], details: payload };
}

/** `memory.citations` ("on" | "off" | "auto", default auto). */
export function citationsMode(cfg) {
  const mode = cfg?.memory?.citations;
  return mode === "on" || mode === "off" || mode === "auto" ? mode : "auto";
}

/** Auto citations are for direct chats: a session key naming a channel or a group is not one. */
export function includeCitations(mode, sessionKey) {
  if (mode === "on") return true;
  if (mode === "off") return false;
  if (typeof sessionKey !== "string" || !sessionKey) return true;
  const parts = sessionKey.toLowerCase().split(":").filter(Boolean);
  const rest = parts[0] === "agent" ? parts.slice(2) : parts;
  return !rest.includes("channel") && !rest.includes("group");
}

export function citationOf(hit) {
  const range = hit.startLine === hit.endLine ? `#L${hit.startLine}` : `#L${hit.startLine}-L${hit.endLine}`;
  return `${hit.path}${range}`;
}

/** A hit as memory_search presents it (memory-core's shape: the raw hit plus corpus, citation, snippet). */
export function presentHit(hit, withCitation) {
  const out = { ...hit, corpus: hit.source };
  if (withCitation) {
    out.citation = citationOf(hit);
    out.snippet = `${String(hit.snippet ?? "").trimEnd()}\n\nSource: ${out.citation}`;
  } else {
    delete out.citation;
  }
  return out;
}

/** A hit as a MemorySearchManager returns it (MemorySearchResult). */
export function managerHit(hit) {
  const out = {
    path: hit.path,
    startLine: hit.startLine,
    endLine: hit.endLine,
    score: hit.score,
    snippet: hit.snippet,
    source: hit.source ?? "memory",
  };
  if (typeof hit.vectorScore === "number") out.vectorScore = hit.vectorScore;
  if (typeof hit.textScore === "number") out.textScore = hit.textScore;
  if (hit.citation) out.citation = hit.citation;
  return out;
}

/** The engine's memory_get answer as OpenClaw's MemoryReadResult. */
export function readResult(r, requestedPath) {
  if (r.missing) return { status: "not_found", path: r.path ?? requestedPath, text: "" };
  const out = { status: "ok", path: r.path ?? requestedPath, text: r.text ?? "" };
  if (typeof r.from === "number" && r.from > 0) out.from = r.from;
  if (typeof r.lines === "number") out.lines = r.lines;
  if (r.truncated) {
    out.truncated = true;
    if (typeof r.from === "number" && typeof r.lines === "number") out.nextFrom = r.from + r.lines;
  }
  return out;
}

/** The agent's memory search settings from the OpenClaw config: enabled, sources, extra paths, maxResults. */
export function memorySettings(cfg, agentId) {
  const defaults = cfg?.agents?.defaults?.memorySearch ?? {};
  const list = Array.isArray(cfg?.agents?.list) ? cfg.agents.list : [];
  const own = list.find((a) => a && a.id === agentId)?.memorySearch ?? cfg?.agents?.entries?.[agentId]?.memorySearch ?? {};
  const search = cfg?.memory?.search ?? {};
  const pick = (key) => own[key] ?? defaults[key] ?? search[key];
  const sources = Array.isArray(pick("sources")) ? pick("sources") : ["memory"];
  const extraPaths = Array.isArray(pick("extraPaths")) ? pick("extraPaths") : [];
  const enabled = pick("enabled") !== false;
  const maxResults = pick("query")?.maxResults;
  return { enabled, sources, extraPaths, maxResults: Number.isInteger(maxResults) && maxResults > 0 ? maxResults : undefined };
}

// --- prompt section ------------------------------------------------------------------------------------------

/** The "Memory Recall" system-prompt section, with the same guidance memory-core gives. */
export function buildPromptSection({ availableTools, citationsMode: mode }) {
  const has = (name) => availableTools?.has?.(name) === true;
  const search = has("memory_search");
  const get = has("memory_get");
  if (!search && !get) return [];
  const lines = ["## Memory Recall"];
  if (search) {
    lines.push(
      "Before answering anything about prior work, decisions, dates, people, preferences, or todos: run memory_search" +
        (get ? "; for memory-file hits, use memory_get to read only the lines you need" : "") +
        ". If you are still unsure after searching, say that you checked.",
    );
    if (has("sessions_search")) {
      lines.push(
        "For session hits, use sessions_search with distinctive snippet text" +
          (has("sessions_history") ? ", then sessions_history with the returned keys for a bounded excerpt." : "; exact session history is not available with the enabled tools."),
      );
    } else if (has("sessions_history")) {
      lines.push("For session hits, use sessions_history with a known session key or transcript ID and a small limit.");
    } else {
      lines.push("Session hits are search snippets only; exact session history is not available with the enabled tools.");
    }
    lines.push("Line numbers of session hits are not history offsets; never read raw transcript files to expand them.");
  } else {
    lines.push(
      "Before answering anything about prior work, decisions, dates, people, preferences, or todos that points to a " +
        "specific memory file: run memory_get for only the lines you need. If you are still unsure, say that you checked.",
    );
  }
  lines.push("Tell the user when recall is partial, unavailable or stale, with the warning and action returned.");
  lines.push(
    mode === "off"
      ? "Citations are off: do not mention file paths or line numbers unless the user asks."
      : "Citations: add Source: <path#line> when it helps the user check a memory snippet.",
  );
  lines.push("");
  return lines;
}

// --- pre-compaction flush plan -------------------------------------------------------------------------------

const FLUSH_SOFT_TOKENS = 4000;
const FLUSH_FORCE_TRANSCRIPT_BYTES = 2 * 1024 * 1024;
const RESERVE_TOKENS_FLOOR = 20_000;
const MAX_RESERVE_RATIO = 0.25;
const NO_REPLY = "NO_REPLY";

function nonNegativeInt(v) {
  return typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : null;
}

/** 2097152, "2mb", "512 KiB", "1.5m"... as bytes; null when not a size. */
export function parseByteSize(v) {
  if (typeof v === "number") return nonNegativeInt(v);
  if (typeof v !== "string") return null;
  const m = /^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$/i.exec(v);
  if (!m) return null;
  const mult = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 }[m[2].toLowerCase()];
  return Math.floor(Number(m[1]) * mult);
}

function userTimezone(cfg) {
  const tz = cfg?.agents?.defaults?.userTimezone;
  if (typeof tz === "string" && tz.trim()) {
    try {
      new Intl.DateTimeFormat("en-US", { timeZone: tz.trim() });
      return tz.trim();
    } catch {
      // unknown zone: the host's
    }
  }
  return Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
}

function dateStamp(nowMs, tz) {
  const parts = new Intl.DateTimeFormat("en-US", { timeZone: tz, year: "numeric", month: "2-digit", day: "2-digit" }).formatToParts(new Date(nowMs));
  const get = (t) => parts.find((p) => p.type === t)?.value;
  return get("year") && get("month") && get("day") ? `${get("year")}-${get("month")}-${get("day")}` : new Date(nowMs).toISOString().slice(0, 10);
}

/** When and how to flush durable memories before compaction: into memory/YYYY-MM-DD.md, append-only. */
export function buildFlushPlan(params = {}) {
  const cfg = params.cfg;
  const nowMs = typeof params.nowMs === "number" && Number.isFinite(params.nowMs) ? params.nowMs : Date.now();
  const settings = cfg?.agents?.defaults?.compaction?.memoryFlush;
  if (settings?.enabled === false) return null;
  let softThresholdTokens = nonNegativeInt(settings?.softThresholdTokens) ?? FLUSH_SOFT_TOKENS;
  const forceFlushTranscriptBytes = parseByteSize(settings?.forceFlushTranscriptBytes) ?? FLUSH_FORCE_TRANSCRIPT_BYTES;
  let reserveTokensFloor = RESERVE_TOKENS_FLOOR;
  const window = nonNegativeInt(params.contextWindowTokens);
  if (window) {
    reserveTokensFloor = Math.min(RESERVE_TOKENS_FLOOR, Math.floor(Math.max(1, window) * MAX_RESERVE_RATIO));
    softThresholdTokens = Math.min(softThresholdTokens, Math.floor((window - reserveTokensFloor) / 2));
  }
  const tz = userTimezone(cfg);
  const day = dateStamp(nowMs, tz);
  const relativePath = `memory/${day}.md`;
  const now = new Date(nowMs);
  let local;
  try {
    local = new Intl.DateTimeFormat("en-US", { timeZone: tz, dateStyle: "full", timeStyle: "short" }).format(now);
  } catch {
    local = now.toISOString();
  }
  const timeLine = `Current time: ${local} (${tz})\nReference UTC: ${now.toISOString().replace("T", " ").slice(0, 16)} UTC`;
  const target = `Store durable memories only in ${relativePath} (create memory/ if needed).`;
  const append = `If ${relativePath} already exists, APPEND new content only and do not overwrite existing entries.`;
  const readOnly =
    "Treat workspace bootstrap/reference files such as MEMORY.md, DREAMS.md, SOUL.md, and AGENTS.md as read-only during this flush; never overwrite, replace, or edit them.";
  const prompt = [
    "Pre-compaction memory flush.",
    target,
    readOnly,
    append,
    `Do NOT create timestamped variant files (such as ${day}-HHMM.md); always use the canonical ${day}.md filename.`,
    `If nothing to store, reply with ${NO_REPLY}.`,
  ].join(" ");
  const systemPrompt = [
    "Pre-compaction memory flush turn.",
    "The session is near auto-compaction; capture durable memories to disk.",
    target,
    readOnly,
    append,
    `You may reply, but usually ${NO_REPLY} is correct.`,
  ].join(" ");
  return {
    softThresholdTokens,
    forceFlushTranscriptBytes,
    reserveTokensFloor,
    model: typeof settings?.model === "string" && settings.model.trim() ? settings.model.trim() : undefined,
    prompt: `${prompt}\n${timeLine}`,
    systemPrompt,
    relativePath,
  };
}

// --- workspace memory path classification -------------------------------------------------------------------

const OWNER_FILES = new Set(["MEMORY.md", "memory.md", "USER.md"]);
const USER_PROFILE = /^users\/[a-zA-Z0-9][a-zA-Z0-9_-]{0,127}\/USER\.md$/;

/** "owner" | "agent" | "system" | "untrusted" for a clean workspace-relative path. */
export function classifyRelative(rel) {
  if (!rel || rel === "." || rel.startsWith("../") || rel === ".." || path.posix.isAbsolute(rel) || rel.includes("\\") || rel.includes("\0") || path.posix.normalize(rel) !== rel) {
    return "untrusted";
  }
  const seg = rel.split("/");
  if ((seg.length === 1 && (seg[0] === "DREAMS.md" || seg[0] === "dreams.md")) || (seg[0] === "memory" && (seg[1] === "dreaming" || seg[1] === ".dreams"))) {
    return "system";
  }
  if ((seg.length === 1 && OWNER_FILES.has(seg[0])) || USER_PROFILE.test(rel)) return "owner";
  if (seg[0] === "memory" && seg.length > 1 && rel.endsWith(".md")) return "agent";
  return "untrusted";
}

/**
 * The runtime's classifyWorkspaceMemoryPaths: MEMORY.md and USER.md (the user's curated files) are owner files,
 * memory/*.md agent-written notes, dreaming output system files, anything else (or outside the workspace)
 * untrusted. With readSources (files already read by the host) the host's canonical path is used, unprobed.
 */
export async function classifyWorkspaceMemoryPaths(params) {
  const workspaceDir = params.workspaceDir;
  return await Promise.all(
    (params.relativePaths ?? []).map(async (relativePath) => {
      if (params.readSources !== undefined) {
        const source = params.readSources.find((s) => s.relativePath === relativePath);
        return { relativePath, originClass: source?.canonicalRelativePath ? classifyRelative(source.canonicalRelativePath) : "untrusted" };
      }
      try {
        const [root, file] = await Promise.all([realpath(workspaceDir), realpath(path.resolve(workspaceDir, relativePath))]);
        const rel = path.relative(root, file);
        if (!rel || rel.startsWith("..") || path.isAbsolute(rel)) return { relativePath, originClass: "untrusted" };
        return { relativePath, originClass: classifyRelative(rel.split(path.sep).join("/")) };
      } catch {
        return { relativePath, originClass: "untrusted" };
      }
    }),
  );
}

// --- trigger recall (lane 1) ----------------------------------------------------------------------------------

/** OpenClaw's bound on the injected trigger block (characters of the entry list). */
export const MAX_TRIGGER_CONTEXT_CHARS = 1800;

function escapeXml(s) {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
}

/** Cut to at most `max` UTF-16 units without splitting a surrogate pair. */
function truncateUtf16(s, max) {
  if (s.length <= max) return s;
  let end = max;
  const code = s.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end -= 1;
  return s.slice(0, end);
}

/**
 * The hidden context block for trigger-matched entries, in the shape OpenClaw's own lane-1 recall injects
 * ("Context:" and an <active_memory_plugin> block, which OpenClaw strips from stored transcripts so a recalled
 * fact is never re-extracted as a new memory). `undefined` when there is nothing to inject.
 */
export function buildTriggerContext(entries) {
  if (!Array.isArray(entries) || entries.length === 0) return undefined;
  const summary = entries
    .map((e) => `- ${String(e.text ?? "").replace(/^\s*[-*]\s+/, "").trim()} (Source: ${e.path}#L${e.line})`)
    .join("\n");
  return ["Context:", "<active_memory_plugin>", escapeXml(truncateUtf16(summary, MAX_TRIGGER_CONTEXT_CHARS)), "</active_memory_plugin>"].join("\n");
}

/** Active repository keys from a hook or tool context: strings, most recent first, at most 4. */
export function activeProjectKeys(ctx) {
  const keys = ctx?.activeProjectKeys;
  if (!Array.isArray(keys)) return [];
  return keys.filter((k) => typeof k === "string" && k.trim()).map((k) => k.trim()).slice(0, 4);
}

// --- public artifacts -----------------------------------------------------------------------------------------

/**
 * Folders memory-core never walks (memory-rs's `memory_core::discovery::IGNORED_DIRS`; a test in
 * crates/memory-cli/tests/openclaw_plugin.rs keeps the two lists equal).
 */
export const IGNORED_DIRS = [".git", "node_modules", ".venv", "venv", "__pycache__", ".hg", ".svn"];

async function walkMarkdown(dir, out, depth = 0) {
  if (depth > 16 || out.length >= 10_000) return;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries.sort((a, b) => a.name.localeCompare(b.name))) {
    if (e.isSymbolicLink()) continue;
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      if (!IGNORED_DIRS.includes(e.name)) await walkMarkdown(p, out, depth + 1);
    } else if (e.isFile() && e.name.endsWith(".md")) {
      out.push(p);
    }
  }
}

/**
 * The public memory artifacts of the agents' workspaces, as memory-core lists them (memory-wiki's bridge reads
 * them): MEMORY.md as `memory-root`, memory/**.md as `daily-note` (`dream-report` under memory/dreaming/).
 * `workspaces`: [{ workspaceDir, agentIds }].
 */
export async function listPublicArtifacts(workspaces) {
  const artifacts = [];
  for (const { workspaceDir, agentIds } of workspaces) {
    const names = new Set(
      (await readdir(workspaceDir, { withFileTypes: true }).catch(() => [])).filter((e) => e.isFile()).map((e) => e.name),
    );
    if (names.has("MEMORY.md")) {
      artifacts.push({ kind: "memory-root", workspaceDir, relativePath: "MEMORY.md", absolutePath: path.join(workspaceDir, "MEMORY.md"), agentIds: [...agentIds], contentType: "markdown" });
    }
    const files = [];
    await walkMarkdown(path.join(workspaceDir, "memory"), files);
    for (const absolutePath of files) {
      const relativePath = path.relative(workspaceDir, absolutePath).split(path.sep).join("/");
      artifacts.push({
        kind: relativePath.startsWith("memory/dreaming/") ? "dream-report" : "daily-note",
        workspaceDir,
        relativePath,
        absolutePath,
        agentIds: [...agentIds],
        contentType: "markdown",
      });
    }
  }
  return artifacts;
}
