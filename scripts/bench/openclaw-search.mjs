// In-process OpenClaw memory search, for `memory-bench compare`: opens OpenClaw's own memory search manager once
// (as `openclaw memory search` does) and runs many queries in one process, timing each `manager.search` call.
// Usage: node openclaw-search.mjs <openclaw package dir> <max results> < queries.txt  (one query per line)
// Output: one JSON line per query: {"query", "ms", "paths": [{"path","startLine","endLine","score"}]}.
// OpenClaw's bundle has hashed file names and minified export names, so the two functions are located by
// their exported names in the bundle's export lists (pinned to the version setup-openclaw.sh installs).
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { createInterface } from "node:readline";

const [pkgDir, maxArg] = process.argv.slice(2);
const maxResults = Number(maxArg || 6);
const dist = join(pkgDir, "dist");

async function findExport(name) {
  const re = new RegExp(`export \\{[^}]*\\b${name} as (\\w+)`);
  for (const f of readdirSync(dist)) {
    if (!f.endsWith(".mjs")) continue;
    const text = readFileSync(join(dist, f), "utf8");
    const m = text.match(re);
    if (m) return (await import(pathToFileURL(join(dist, f)).href))[m[1]];
  }
  throw new Error(`no module in ${dist} exports ${name}`);
}

const getRuntimeConfig = await findExport("getRuntimeConfig");
const getMemorySearchManager = await findExport("getMemorySearchManager");
const cfg = getRuntimeConfig({ skipPluginValidation: true });
const { manager, error } = await getMemorySearchManager({ cfg, agentId: "main", purpose: "cli" });
if (!manager) throw new Error(`OpenClaw memory manager unavailable: ${error}`);

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const query of rl) {
  if (!query.trim()) continue;
  const t = process.hrtime.bigint();
  const results = await manager.search(query, { maxResults, minScore: 0 });
  const ms = Number(process.hrtime.bigint() - t) / 1e6;
  const paths = results.map((r) => ({ path: r.path, startLine: r.startLine, endLine: r.endLine, score: r.score }));
  process.stdout.write(JSON.stringify({ query, ms, paths }) + "\n");
}
await manager.close?.();
process.exit(0);
