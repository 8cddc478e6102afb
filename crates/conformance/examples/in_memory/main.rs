//! An out-of-tree engine passing the conformance suite.
//!
//! ```sh
//! cargo run -p memory-rs-conformance --example in_memory            # keyword-only
//! cargo run -p memory-rs-conformance --example in_memory -- hybrid  # with the deterministic lexicon embedder
//! ```
//!
//! The engine is in `engine.rs`; `docs/write-your-own-backend.md` walks through it.

mod engine;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let hybrid = std::env::args().any(|a| a == "hybrid");
    let options =
        if hybrid { conformance::RunOptions::hybrid("in-memory hybrid") } else { conformance::RunOptions::keyword("in-memory keyword-only") };
    let report = conformance::run_all(&engine::InMemoryFactory, &options).await;
    print!("{}", report.render(options.verbose));
    std::process::exit(if report.is_ok() { 0 } else { 1 });
}
