// One long-lived `memory serve` child per (agent, workspace), spoken to over MCP (JSON-RPC 2.0, one JSON
// message per line on stdio); or, with the plugin setting `sharedServer`, one-shot commands answered by the
// state folder's shared server (`OneShotEngine`). Every call is bounded; a child that dies is restarted on the next call (at most
// MAX_RESTARTS in RESTART_WINDOW_MS, then calls fail fast for a while with the child's last stderr lines).

import { spawn, execFile } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const DEFAULT_TIMEOUT_MS = 8000;
const MAX_RESTARTS = 5;
const RESTART_WINDOW_MS = 60_000;
const COOLDOWN_MS = 10_000;
const STDERR_LINES = 20;
const STATUS_REFRESH_MS = 30_000;
const PROTOCOL_VERSION = "2025-06-18";
const PLUGIN_ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** The `memory` binary: configured, else packed with the plugin, else an optional platform package, else PATH. */
export function resolveCommand(configured) {
  if (typeof configured === "string" && configured.trim()) return { command: configured, from: "config" };
  const platform = `${process.platform}-${process.arch}`;
  const exe = process.platform === "win32" ? "memory.exe" : "memory";
  const packed = path.join(PLUGIN_ROOT, "bin", platform, exe);
  if (existsSync(packed)) return { command: packed, from: "packed" };
  try {
    const require = createRequire(import.meta.url);
    const pkg = require.resolve(`memory-rs-openclaw-${platform}/package.json`);
    const bin = path.join(path.dirname(pkg), "bin", exe);
    if (existsSync(bin)) return { command: bin, from: "platform-package" };
  } catch {
    // not installed: fine, PATH next
  }
  return { command: "memory", from: "path" };
}

/** The platforms a prebuilt binary is published for (npm packages memory-rs-openclaw-<platform>-<arch>), one per
 * job of the release workflow (.github/workflows/release.yml). */
export const PREBUILT_PLATFORMS = ["linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64"];

/** Why `command` cannot start: for a missing `memory`, which platform lacked a binary and how to get one. */
export function startFailure(command, err) {
  if (err?.code !== "ENOENT" || command !== "memory") return `cannot start ${command}: ${err?.message ?? err}`;
  const platform = `${process.platform}-${process.arch}`;
  const why = PREBUILT_PLATFORMS.includes(platform)
    ? `its package memory-rs-openclaw-${platform} is not installed beside the plugin`
    : `no prebuilt binary is published for ${platform} (only ${PREBUILT_PLATFORMS.join(", ")})`;
  return (
    `no memory-rs binary for ${platform}: ${why}, and \`memory\` is not on PATH. ` +
    "Build it from source (cargo install memory-cli, Rust 1.89+), then put it on PATH or set " +
    "plugins.entries.memory-rs.config.command to its path."
  );
}

export class EngineError extends Error {
  constructor(message, kind = "unavailable") {
    super(message);
    this.kind = kind;
  }
}

class Child {
  constructor(engine) {
    this.engine = engine;
    this.pending = new Map();
    this.nextId = 1;
    this.buffer = "";
    this.exited = false;
    const { command, args, workspace, agentId } = engine;
    this.proc = spawn(command, [...args, "--workspace", workspace, "--agent", agentId, "serve"], {
      stdio: ["pipe", "pipe", "pipe"],
      env: process.env,
    });
    this.proc.stdout.setEncoding("utf8");
    this.proc.stdout.on("data", (chunk) => this.onData(chunk));
    this.proc.stderr.setEncoding("utf8");
    this.proc.stderr.on("data", (chunk) => engine.noteStderr(chunk));
    this.proc.stdin.on("error", () => {});
    this.proc.on("error", (err) => this.onExit(startFailure(command, err)));
    this.proc.on("exit", (code, signal) => this.onExit(`memory serve exited (${signal ?? `code ${code}`})`));
  }

  onData(chunk) {
    this.buffer += chunk;
    let nl;
    while ((nl = this.buffer.indexOf("\n")) >= 0) {
      const line = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (!line) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      if (msg.id === undefined || msg.id === null) continue; // notifications and logs
      const waiter = this.pending.get(msg.id);
      if (!waiter) continue;
      this.pending.delete(msg.id);
      if (msg.error) waiter.reject(new EngineError(`memory serve: ${msg.error.message ?? JSON.stringify(msg.error)}`, "engine"));
      else waiter.resolve(msg.result);
    }
  }

  onExit(reason) {
    if (this.exited) return;
    this.exited = true;
    const tail = this.engine.stderrTail();
    const err = new EngineError(tail ? `${reason}: ${tail}` : reason);
    for (const w of this.pending.values()) w.reject(err);
    this.pending.clear();
    this.engine.childGone(this, err);
  }

