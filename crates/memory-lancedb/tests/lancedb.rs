//! Every LanceDB integration test in one binary: each test binary links all of LanceDB (hundreds of MB in
//! debug), so one binary instead of four keeps the cold build and the disk small.

mod common;
mod concurrency;
mod local;
mod s3;
mod sessions;
mod store_contract;
