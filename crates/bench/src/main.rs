//! `memory-bench`: speed figures (index, re-index, whole-process and in-process search) on generated daily
//! notes, and retrieval quality (nDCG@10, MAP@100, Recall@100) on the Cranfield collection.

mod corpus;
mod quality;
mod speed;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "memory-bench", about = "Benchmarks and quality evaluation for the memory engines")]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// nDCG@10, MAP@100 and Recall@100 on the Cranfield dev queries.
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
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    match cli.command {
        Command::Speed { notes, memory_bin, searches, seed } => rt.block_on(speed::run(notes, memory_bin, searches, seed)),
        Command::Quality { dataset, verbose, model, keyword_only } => {
            let model = if keyword_only { None } else { model.or_else(quality::default_model) };
            rt.block_on(quality::run(&dataset, verbose, model.as_deref()))
        }
    }
}
