// OpenClaw memory plugin (plugins.slots.memory = "memory-rs"): memory_search and memory_get, and the memory
// runtime behind `gateway call memory.search` and the session-start memory files, answered by the memory-rs
// engine (`memory serve`, one long-lived child per agent workspace, over MCP). Plain JavaScript, no dependencies.

import { DEFAULT_TIMEOUT_MS, EngineError, EnginePool, resolveCommand, startSharedServer } from "./lib/engine.js";
import {
  MEMORY_GET_PARAMETERS,
  activeProjectKeys,
  buildTriggerContext,
  listPublicArtifacts,
  MEMORY_SEARCH_PARAMETERS,
  buildFlushPlan,
  buildPromptSection,
  citationsMode,
  classifyWorkspaceMemoryPaths,
  getDescription,
  includeCitations,
  jsonResult,
  managerHit,
  memorySettings,
  presentHit,
  readResult,
  searchDescription,
} from "./lib/contract.js";

const PLUGIN_ID = "memory-rs";
/** Trigger recall runs before every user turn's reply: its own bound, shorter than a tool call's. */
const RECALL_TIMEOUT_MS = 3000;

/** `tools.deny` names memory-core: OpenClaw skips all of its tools (memory-core stays loaded for dreaming). */
export function memoryCoreToolsDenied(cfg) {
  const deny = cfg?.tools?.deny;
  return Array.isArray(deny) && deny.some((d) => typeof d === "string" && d.trim().toLowerCase() === "memory-core");
}

/** memory-core is enabled unless its entry says enabled: false, it is denied, or plugins are off. */
export function memoryCoreEnabled(cfg) {
  const plugins = cfg?.plugins ?? {};
  if (plugins.enabled === false) return false;
  if (Array.isArray(plugins.deny) && plugins.deny.includes("memory-core")) return false;
  if (Array.isArray(plugins.allow) && plugins.allow.length > 0 && !plugins.allow.includes("memory-core")) return false;
  return plugins.entries?.["memory-core"]?.enabled !== false;
}

function fail(message) {
  throw new Error(message);
}

function readArgs(raw, spec) {
  const args = raw && typeof raw === "object" ? raw : {};
  for (const key of Object.keys(args)) if (!(key in spec.properties)) fail(`unexpected parameter: ${key}`);
  return args;
}

function positiveInt(args, key) {
  const v = args[key];
  if (v === undefined || v === null) return undefined;
  const n = typeof v === "string" && v.trim() ? Number(v) : v;
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1) fail(`${key} must be a positive integer`);
  return n;
}

function corpusArg(args, allowed) {
  const v = args.corpus;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "string" || !allowed.includes(v)) fail(`corpus must be one of: ${allowed.join(", ")}`);
  return v;
}

function providerStatus(engine, memoryCoreOn) {
  const s = engine.status ?? {};
  const caps = s.capabilities ?? {};
  const vector = caps.vector === true;
  const out = {
    backend: "builtin",
    provider: PLUGIN_ID,
    model: s.model ? `${s.provider ?? "?"}/${s.model}` : (s.provider ?? undefined),
    requestedProvider: s.provider ?? undefined,
    files: typeof s.files === "number" ? s.files : undefined,
    chunks: typeof s.chunks === "number" ? s.chunks : undefined,
    dirty: typeof s.dirty === "number" ? s.dirty > 0 : s.dirty === true,
    workspaceDir: engine.workspace,
    dbPath: s.indexPath ?? undefined,
    sources: ["memory"],
    fts: { enabled: true, available: caps.keyword !== false },
    vector: { enabled: vector, available: vector, semanticAvailable: vector },
    custom: {
      engine: PLUGIN_ID,
      engineBackend: s.backend,
      embeddingProvider: s.provider,
      searchMode: caps.hybrid ? "hybrid" : "fts-only",
      command: engine.command,
      memoryCoreEnabled: memoryCoreOn,
      lastError: engine.lastError?.message,
    },
  };
  if (s.fallback) out.fallback = { from: s.fallback.from ?? String(s.fallback), reason: s.fallback.reason };
  return out;
}

