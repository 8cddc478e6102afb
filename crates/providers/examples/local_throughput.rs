//! Local model embedding throughput: `cargo run -p memory-rs-providers --example local_throughput [--release] -- [N] [CHARS]`.
//! Embeds N chunks (default 200) of about CHARS characters (default 1600, the chunker's maximum) of varied
//! English text with the model in `$MEMORY_TEST_MODEL` (or `$MEMORY_LOCAL_MODEL`), and prints chunks/s.

use std::time::Instant;

use providers::{EmbeddingProvider, EmbeddingPurpose, LocalProvider};

const WORDS: &[&str] = &[
    "gateway",
    "memory",
    "index",
    "agent",
    "notes",
    "meeting",
    "deploy",
    "server",
    "backup",
    "calendar",
    "invoice",
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "was",
    "for",
    "on",
    "with",
    "project",
    "review",
    "deadline",
    "Tuesday",
    "Mac",
    "Studio",
    "office",
    "router",
    "database",
    "migration",
    "customer",
    "support",
    "ticket",
    "release",
];

fn chunk(seed: usize, chars: usize) -> String {
    let mut s = String::new();
    let mut x = seed.wrapping_mul(2654435761).wrapping_add(12345);
    while s.len() < chars {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        s.push_str(WORDS[(x >> 33) % WORDS.len()]);
        s.push(if (x >> 20).is_multiple_of(11) { '\n' } else { ' ' });
    }
    s.truncate(chars);
    s
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let chars: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(1600);
    let dir = std::env::var("MEMORY_TEST_MODEL").or_else(|_| std::env::var("MEMORY_LOCAL_MODEL")).expect("set MEMORY_TEST_MODEL to the model folder");
    let p = LocalProvider::open(&dir).expect("open model");
    let t = Instant::now();
    p.load().await.expect("load model");
    println!("model load: {:.2} s", t.elapsed().as_secs_f64());
    let texts: Vec<String> = (0..n).map(|i| chunk(i, chars)).collect();
    let t = Instant::now();
    let mut done = 0;
    for batch in texts.chunks(32) {
        done += p.embed(batch, EmbeddingPurpose::Document).await.expect("embed").len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!("embedded {done} chunks of {chars} chars in {secs:.2} s: {:.1} chunks/s", done as f64 / secs);
}
