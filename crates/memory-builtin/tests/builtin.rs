//! Every builtin-engine integration test in one binary: one link of the engine and its SQLite instead of five,
//! which keeps the cold build short (the same layout as memory-lancedb's tests).

mod common;
mod engine;
mod fast_paths;
mod generated;
mod hostile;
mod recall;
mod sessions;
mod store_contract;
mod unread_language;
