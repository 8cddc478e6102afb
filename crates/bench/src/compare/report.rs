//! compare.md from a run's results: the machine, the command, a table per corpus size with memory-rs,
//! QMD and OpenClaw side by side and the ratios, quality on Cranfield, the charts, and the limits.

use std::fmt::Write;

use super::{Cost, Fig, Results, SpeedRow};

fn time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 0.1 {
        format!("{:.1} ms", s * 1e3)
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else if s < 100.0 {
        format!("{s:.2} s")
    } else {
        format!("{s:.0} s")
    }
}

fn cell<T>(f: &Fig<T>, show: impl Fn(&T) -> String) -> String {
    match f {
        Ok(v) => show(v),
        Err(e) => format!("_{e}_"),
    }
}

fn wall_cpu(c: &Cost) -> String {
    format!("{} (cpu {})", time(c.wall_s), time(c.cpu_s))
}

/// "how many times the reference's figure is ours", when both exist.
fn ratio(reference: Option<f64>, ours: Option<f64>) -> String {
    match (reference, ours) {
        (Some(r), Some(o)) if o > 0.0 => {
            let x = r / o;
            if x >= 10.0 {
                format!("{x:.0}×")
            } else {
                format!("{x:.1}×")
            }
        }
        _ => "–".into(),
    }
}

struct Figure {
    name: &'static str,
    show: fn(&SpeedRow) -> String,
    value: fn(&SpeedRow) -> Option<f64>,
}

fn figures() -> Vec<Figure> {
    vec![
        Figure { name: "cold index, wall (cpu)", show: |r| cell(&r.cold, wall_cpu), value: |r| r.cold.as_ref().ok().map(|c| c.wall_s) },
        Figure {
            name: "cold index peak memory",
            show: |r| cell(&r.cold, |c| format!("{:.0} MB", c.peak_mb)),
            value: |r| r.cold.as_ref().ok().map(|c| c.peak_mb),
        },
        Figure { name: "no-change re-index", show: |r| cell(&r.noop, wall_cpu), value: |r| r.noop.as_ref().ok().map(|c| c.wall_s) },
        Figure { name: "re-index after touching 1%", show: |r| cell(&r.touched, wall_cpu), value: |r| r.touched.as_ref().ok().map(|c| c.wall_s) },
        Figure {
            name: "whole-process search (median)",
            show: |r| cell(&r.cli_search, wall_cpu),
            value: |r| r.cli_search.as_ref().ok().map(|c| c.wall_s),
        },
        Figure {
            name: "in-process search p50",
            show: |r| cell(&r.inproc_p50_ms, |ms| time(ms / 1e3)),
            value: |r| r.inproc_p50_ms.as_ref().ok().copied(),
        },
        Figure {
            name: "in-process search p99",
            show: |r| cell(&r.inproc_p99_ms, |ms| time(ms / 1e3)),
            value: |r| r.inproc_p99_ms.as_ref().ok().copied(),
        },
        Figure { name: "index size on disk", show: |r| cell(&r.index_mb, |mb| format!("{mb:.1} MB")), value: |r| r.index_mb.as_ref().ok().copied() },
    ]
}

fn find<'a>(rows: &'a [&SpeedRow], engine: &str, mode: &str) -> Option<&'a SpeedRow> {
    rows.iter().copied().find(|r| r.engine == engine && r.mode == mode)
}

