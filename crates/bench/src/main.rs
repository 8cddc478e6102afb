//! `memory-bench`: speed figures (index, re-index, whole-process and in-process search) on generated daily
//! notes, and retrieval quality (nDCG@10, MAP@100, Recall@100) on the Cranfield collection.

mod compare;
mod corpus;
mod freshness;
mod harness;
mod legs;
mod locomo;
mod mcp;
mod model_oneshot;
mod multilingual;
mod quality;
mod scale;
mod seeded_embedder;
mod server;
mod speed;
mod time_set;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "memory-bench", about = "Benchmarks and quality evaluation for the memory engines")]
struct Cli {
    /// Ranking settings for `quality`, `locomo` and `multilingual`: `default` (this engine's: recency decay and
    /// MMR off) or `openclaw-2026.9` (OpenClaw 2026.9's hybrid defaults: decay with a 30-day half-life and MMR at
    /// lambda 0.7, both on). Other commands refuse a non-default profile.
    #[arg(long, global = true, default_value = "default", value_parser = ["default", "openclaw-2026.9"])]
    ranking: String,
    #[command(subcommand)]
    command: Command,
}

/// The ranking profile chosen by `--ranking` (set once in `main`).
pub static RANKING_PROFILE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Apply the `--ranking` profile to a config built by a quality command.
pub fn apply_ranking_profile(config: &mut memory_core::Config) {
    if RANKING_PROFILE.get().map(String::as_str) == Some("openclaw-2026.9") {
        let h = &mut config.memory.search.query.hybrid;
        h.temporal_decay.enabled = true;
        h.temporal_decay.half_life_days = 30.0;
        h.mmr.enabled = true;
        h.mmr.lambda = 0.7;
    }
}

/// The rerankers `quality` and `locomo` compare, read alike by both.
#[derive(clap::Args)]
struct RerankArgs {
    /// A reranker folder, a cross-encoder or a late-interaction model (repeat for several): each run is repeated
    /// reranked by each, at each `--rerank-candidates`.
    #[arg(long)]
    reranker: Vec<PathBuf>,
    /// Candidates reranked, one run per value (`10,20`).
    #[arg(long, value_delimiter = ',', default_value = "10")]
    rerank_candidates: Vec<usize>,
    #[arg(long, default_value_t = 0.5)]
    rerank_weight: f64,
}