function engineSearchArgs({ query, maxResults, minScore, sources, projects, after, before }) {
  const args = { query };
  if (maxResults !== undefined) args.maxResults = maxResults;
  if (typeof minScore === "number" && Number.isFinite(minScore)) args.minScore = minScore;
  if (Array.isArray(sources) && sources.length > 0) args.sources = sources;
  if (Array.isArray(projects) && projects.length > 0) args.activeProjectKeys = projects;
  // Passed as given: the engine checks them and names the field of a day it cannot read.
  if (after !== undefined && after !== null) args.after = String(after);
  if (before !== undefined && before !== null) args.before = String(before);
  return args;
}

/** Engine search, limited to `sources` (and `after`/`before`) by the engine itself (every configured source when none are given). */
async function searchSources(engine, { query, maxResults, minScore, sources, projects, after, before, signal }) {
  const r = await engine.callTool("memory_search", engineSearchArgs({ query, maxResults, minScore, sources, projects, after, before }), signal);
  const results = Array.isArray(r.results) ? r.results : [];
  return { results, mode: r.mode, warnings: Array.isArray(r.warnings) ? r.warnings : [] };
}

function unavailable(error, extra = {}) {
  return jsonResult({
    results: [],
    disabled: true,
    unavailable: true,
    error,
    warning: extra.warning ?? "Memory search is unavailable: the memory-rs engine did not answer.",
    action:
      extra.action ??
      "Retry memory_search after a short wait. If it keeps failing, run `memory openclaw status` and `memory status --deep` on the gateway host.",
  });
}

