//! Conformance suite for agent memory engines.
//!
//! The promise of `memory.backend` is that every engine behaves the same. This crate proves it: suites of
//! fixtures (a workspace of Markdown notes plus `cases.json5`, see [`fixture`]) run against any engine through
//! its [`BackendFactory`](memory_contract::registry::BackendFactory). Cases are gated by the capabilities the
//! engine declares: a keyword-only engine skips the vector cases and the report says so; nothing is passed
//! silently. Ranking assertions compare orders and sets of paths, never raw scores.
//!
//! ```no_run
//! # async fn demo() {
//! use conformance::{run_all, RunOptions};
//! let report = run_all(&memory_builtin::BuiltinFactory, &RunOptions::keyword("builtin keyword-only")).await;
//! report.assert_ok(); // prints skips, failures (case, expected, actual ranking) and a summary
//! # }
//! ```
//!
//! - [`RunOptions::keyword`]: the engine gets no embedder. [`RunOptions::hybrid`]: it gets the deterministic
//!   [`LexiconEmbedder`] the vector cases are written for. [`RunOptions::with_embedder`]: any provider.
//! - [`run_all`] runs the shipped suites ([`fixtures_dir`]); [`run`] / [`run_suites`] run given ones, so an
//!   engine author can add suites of their own in the same format ([`Suite::load`]).
//! - `store_contract` (feature `store`): the promises of memory-core's storage traits (`ChunkStore`,
//!   `IndexStorage`) checked on a store itself; every store in this repository runs it, and a store of another
//!   crate can too. The rest of the suite depends on the contract (`memory-rs-contract`) alone.
//! - [`testing`]: temporary workspace and state folders and the `OpenContext` for engine tests;
//!   [`BagOfWordsEmbedder`]: the deterministic embedder those tests use; [`FnEmbedder`]: a test's own vectors from
//!   one function.
#![deny(missing_docs)]

pub mod check;
pub mod embedder;
pub mod fixture;
pub mod runner;
#[cfg(feature = "store")]
pub mod store_contract;
pub mod testing;

pub use embedder::{BagOfWordsEmbedder, FnEmbedder, LexiconEmbedder};
pub use fixture::{fixtures_dir, Capability, Case, Expect, Suite};
pub use runner::{run, run_all, run_suites, CaseOutcome, Outcome, Report, RunOptions};