#[derive(Subcommand)]
enum Command {
    /// Index and search N generated daily notes of ~2 KB; prints timings and peak memory.
    Speed {
        #[arg(long, default_value_t = 2000)]
        notes: usize,
        /// The `memory` binary to time (default: the one beside this program).
        #[arg(long)]
        memory_bin: Option<PathBuf>,
        /// In-process searches to time.
        #[arg(long, default_value_t = 2000)]
        searches: usize,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// What the freshness check before each search costs: one-shot search with and without it, after a change,
    /// and through `memory serve` right after a write.
    Freshness {
        #[arg(long, value_delimiter = ',', default_value = "2000,20000")]
        notes: Vec<usize>,
        #[arg(long, default_value_t = 21)]
        runs: usize,
        #[arg(long)]
        memory_bin: Option<PathBuf>,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// The shared server (issue 35): one-shot `memory search` with and without `memory server start`, a search
    /// right after a write, and concurrent CLI and HTTP MCP clients while one appends (wrong answers, errors,
    /// servers' peak RSS).
    Server(server::Options),
    /// The builtin engine at 10k-400k chunks (issue 22): keyword (mixed and common-word queries) and hybrid
    /// latency, vector recall@10 against the exact scan, whole-process search; side by side with another
    /// build (`--old DIR` holding its `memory` and `memory-bench`) on the same index files.
    Scale(scale::Options),
    /// nDCG@10, MAP@100 and Recall@100 on the Cranfield dev queries; with `--reranker`, hybrid search (keyword
    /// search without a model) reranked too.
    Quality {
        /// Folder with docs.jsonl, queries-dev.jsonl, qrels-dev.tsv.
        #[arg(long, default_value = "../shared/datasets/cranfield")]
        dataset: PathBuf,
        /// Print per-query figures.
        #[arg(long)]
        verbose: bool,
        /// Also evaluate vector-only and hybrid search with the local embedding model in this folder
        /// (default: $MEMORY_TEST_MODEL, else ~/.cache/memory-rs/models/all-MiniLM-L6-v2, when present).
        #[arg(long)]
        model: Option<PathBuf>,
        /// Keyword-only, even when a model is available.
        #[arg(long)]
        keyword_only: bool,
        #[command(flatten)]
        rerank: RerankArgs,
    },
    /// Long-conversation recall (LoCoMo layout): R@k and S@k for k = 1, 5, 10 per category, keyword and, per
    /// model, vector-only and hybrid, with search latency; with `--reranker`, each setup reranked too
    /// (`memory.search.query.rerank`).
    Locomo {
        /// Folder with questions.jsonl and conv-*/ws/.
        #[arg(long, default_value = "../shared/datasets/locomo-dev")]
        dataset: PathBuf,
        /// Model folders for vector and hybrid (default: the test model when present).
        #[arg(long = "model")]
        models: Vec<PathBuf>,
        /// Keyword only.
        #[arg(long)]
        keyword_only: bool,
        /// Only these modes: keyword, vector, hybrid.
        #[arg(long, value_delimiter = ',')]
        modes: Vec<String>,
        /// Print each question whose evidence is not read at k = 5.
        #[arg(long)]
        misses: bool,
        /// Keep indexes here: later runs reuse the embeddings.
        #[arg(long)]
        keep: Option<PathBuf>,
        /// Write each setup's answers here (`<setup>.jsonl`: per question its hits and, reranked, the reranker's
        /// logits in first-stage order), to study ranking rules offline.
        #[arg(long)]
        dump: Option<PathBuf>,
        /// How many hits each search asks for (`maxResults`; figures are of the first ten): deeper dumps show
        /// what a second stage over more candidates could reach.
        #[arg(long, default_value_t = 10)]
        depth: usize,
        #[command(flatten)]
        rerank: RerankArgs,
        #[arg(long, default_value_t = 60_000)]
        rerank_budget_ms: u64,
        /// Also run keyword search through `memory serve` (MCP over stdio, as an agent's client calls it).
        #[arg(long)]
        served: bool,
        /// The `memory` binary `--served` runs (default: the one beside this program).
        #[arg(long)]
        memory_bin: Option<PathBuf>,
        /// Also run the QMD engine (`backend: "qmd"`, its default `search` mode) with this `qmd` command, and with
        /// `--reranker` QMD's hits reranked too.
        #[arg(long)]
        qmd: Option<PathBuf>,
    },
    /// What reranking n candidates costs (p50 / p95 over runs), for each n.
    RerankCost {
        #[arg(long, default_value = "../shared/datasets/locomo-dev")]
        dataset: PathBuf,
        /// The reranker's folder, a cross-encoder or a late-interaction model (default:
        /// ~/.cache/memory-rs/models/ms-marco-MiniLM-L-12-v2).
        #[arg(long)]
        reranker: Option<PathBuf>,
        #[arg(long, value_delimiter = ',', default_value = "10,20,40")]
        pairs: Vec<usize>,
        #[arg(long, default_value_t = 11)]
        runs: usize,
    },
    /// What choosing the snippet of a result costs (ten chunk-sized hits per LoCoMo question).
    SnippetCost {
        #[arg(long, default_value = "../shared/datasets/locomo-dev")]
        dataset: PathBuf,
        #[arg(long, default_value_t = 5)]
        rounds: usize,
    },
    /// Questions that say when ("last week", "in March", "上周", "三天前"): a generated year of daily logs where only
    /// the time a question names tells which of five logs holds its answer; the share answered first, English and
    /// Chinese, keyword search and (with --model) hybrid.
    Time {
        /// A model for a hybrid run besides the keyword one (a folder or a GGUF file).
        #[arg(long)]
        model: Option<PathBuf>,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// List the questions not answered first.
        #[arg(long)]
        verbose: bool,
        /// Keep the workspace and indexes here (replaced each run).
        #[arg(long)]
        keep: Option<PathBuf>,
    },
    /// Bilingual (Chinese / English) quality per question kind: keyword, hybrid with all-MiniLM-L6-v2, hybrid with
    /// multilingual-e5-small; then Cranfield in the same run.
    Multilingual {
        /// The bilingual set (notes and questions, JSON).
        #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/data/bilingual-dev.json"))]
        dataset: PathBuf,
        /// The English model (default: $MEMORY_TEST_MODEL, else ~/.cache/memory-rs/models/all-MiniLM-L6-v2).
        #[arg(long)]
        model: Option<PathBuf>,
        /// A multilingual model (a folder or a GGUF file; repeat for several, each measured by its vectors alone
        /// and in hybrid; default: $MEMORY_TEST_MULTILINGUAL_MODEL, else
        /// ~/.cache/memory-rs/models/multilingual-e5-small).
        #[arg(long)]
        multilingual_model: Vec<PathBuf>,
        /// Cranfield, evaluated in the same run.
        #[arg(long, default_value = "../shared/datasets/cranfield")]
        cranfield: PathBuf,
        #[arg(long)]
        no_cranfield: bool,
        /// Per-question ranks.
        #[arg(long)]
        verbose: bool,
        /// Keep workspaces and indexes here: later runs reuse the embeddings (a ranking change re-embeds nothing).
        #[arg(long)]
        keep: Option<PathBuf>,
    },
    /// One-shot `memory search` with the local model on N generated notes, whole process, for one or more
    /// `memory` binaries side by side; prints the indexing throughput (chunks/s) too.
    ModelOneshot {
        #[arg(long, default_value_t = 2000)]
        notes: usize,
        /// Bytes per note (2048 like `speed`; smaller notes embed faster and search the same).
        #[arg(long, default_value_t = 2048)]
        note_bytes: usize,
        #[arg(long, default_value_t = 21)]
        runs: usize,
        /// The model folder (default: $MEMORY_TEST_MODEL, else ~/.cache/memory-rs/models/all-MiniLM-L6-v2).
        #[arg(long)]
        model: Option<PathBuf>,
        /// `memory` binaries to time (default: the one beside this program); the first builds the index.
        #[arg(long = "memory-bin")]
        memory_bins: Vec<PathBuf>,
        /// Keep the workspace and index here (re-runs skip the embedding).
        #[arg(long)]
        keep: Option<PathBuf>,
        #[arg(long, default_value_t = 42)]
        seed: u64,
    },
    /// memory-rs, QMD and OpenClaw side by side on generated notes and Cranfield; writes compare.md,
    /// results.json and PNG charts under --out.
    Compare {
        /// Corpus sizes (notes) for every engine in keyword mode.
        #[arg(long, value_delimiter = ',', default_value = "2000,20000,200000")]
        sizes: Vec<usize>,
        /// Corpus sizes for memory-rs hybrid (seeded embedder); 50000 notes is ~100k chunks.
        #[arg(long, value_delimiter = ',', default_value = "2000,20000,50000")]
        hybrid_sizes: Vec<usize>,
        /// Which tools: memory, qmd, openclaw.
        #[arg(long, value_delimiter = ',', default_value = "memory,qmd,openclaw")]
        tools: Vec<String>,
        /// Deadline per step of each tool, in minutes.
        #[arg(long, default_value_t = 10.0)]
        timeout_min: f64,
        /// Skip the Cranfield quality part.
        #[arg(long)]
        no_quality: bool,
        #[arg(long, default_value = "../shared/datasets/cranfield")]
        dataset: PathBuf,
        /// Local embedding model folder for memory-rs hybrid quality (default: the test model when present).
        #[arg(long)]
        model: Option<PathBuf>,
        /// The `memory` binary (default: the one beside this program).
        #[arg(long)]
        memory_bin: Option<PathBuf>,
        /// Output folder: writes compare.md and bench/{results.json,*.png}.
        #[arg(long, default_value = "docs")]
        out: PathBuf,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Also time a workspace of your own (MEMORY.md + memory/); it is copied first, never modified.
        #[arg(long)]
        user_folder: Option<PathBuf>,
        /// Only re-render compare.md and the charts from this results.json.
        #[arg(long)]
        rerender: Option<PathBuf>,
    },
    /// memory-rs's builtin engine in this process (used by `compare`).
    #[command(hide = true)]
    Harness {
        #[arg(long, value_enum)]
        mode: harness::Mode,
        #[arg(long)]
        workspace: PathBuf,
        #[arg(long)]
        state_dir: PathBuf,
        #[command(subcommand)]
        action: harness::Action,
    },
    /// Print the generated query sets `scale` uses, one a line (to profile a harness with them).
    #[command(hide = true)]
    Queries {
        #[arg(long, default_value_t = 200)]
        n: usize,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// The common-word set instead of the mixed one.
        #[arg(long)]
        common: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The engine's logs, on stderr, only when RUST_LOG asks for them: the tables stay as they are.
    if let Ok(filter) = tracing_subscriber::EnvFilter::try_from_default_env() {
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    }
    if cli.ranking != "default" && !matches!(cli.command, Command::Quality { .. } | Command::Locomo { .. } | Command::Multilingual { .. }) {
        anyhow::bail!("--ranking applies to quality, locomo and multilingual only");
    }
    RANKING_PROFILE.set(cli.ranking.clone()).expect("set once");
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match cli.command {
        Command::Speed { notes, memory_bin, searches, seed } => rt.block_on(speed::run(notes, memory_bin, searches, seed)),
        Command::Scale(options) => rt.block_on(scale::run(options)),
        Command::Freshness { notes, runs, memory_bin, seed } => freshness::run(&notes, runs, memory_bin, seed),
        Command::Server(options) => server::run(options),
        Command::Quality { dataset, verbose, model, keyword_only, rerank: RerankArgs { reranker, rerank_candidates, rerank_weight } } => {
            let model = if keyword_only { None } else { model.or_else(quality::default_model) };
            let rerank: Vec<quality::RerankSetup> = reranker
                .iter()
                .flat_map(|dir| {
                    rerank_candidates.iter().map(|&candidates| quality::RerankSetup { dir: dir.clone(), candidates, weight: rerank_weight })
                })
                .collect();
            rt.block_on(quality::run(&dataset, verbose, model.as_deref(), &rerank))
        }
        Command::Locomo {
            dataset,
            models,
            keyword_only,
            modes,
            misses,
            keep,
            dump,
            depth,
            rerank: RerankArgs { reranker, rerank_candidates, rerank_weight },
            rerank_budget_ms,
            served,
            memory_bin,
            qmd,
        } => {
            let served = match (served, memory_bin) {
                (false, _) => None,
                (true, Some(bin)) => Some(bin),
                (true, None) => Some(std::env::current_exe()?.with_file_name("memory")),
            };
            let models = if keyword_only {
                Vec::new()
            } else if models.is_empty() {
                quality::default_model().into_iter().collect()
            } else {
                models
            };
            rt.block_on(locomo::run(locomo::Options {
                dataset,
                models,
                misses,
                keep,
                dump,
                depth: depth.max(10),
                modes,
                rerankers: reranker,
                rerank_candidates,
                rerank_weight,
                rerank_budget_ms,
                served,
                qmd,
            }))
        }
        Command::RerankCost { dataset, reranker, pairs, runs } => {
            let reranker = reranker
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/memory-rs/models/ms-marco-MiniLM-L-12-v2")))
                .ok_or_else(|| anyhow::anyhow!("pass --reranker"))?;
            locomo::rerank_cost(&dataset, &reranker, &pairs, runs)
        }
        Command::SnippetCost { dataset, rounds } => locomo::snippet_cost(&dataset, rounds),
        Command::ModelOneshot { notes, note_bytes, runs, model, memory_bins, keep, seed } => {
            let model = model.or_else(quality::default_model).ok_or_else(|| anyhow::anyhow!("no local model: pass --model"))?;
            let bins = if memory_bins.is_empty() { vec![std::env::current_exe()?.with_file_name("memory")] } else { memory_bins };
            model_oneshot::run(model_oneshot::Options { notes, note_bytes, runs, model, bins, keep, seed })
        }
        Command::Time { model, seed, verbose, keep } => rt.block_on(time_set::run(model.as_deref(), seed, verbose, keep.as_deref())),
        Command::Multilingual { dataset, model, multilingual_model, cranfield, no_cranfield, verbose, keep } => {
            let model = model.or_else(quality::default_model);
            let multilingual =
                if multilingual_model.is_empty() { multilingual::default_multilingual_model().into_iter().collect() } else { multilingual_model };
            let cranfield = (!no_cranfield).then_some(cranfield);
            rt.block_on(multilingual::run(&dataset, model.as_deref(), &multilingual, cranfield.as_deref(), verbose, keep.as_deref()))
        }
        Command::Compare { sizes, hybrid_sizes, tools, timeout_min, no_quality, dataset, model, memory_bin, out, seed, user_folder, rerender } => {
            if let Some(results) = rerender {
                return compare::rerender(&results, &out);
            }
            let command_line = std::iter::once("memory-bench".to_string()).chain(std::env::args().skip(1)).collect::<Vec<_>>().join(" ");
            let opts = compare::Options {
                sizes,
                hybrid_sizes,
                tools,
                timeout: std::time::Duration::from_secs_f64(timeout_min * 60.0),
                quality: !no_quality,
                dataset,
                model: model.or_else(quality::default_model),
                memory_bin,
                out,
                seed,
                user_folder,
            };
            rt.block_on(compare::run(opts, command_line))
        }
        Command::Harness { mode, workspace, state_dir, action } => rt.block_on(harness::run(mode, &workspace, &state_dir, action)),
        Command::Queries { n, seed, common } => {
            let set = if common { corpus::common_queries(n, seed) } else { corpus::queries(n, seed) };
            set.iter().for_each(|q| println!("{q}"));
            Ok(())
        }
    }
}