const plugin = {
  id: PLUGIN_ID,
  name: "memory-rs",
  description: "Agent memory served by the memory-rs engine (memory_search, memory_get over MCP)",
  kind: "memory",
  register(api) {
    const pluginConfig = api.pluginConfig ?? {};
    const { command, from: commandFrom } = resolveCommand(pluginConfig.command);
    const timeoutMs = Number.isInteger(pluginConfig.timeoutMs) ? pluginConfig.timeoutMs : DEFAULT_TIMEOUT_MS;
    const args = Array.isArray(pluginConfig.args) ? pluginConfig.args.map(String) : [];
    const logger = api.logger;
    const sharedServer = pluginConfig.sharedServer === true;
    const pool = new EnginePool({ command, args, timeoutMs, logger, sharedServer });
    // Chosen in the plugin's settings: every agent workspace is answered by the one shared server.
    if (sharedServer) startSharedServer({ command, args, timeoutMs, logger });
    const liveConfig = () => (api.runtime?.config?.current ? api.runtime.config.current() : api.config) ?? api.config;

    const coreOn = memoryCoreEnabled(api.config);
    if (coreOn && !memoryCoreToolsDenied(api.config)) {
      logger.warn(
        "memory-rs: WARNING: the bundled memory-core plugin is still enabled with its tools. It keeps loading beside " +
          "this plugin and its memory_search/memory_get win the tool-name conflict, so agents do NOT search with " +
          'memory-rs. Fix: `memory openclaw install` (adds "memory-core" to tools.deny, keeping memory-core for ' +
          "dreaming), then restart the gateway.",
      );
    }
    logger.info?.(`memory-rs: engine command ${command} (${commandFrom}), timeout ${timeoutMs} ms${sharedServer ? ", shared server" : ""}`);

    const workspaceFor = (cfg, agentId, ctxWorkspace) => {
      if (typeof ctxWorkspace === "string" && ctxWorkspace) return ctxWorkspace;
      const resolve = api.runtime?.agent?.resolveAgentWorkspaceDir;
      if (typeof resolve === "function") return resolve(cfg, agentId);
      fail("cannot resolve the agent workspace (no workspaceDir in context and no runtime resolver)");
    };

    const engineFor = (cfg, agentId, ctxWorkspace) => pool.get(agentId, workspaceFor(cfg, agentId, ctxWorkspace));

    // --- the memory runtime --------------------------------------------------------------------------------
    const makeManager = (engine, settings) => ({
      async search(query, opts = {}) {
        const maxResults = Number.isInteger(opts.maxResults) && opts.maxResults > 0 ? opts.maxResults : settings.maxResults;
        const { results } = await searchSources(engine, {
          query,
          maxResults,
          minScore: opts.minScore,
          sources: opts.sources,
          projects: activeProjectKeys(opts),
          signal: opts.signal,
        });
        engine.refreshStatus();
        return results.map(managerHit);
      },
      // OpenClaw's Project Memory block (every full turn in a repository): MEMORY.md's entries tagged for the
      // session's active repositories, from the engine (memory_recall with projectEntries), in the manager's
      // candidate shape (provenance: MEMORY.md is an owner file).
      async listCuratedProjectCandidates(opts = {}) {
        const keys = activeProjectKeys(opts);
        if (keys.length === 0) return [];
        const limit = Number.isInteger(opts.limit) && opts.limit > 0 ? Math.min(opts.limit, 512) : 48;
        const r = await engine.callTool("memory_recall", { message: "", activeProjectKeys: keys, projectEntries: limit }, opts.signal);
        return (Array.isArray(r.projectEntries) ? r.projectEntries : []).map((e) => ({
          path: e.path,
          startLine: e.line,
          endLine: e.line,
          score: 1,
          snippet: e.text,
          source: "memory",
          projectKey: (e.projects ?? []).join("; "),
          importance: typeof e.importance === "number" ? e.importance : null,
          triggers: null,
          provenance: { originClass: "owner", sessionKind: "unknown" },
        }));
      },
      async readFile({ relPath, from, lines }) {
        try {
          const r = await engine.callTool("memory_get", { path: relPath, ...(from ? { from } : {}), ...(lines ? { lines } : {}) });
          return readResult(r, relPath);
        } catch (e) {
          if (e instanceof EngineError && e.kind === "not_found") return { status: "not_found", path: relPath, text: "" };
          throw e;
        }
      },
      status() {
        return providerStatus(engine, memoryCoreEnabled(liveConfig()));
      },
      async sync() {
        await engine.refreshStatus(true);
      },
      getCachedEmbeddingAvailability() {
        if (!engine.status) return null;
        return { ok: engine.status.capabilities?.vector === true, cached: true, checked: true, checkedAtMs: engine.statusAt };
      },
      async probeEmbeddingAvailability() {
        const s = await engine.refreshStatus(true);
        if (!s) return { ok: false, error: engine.lastError?.message ?? "memory status did not answer", checked: true };
        const ok = s.capabilities?.vector === true;
        return ok ? { ok, checked: true } : { ok, checked: true, error: `no embeddings (provider ${s.provider ?? "none"}): keyword search only` };
      },
      async probeVectorStoreAvailability() {
        return (await engine.refreshStatus(true))?.capabilities?.vector === true;
      },
      async probeVectorAvailability() {
        return (await engine.refreshStatus(true))?.capabilities?.vector === true;
      },
      async close() {
        // The child is shared by every manager of this agent workspace and outlives calls; closeMemorySearchManager
        // and closeAllMemorySearchManagers stop it.
      },
    });

    const runtime = {
      supportsWorkspaceMemoryReadSources: true,
      async getMemorySearchManager({ cfg, agentId, purpose }) {
        const started = Date.now();
        try {
          const config = cfg ?? liveConfig();
          const settings = memorySettings(config, agentId);
          if (!settings.enabled) return { manager: null, error: `memory search is disabled for agent ${agentId}` };
          const engine = engineFor(config, agentId);
          return { manager: makeManager(engine, settings), debug: { backend: "builtin", purpose: purpose ?? "default", managerMs: Date.now() - started } };
        } catch (e) {
          return { manager: null, error: `memory-rs: ${e.message}` };
        }
      },
      resolveMemoryBackendConfig() {
        return { backend: "builtin" };
      },
      async authorizeSearchHits({ hits, sandboxed }) {
        // Memory-file hits are the agent's own; session transcript hits are withheld from sandboxed callers.
        return (hits ?? []).filter((h) => (h.source ?? "memory") === "memory" || !sandboxed);
      },
      classifyWorkspaceMemoryPaths,
      async closeMemorySearchManager({ agentId }) {
        pool.closeAgent(agentId);
      },
      async closeAllMemorySearchManagers() {
        pool.closeAll();
      },
    };

    // The agents' workspaces, for publicArtifacts: every configured agent (else main) with its resolved workspace.
    const agentWorkspaces = (cfg) => {
      const list = Array.isArray(cfg?.agents?.list) ? cfg.agents.list : [];
      const entries = cfg?.agents?.entries && typeof cfg.agents.entries === "object" ? Object.keys(cfg.agents.entries) : [];
      const ids = [...new Set([...list.map((a) => (typeof a?.id === "string" ? a.id : null)), ...entries].filter(Boolean))];
      const byWorkspace = new Map();
      for (const agentId of ids.length > 0 ? ids : ["main"]) {
        let workspaceDir;
        try {
          workspaceDir = workspaceFor(cfg, agentId);
        } catch (e) {
          logger.warn?.(`memory-rs: no workspace for agent ${agentId}: ${e.message}`);
          continue;
        }
        const ws = byWorkspace.get(workspaceDir) ?? [];
        ws.push(agentId);
        byWorkspace.set(workspaceDir, ws);
      }
      return [...byWorkspace].map(([workspaceDir, agentIds]) => ({ workspaceDir, agentIds }));
    };

    api.registerMemoryCapability({
      // The tool Active Memory's recall sub-agent uses (it must be allowed for the agent).
      deterministicRecallToolName: "memory_search",
      // Declared false on purpose: memory-core restricts cross-conversation transcript recall to the same agent's
      // private sessions (session store, reset cut-offs, sender checks); this engine indexes the agent's
      // transcripts without that visibility model, so "Remember across conversations" stays off rather than
      // risk showing another conversation's transcript. Undeclared, memory-core's `true` would be inherited when
      // it stays loaded beside this plugin.
      supportsPrivateTranscriptRecall: false,
      publicArtifacts: {
        async listArtifacts(params) {
          return await listPublicArtifacts(agentWorkspaces(params?.cfg ?? liveConfig()));
        },
      },
      promptBuilder: (params) => {
        const settings = memorySettings(liveConfig(), params.agentId ?? "main");
        return settings.enabled ? buildPromptSection(params) : [];
      },
      flushPlanResolver: (params) => buildFlushPlan(params),
      runtime,
    });

    // --- trigger recall: lane 1, before every user turn's reply ---------------------------------------------
    // The entries of MEMORY.md / USER.md whose <!-- trigger: ... --> phrases match the inbound message strongly
    // (the engine's memory_recall: score >= 0.72, at most three; daily notes never) are injected as hidden
    // context, with the session's active repository keys. Failures never block the reply.
    api.on("before_prompt_build", async (event, ctx) => {
      if (ctx?.trigger !== undefined && ctx.trigger !== "user") return undefined;
      const message = typeof event?.currentUserMessage === "string" ? event.currentUserMessage : event?.prompt;
      if (typeof message !== "string" || !message.trim()) return undefined;
      const started = Date.now();
      try {
        const cfg = liveConfig();
        const agentId = ctx?.agentId ?? "main";
        if (!memorySettings(cfg, agentId).enabled) return undefined;
        const engine = engineFor(cfg, agentId, ctx?.workspaceDir);
        const signal = AbortSignal.timeout(Math.min(timeoutMs, RECALL_TIMEOUT_MS));
        const r = await engine.callTool("memory_recall", { message, activeProjectKeys: activeProjectKeys(ctx) }, signal);
        const entries = Array.isArray(r.entries) ? r.entries : [];
        const prependContext = buildTriggerContext(entries);
        if (entries.length > 0) logger.info?.(`memory-rs: trigger recall injected ${entries.length} entries in ${Date.now() - started} ms`);
        else logger.debug?.(`memory-rs: trigger recall found nothing (${r.candidates ?? 0} eligible entries) in ${Date.now() - started} ms`);
        return prependContext ? { prependContext } : undefined;
      } catch (e) {
        logger.warn?.(`memory-rs: trigger recall skipped: ${e.message}`);
        return undefined;
      }
    });

    // --- the agent tools -----------------------------------------------------------------------------------
    const toolContext = (ctx) => {
      const cfg = (ctx.getRuntimeConfig?.() ?? ctx.runtimeConfig ?? ctx.config ?? liveConfig()) || {};
      const agentId = ctx.agentId ?? "main";
      return { cfg, agentId, settings: memorySettings(cfg, agentId) };
    };

    api.registerTool(
      (ctx) => {
        const { settings } = toolContext(ctx);
        if (!settings.enabled) return null;
        return {
          label: "Memory Search",
          name: "memory_search",
          description: searchDescription(settings),
          parameters: MEMORY_SEARCH_PARAMETERS,
          async execute(_toolCallId, params, signal) {
            const { cfg, agentId, settings: live } = toolContext(ctx);
            const a = readArgs(params, MEMORY_SEARCH_PARAMETERS);
            const query = typeof a.query === "string" ? a.query.trim() : "";
            if (!query) fail("query required");
            const maxResults = positiveInt(a, "maxResults");
            const minScore = a.minScore === undefined || a.minScore === null ? undefined : Number(a.minScore);
            if (minScore !== undefined && !Number.isFinite(minScore)) fail("minScore must be a number");
            const corpus = ctx.conversationRecall?.corpus === "sessions" ? "sessions" : corpusArg(a, ["memory", "wiki", "all", "sessions"]);
            const mode = citationsMode(cfg);
            const base = { citations: mode };
            let engine;
            try {
              engine = engineFor(cfg, agentId, ctx.workspaceDir);
            } catch (e) {
              return unavailable(e.message);
            }
            const statusNow = providerStatus(engine, memoryCoreEnabled(cfg));
            if (corpus === "sessions" && !live.sources.includes("sessions") && !ctx.conversationRecall) {
              return unavailable("Session transcript search is not enabled.", {
                warning: "Session transcript search is unavailable for this agent.",
                action: 'Enable session indexing: add "sessions" to memory.search.sources (memory-rs indexes OpenClaw transcripts).',
              });
            }
            if (corpus === "wiki") {
              return jsonResult({ results: [], provider: statusNow.provider, model: statusNow.model, ...base, mode: statusNow.custom.searchMode, warning: "No compiled-wiki corpus is registered with the memory-rs plugin." });
            }
            const sources = corpus === "memory" ? ["memory"] : corpus === "sessions" ? ["sessions"] : undefined;
            const started = Date.now();
            let r;
            try {
              r = await searchSources(engine, {
                query,
                maxResults: maxResults ?? live.maxResults,
                minScore,
                sources,
                projects: activeProjectKeys(ctx),
                after: a.after,
                before: a.before,
                signal,
              });
            } catch (e) {
              if (signal?.aborted) throw e;
              return unavailable(e.message);
            }
            engine.refreshStatus();
            const withCitations = includeCitations(mode, ctx.sessionKey);
            const results = r.results.filter((h) => (h.source ?? "memory") === "memory" || ctx.sandboxed !== true).map((h) => presentHit(h, withCitations));
            const payload = {
              results,
              provider: statusNow.provider,
              model: statusNow.model,
              fallback: statusNow.fallback,
              ...base,
              mode: r.mode,
              debug: { backend: PLUGIN_ID, toolMs: Date.now() - started },
            };
            if (r.warnings.length > 0) payload.warning = r.warnings.join(" ");
            return jsonResult(payload);
          },
        };
      },
      { names: ["memory_search"] },
    );

    api.registerTool(
      (ctx) => {
        const { settings } = toolContext(ctx);
        if (!settings.enabled) return null;
        return {
          label: "Memory Get",
          name: "memory_get",
          description: getDescription(settings),
          parameters: MEMORY_GET_PARAMETERS,
          async execute(_toolCallId, params, signal) {
            const { cfg, agentId } = toolContext(ctx);
            const a = readArgs(params, MEMORY_GET_PARAMETERS);
            const relPath = typeof a.path === "string" ? a.path.trim() : "";
            if (!relPath) fail("path required");
            const from = positiveInt(a, "from");
            const lines = positiveInt(a, "lines");
            const corpus = corpusArg(a, ["memory", "wiki", "all"]);
            if (corpus === "wiki") {
              return jsonResult({ status: "not_found", path: relPath, text: "", warning: "No compiled-wiki corpus is registered with the memory-rs plugin." });
            }
            try {
              const engine = engineFor(cfg, agentId, ctx.workspaceDir);
              const r = await engine.callTool("memory_get", { path: relPath, ...(from ? { from } : {}), ...(lines ? { lines } : {}) }, signal);
              return jsonResult(readResult(r, relPath));
            } catch (e) {
              if (signal?.aborted) throw e;
              const code = e instanceof EngineError ? `MEMORY_${String(e.kind).toUpperCase()}` : "MEMORY_READ_FAILED";
              return jsonResult({ path: relPath, text: "", status: "error", code, error: e.message });
            }
          },
        };
      },
      { names: ["memory_get"] },
    );
  },
};

export default plugin;