  request(method, params, deadline, signal) {
    if (this.exited) return Promise.reject(new EngineError("memory serve is not running"));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const ms = Math.max(1, deadline - Date.now());
      const cleanup = () => {
        clearTimeout(timer);
        signal?.removeEventListener?.("abort", onAbort);
      };
      const timer = setTimeout(() => {
        this.pending.delete(id);
        cleanup();
        this.engine.noteTimeout(this);
        reject(new EngineError(`memory engine did not answer ${method} within ${this.engine.timeoutMs} ms`, "timeout"));
      }, ms);
      const onAbort = () => {
        this.pending.delete(id);
        cleanup();
        reject(signal.reason instanceof Error ? signal.reason : new EngineError("aborted", "aborted"));
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener?.("abort", onAbort, { once: true });
      this.pending.set(id, {
        resolve: (v) => {
          cleanup();
          this.engine.timeouts = 0;
          resolve(v);
        },
        reject: (e) => {
          cleanup();
          reject(e);
        },
      });
      this.proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", id, method, params }) + "\n");
    });
  }

  notify(method, params) {
    if (!this.exited) this.proc.stdin.write(JSON.stringify({ jsonrpc: "2.0", method, params }) + "\n");
  }

  kill() {
    if (this.exited) return;
    try {
      this.proc.stdin.end();
    } catch {}
    const p = this.proc;
    setTimeout(() => {
      if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
    }, 2000).unref();
    p.kill("SIGTERM");
  }
}

/** The engine for one agent workspace. */
export class Engine {
  constructor({ command, args = [], timeoutMs = DEFAULT_TIMEOUT_MS, workspace, agentId, logger }) {
    this.command = command;
    this.args = args;
    this.timeoutMs = timeoutMs;
    this.workspace = workspace;
    this.agentId = agentId;
    this.logger = logger;
    this.child = null;
    this.ready = null;
    this.starts = [];
    this.cooldownUntil = 0;
    this.lastError = null;
    this.stderr = [];
    this.timeouts = 0;
    this.status = null;
    this.statusAt = 0;
    this.statusRunning = null;
    this.closed = false;
  }

  noteStderr(chunk) {
    for (const line of chunk.split("\n")) {
      if (!line.trim()) continue;
      this.stderr.push(line.trimEnd());
      if (this.stderr.length > STDERR_LINES) this.stderr.shift();
    }
  }

  stderrTail() {
    return this.stderr.slice(-3).join(" | ");
  }

  noteTimeout(child) {
    // A child that stopped answering altogether is replaced; a slow one (indexing) is given time.
    if (++this.timeouts >= 3 && this.child === child) {
      this.logger?.warn?.(`memory-rs: memory serve for ${this.workspace} stopped answering; restarting it`);
      this.timeouts = 0;
      child.kill();
    }
  }

  childGone(child, err) {
    if (this.child !== child) return;
    this.child = null;
    this.ready = null;
    this.lastError = err;
    if (!this.closed) this.logger?.warn?.(`memory-rs: ${err.message}`);
  }

  /** A running, initialized child (started or restarted as needed), within the deadline. */
  async connect(deadline, signal) {
    if (this.closed) throw new EngineError("memory-rs engine closed");
    if (this.child && this.ready) return this.ready;
    const now = Date.now();
    if (now < this.cooldownUntil) {
      throw new EngineError(`memory serve keeps failing; retrying after a pause (${this.lastError?.message ?? "no error"})`);
    }
    this.starts = this.starts.filter((t) => now - t < RESTART_WINDOW_MS);
    if (this.starts.length >= MAX_RESTARTS) {
      this.cooldownUntil = now + COOLDOWN_MS;
      this.starts = [];
      throw new EngineError(`memory serve failed ${MAX_RESTARTS} times in a minute (${this.lastError?.message ?? "no error"})`);
    }
    this.starts.push(now);
    mkdirSync(this.workspace, { recursive: true });
    const child = new Child(this);
    this.child = child;
    this.ready = (async () => {
      await child.request(
        "initialize",
        { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "openclaw-memory-rs", version: "0.1.0" } },
        deadline,
        signal,
      );
      child.notify("notifications/initialized", {});
      return child;
    })();
    this.ready.catch(() => {
      if (this.child === child) {
        this.child = null;
        this.ready = null;
        child.kill();
      }
    });
    return this.ready;
  }

  /** Call an MCP tool; answers the tool's JSON payload, or throws EngineError (kind from the engine's error). */
  async callTool(name, args, signal) {
    const deadline = Date.now() + this.timeoutMs;
    const child = await this.connect(deadline, signal);
    const result = await child.request("tools/call", { name, arguments: args }, deadline, signal);
    let payload = result?.structuredContent;
    if (payload === undefined) {
      const text = result?.content?.find?.((c) => c.type === "text")?.text;
      try {
        payload = text ? JSON.parse(text) : undefined;
      } catch {
        payload = { error: { kind: "engine", message: text } };
      }
    }
    if (result?.isError) {
      const e = payload?.error ?? {};
      throw new EngineError(e.message ?? "memory engine error", e.kind ?? "engine");
    }
    return payload ?? {};
  }

  /** `memory status --json` (a short-lived process beside the server), cached; refreshed in the background. */
  refreshStatus(force = false) {
    if (this.statusRunning) return this.statusRunning;
    if (!force && Date.now() - this.statusAt < STATUS_REFRESH_MS) return Promise.resolve(this.status);
    this.statusRunning = new Promise((resolve) => {
      execFile(
        this.command,
        [...this.args, "--workspace", this.workspace, "--agent", this.agentId, "status", "--json"],
        { timeout: this.timeoutMs, maxBuffer: 4 << 20, env: process.env },
        (err, stdout) => {
          this.statusRunning = null;
          this.statusAt = Date.now();
          if (!err) {
            try {
              this.status = JSON.parse(stdout);
            } catch {
              // keep the previous one
            }
          }
          resolve(this.status);
        },
      );
    });
    return this.statusRunning;
  }

  close() {
    this.closed = true;
    this.child?.kill();
    this.child = null;
    this.ready = null;
  }
}