pub fn markdown(res: &Results, charts: &[(String, String)]) -> String {
    let mut md = String::new();
    let m = &res.machine;
    let _ = writeln!(md, "# Benchmarks: memory-rs beside OpenClaw and QMD\n");
    let _ = writeln!(
        md,
        "Produced by `memory-bench compare` (crates/bench) on {}; every figure below, for every tool, comes from that one \
         run on one machine, tools run back to back on the same files. Regenerate with the command under \
         [Reproduce](#reproduce).\n",
        res.date
    );
    let _ = writeln!(md, "- Machine: {} cores ({}), {:.1} GB RAM, {}", m.cores, m.cpu, m.memory_gb, m.os);
    let _ = writeln!(
        md,
        "- Load average (1/5/15 min) at start: {}, at end: {}. Wall times carry the machine's noise; CPU time (user \
         + system of the process and its children) is shown beside them.",
        m.load_start, m.load_end
    );
    for (tool, v) in &res.versions {
        let _ = writeln!(md, "- {tool}: {v}");
    }
    let _ = writeln!(md, "- Each step of a reference tool had a deadline of {:.0} min; a step that missed it says so.\n", res.timeout_min);

    // Headline: the smallest corpus every tool finished, and the largest.
    let mut sizes: Vec<usize> = res.speed.iter().map(|r| r.notes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let _ = writeln!(md, "## Headline\n");
    let _ = writeln!(md, "How many times faster (or smaller) memory-rs keyword search is than each reference tool in keyword mode:\n");
    let _ = writeln!(md, "| notes | figure | vs OpenClaw | vs QMD |\n|---:|---|---:|---:|");
    for &n in &sizes {
        let rows: Vec<&SpeedRow> = res.speed.iter().filter(|r| r.notes == n).collect();
        let Some(ours) = find(&rows, "memory-rs", "keyword") else { continue };
        let oc = find(&rows, "OpenClaw", "keyword");
        let qmd = find(&rows, "QMD", "keyword");
        if oc.is_none() && qmd.is_none() {
            continue;
        }
        for f in figures().iter().filter(|f| {
            matches!(f.name, "cold index, wall (cpu)" | "no-change re-index" | "whole-process search (median)" | "cold index peak memory")
        }) {
            let _ = writeln!(
                md,
                "| {n} | {} | {} | {} |",
                f.name.trim_end_matches(", wall (cpu)"),
                ratio(oc.and_then(f.value), (f.value)(ours)),
                ratio(qmd.and_then(f.value), (f.value)(ours))
            );
        }
        // The same searches with the shared server running: each is still its own `memory search` process.
        if let Some(served) = find(&rows, "memory-rs", "keyword, server") {
            let f = figures().into_iter().find(|f| f.name == "whole-process search (median)").expect("a figure of that name");
            let _ = writeln!(
                md,
                "| {n} | whole-process search, `memory server` running | {} | {} |",
                ratio(oc.and_then(f.value), (f.value)(served)),
                ratio(qmd.and_then(f.value), (f.value)(served))
            );
        }
    }
    let _ = writeln!(md);

    let _ = writeln!(md, "## Speed\n");
    let _ = writeln!(
        md,
        "Corpora: seeded generated daily notes of ~2 KB (`memory/YYYY-MM-DD.md` plus a MEMORY.md; seed 42), about two \
         chunks per note. Keyword mode: memory-rs `memory` binary with `provider: \"none\"`, QMD `qmd search` (BM25), \
         OpenClaw with `{{\"memory\":{{\"search\":{{\"provider\":\"none\"}}}}}}`. Hybrid mode (memory-rs only, see \
         [Limits](#limits-and-honest-notes)) uses a seeded feature-hashing embedder of the real model's width (384) so \
         that latency at 100k chunks can be measured; its quality is not a model's.\n"
    );
    let _ = writeln!(
        md,
        "- whole-process search: one process per query, as a shell or an agent's tool call runs it (median; the \
         count is in the row). In-process search: one process opens the engine and answers many queries; each \
         call is timed (memory-rs: `memory-bench harness`; OpenClaw: its own memory search manager driven by \
         scripts/bench/openclaw-search.mjs; QMD's CLI has no such entry point).\n\
         - memory-rs keyword, server: the keyword column's commands run again, with `memory server start` run \
         before the whole-process searches; each search is still a process of its own, answered by the shared \
         server.\n\
         - ratio columns: the reference tool's figure divided by memory-rs keyword's (higher is better for memory-rs).\n"
    );
    for &n in &sizes {
        let rows: Vec<&SpeedRow> = res.speed.iter().filter(|r| r.notes == n).collect();
        let chunks = rows.iter().find_map(|r| r.chunks);
        let _ = writeln!(md, "### {n} notes{}\n", chunks.map(|c| format!(" ({c} chunks)")).unwrap_or_default());
        let cols: Vec<(&str, &str)> =
            [("memory-rs", "keyword"), ("memory-rs", "keyword, server"), ("memory-rs", "hybrid"), ("QMD", "keyword"), ("OpenClaw", "keyword")]
                .into_iter()
                .filter(|(e, mo)| find(&rows, e, mo).is_some())
                .collect();
        let ours = find(&rows, "memory-rs", "keyword");
        let has_oc = find(&rows, "OpenClaw", "keyword").is_some();
        let has_qmd = find(&rows, "QMD", "keyword").is_some();
        let mut header = String::from("| figure |");
        let mut sep = String::from("|---|");
        for (e, mo) in &cols {
            let _ = write!(header, " {e} {mo} |");
            sep.push_str("---:|");
        }
        if has_oc && ours.is_some() {
            header.push_str(" OpenClaw / memory-rs |");
            sep.push_str("---:|");
        }
        if has_qmd && ours.is_some() {
            header.push_str(" QMD / memory-rs |");
            sep.push_str("---:|");
        }
        let _ = writeln!(md, "{header}\n{sep}");
        for f in figures() {
            let mut line = format!("| {} |", f.name);
            for (e, mo) in &cols {
                let r = find(&rows, e, mo).expect("column has a row");
                let mut v = (f.show)(r);
                if f.name.starts_with("whole-process") && r.cli_searches > 0 {
                    v.push_str(&format!(" ×{}", r.cli_searches));
                }
                let _ = write!(line, " {v} |");
            }
            if let Some(o) = ours {
                if has_oc {
                    let _ = write!(line, " {} |", ratio(find(&rows, "OpenClaw", "keyword").and_then(f.value), (f.value)(o)));
                }
                if has_qmd {
                    let _ = write!(line, " {} |", ratio(find(&rows, "QMD", "keyword").and_then(f.value), (f.value)(o)));
                }
            }
            let _ = writeln!(md, "{line}");
        }
        let _ = writeln!(md);
    }

    if !res.quality.is_empty() {
        let _ = writeln!(md, "## Quality: Cranfield dev\n");
        let _ = writeln!(
            md,
            "1400 aeronautics abstracts as `memory/cranfield/<id>.md`, 113 natural-language dev questions with graded \
             judgments (../shared/datasets/cranfield). 100 results per query, documents ranked by their best chunk. \
             nDCG@10 uses gain 2^grade − 1; MAP@100 and Recall@100 count grade > 0 as relevant.\n"
        );
        let _ = writeln!(md, "| engine | mode | nDCG@10 | MAP@100 | Recall@100 | notes |\n|---|---|---:|---:|---:|---|");
        for q in &res.quality {
            match &q.scores {
                Ok(s) => {
                    let _ = writeln!(md, "| {} | {} | {:.4} | {:.4} | {:.4} | {} |", q.engine, q.mode, s.ndcg10, s.map100, s.recall100, q.note);
                }
                Err(e) => {
                    let _ = writeln!(md, "| {} | {} | – | – | – | _{e}_ |", q.engine, q.mode);
                }
            }
        }
        let _ = writeln!(md);
    }

    if !charts.is_empty() {
        let _ = writeln!(md, "## Charts\n");
        for (title, file) in charts {
            let _ = writeln!(md, "![{title}](bench/{file})\n");
        }
    }

    let _ = writeln!(md, "## Limits and honest notes\n");
    // The builtin engine's hybrid latency near 100k chunks, against the 20 ms target.
    let hybrid: Vec<&SpeedRow> = res.speed.iter().filter(|r| r.engine == "memory-rs" && r.mode == "hybrid").collect();
    for r in &hybrid {
        if let (Some(c), Ok(p50), Ok(p99)) = (r.chunks, &r.inproc_p50_ms, &r.inproc_p99_ms) {
            let verdict = if *p50 <= 20.0 { "within" } else { "over" };
            let _ = writeln!(
                md,
                "- builtin hybrid at {c} chunks ({} notes): in-process p50 {}, p99 {} ({verdict} the 20 ms p50 target).",
                r.notes,
                time(p50 / 1e3),
                time(p99 / 1e3)
            );
        }
    }
    md.push_str(LIMITS);
    let _ = writeln!(md, "\n## Reproduce\n");
    let _ = writeln!(md, "```sh\n{}\n```\n", res.command);
    md.push_str(REPRODUCE);
    md
}

const LIMITS: &str = "\
- The builtin engine's vector search scans an in-memory int8 copy of every chunk's vector and re-scores the best \
  candidates exactly (recall@10 against sqlite-vec's exact scan: 1.0 in `memory-bench scale`): its cost grows \
  linearly with the number of chunks. A process's first vector search is answered by sqlite-vec's exact scan and \
  the copy built by its second (since 78754de; before, a one-shot hybrid search built the copy first). For \
  millions of chunks use the LanceDB engine (`memory.backend: \"lancedb\"`, an ANN index), which this run does not \
  time (its release build takes 30-50 min here).
- memory-rs's whole-process search includes its freshness check (a stat of every memory file, about 2 µs a file: \
  most of its time at 200,000 notes), so a note written a moment ago is found; `qmd search` answers from its \
  index as the last `qmd update` left it.
- Hybrid speed figures use the seeded embedder: they measure storage, vector search and the merge, not a model. \
  With the local CPU model, embedding costs ~0.15 s per chunk on this machine (a one-off at index time, cached by \
  chunk hash) and one short query embedding per search. Hybrid *quality* on Cranfield uses the real local model.
- QMD and OpenClaw are timed in keyword mode only: their vector modes need models or API keys that cannot be \
  fetched on this machine (QMD's GGUF models come from Hugging Face; OpenClaw's local provider downloads one too).
- QMD's in-process latency is not measured: its CLI starts a process per query (its MCP server mode is not driven).
- OpenClaw's in-process figure drives its own memory search manager (the code its `memory search` command runs), \
  found by name in its bundle; the first 10 queries warm it up and are not counted.
- Re-index after touching 1%: every 100th note gets a line appended (a real content change), then each tool's \
  incremental index command runs once.
- Index size is the tool's whole state folder (OpenClaw: its state folder, which also holds its agent database; \
  QMD: its cache folder with index.sqlite; memory-rs: its state folder).
";

const REPRODUCE: &str = "\
Setup (once; idempotent): `bash scripts/setup.sh` (QMD, the local model) and `bash scripts/bench/setup-openclaw.sh` \
(Node 24 and OpenClaw from the npm registry into ~/.cache/memory-rs/bench). Then build and run:

```sh
cargo build --release -p memory-cli -p bench
target/release/memory-bench compare --out docs
```

`scripts/bench/run.sh` does all three. Expect 20 minutes (a quiet 2-core machine) to an hour (a busy one), most of it OpenClaw and QMD at \
20k and 200k notes (each step is cut at the deadline, `--timeout-min`). Quicker: `--sizes 2000 --hybrid-sizes 2000`. \
Your own notes: `--user-folder ~/agent` (a workspace with MEMORY.md and memory/; its Markdown files are copied \
into the run's temporary folder first, so your files are never written to).
";