/** The kind of a `memory` command's one-line error (`error: not found: ...`), as the MCP tools name it. */
export function errorKind(message) {
  const m = /^(?:error: )?(invalid input|config error|refused|not found|corrupt index|internal error|embedding provider error)\b/.exec(message);
  if (!m) return "unavailable";
  return {
    "invalid input": "invalid_input",
    "config error": "invalid_input",
    refused: "refused",
    "not found": "not_found",
    "corrupt index": "corrupt_index",
    "internal error": "internal",
    "embedding provider error": "unavailable",
  }[m[1]];
}

/** The argument list of the one-shot command for a tool call (`--` before the query or path: one that starts
 * with `-` is not an option). */
export function oneShotArgs(name, args) {
  const a = args ?? {};
  const num = (flag, v) => (v === undefined || v === null ? [] : [flag, String(v)]);
  if (name === "memory_search") {
    return ["search", "--json", ...num("--max-results", a.maxResults), ...num("--min-score", a.minScore), "--", String(a.query ?? "")];
  }
  if (name === "memory_get") {
    return ["get", "--json", ...num("--from", a.from), ...num("--lines", a.lines), ...num("--offset", a.offset), "--", String(a.path ?? "")];
  }
  throw new EngineError(`unknown tool ${name}`, "invalid_input");
}

/**
 * The engine for one agent workspace when the plugin setting `sharedServer` is on: no child per workspace; each
 * call is a one-shot `memory search|get --json`, which the state folder's shared server (`memory server start`)
 * answers in milliseconds, or the command itself when no server answers (same answer either way).
 */
export class OneShotEngine extends Engine {
  callTool(name, args, signal) {
    if (this.closed) return Promise.reject(new EngineError("memory-rs engine closed"));
    const argv = [...this.args, "--workspace", this.workspace, "--agent", this.agentId, ...oneShotArgs(name, args)];
    return new Promise((resolve, reject) => {
      execFile(this.command, argv, { timeout: this.timeoutMs, maxBuffer: 16 << 20, env: process.env, signal }, (err, stdout, stderr) => {
        if (err) {
          const line = String(stderr ?? "").split("\n").reverse().find((l) => l.startsWith("error: ")) ?? "";
          if (err.killed || err.code === "ETIMEDOUT") {
            reject(new EngineError(`memory did not answer ${name} within ${this.timeoutMs} ms`, "timeout"));
          } else if (line) {
            reject(new EngineError(line.slice("error: ".length), errorKind(line)));
          } else {
            this.lastError = err;
            reject(new EngineError(err.code === "ENOENT" ? startFailure(this.command, err) : `cannot run ${this.command}: ${err.message}`));
          }
          return;
        }
        try {
          resolve(JSON.parse(stdout));
        } catch {
          reject(new EngineError(`memory ${name}: the answer is not JSON`, "engine"));
        }
      });
    });
  }

  close() {
    this.closed = true;
  }
}

/** Start the state folder's shared server (`memory server start`: a no-op when one runs). */
export function startSharedServer({ command, args = [], timeoutMs = DEFAULT_TIMEOUT_MS, logger }) {
  return new Promise((resolve) => {
    execFile(command, [...args, "server", "start"], { timeout: Math.max(timeoutMs, 15_000), env: process.env }, (err, stdout, stderr) => {
      if (err) logger?.warn?.(`memory-rs: memory server start failed (one-shot commands answer in-process): ${String(stderr || err.message).trim()}`);
      else logger?.info?.(`memory-rs: ${String(stdout).trim()}`);
      resolve(!err);
    });
  });
}

/** Engines by agent and workspace. */
export class EnginePool {
  constructor(options) {
    this.options = options;
    this.engines = new Map();
  }

  get(agentId, workspace) {
    const key = `${agentId}\u0000${path.resolve(workspace)}`;
    let engine = this.engines.get(key);
    if (!engine) {
      const Kind = this.options.sharedServer ? OneShotEngine : Engine;
      engine = new Kind({ ...this.options, agentId, workspace: path.resolve(workspace) });
      this.engines.set(key, engine);
      engine.refreshStatus(true);
    }
    return engine;
  }

  closeAgent(agentId) {
    for (const [key, engine] of this.engines) {
      if (engine.agentId === agentId) {
        engine.close();
        this.engines.delete(key);
      }
    }
  }

  closeAll() {
    for (const engine of this.engines.values()) engine.close();
    this.engines.clear();
  }
}
