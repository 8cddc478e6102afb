//! Embeds texts (one per line on stdin) with a local model (a `.gguf` file or a folder) and prints one JSON array
//! of vectors, for comparing by hand with a reference runtime (llama.cpp: scripts/lib/gguf_reference.py).
//! Usage: gguf_embed MODEL [query|document|raw] < texts.txt
use std::io::BufRead;

use providers::{EmbeddingPurpose, LocalOptions, LocalProvider};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = args.get(1).expect("usage: gguf_embed MODEL [query|document|raw] < texts");
    let mode = args.get(2).map(String::as_str).unwrap_or("raw");
    let options = match mode {
        "raw" => LocalOptions { query_prompt: Some(String::new()), document_prompt: Some(String::new()), ..Default::default() },
        _ => LocalOptions::default(),
    };
    let purpose = if mode == "query" { EmbeddingPurpose::Query } else { EmbeddingPurpose::Document };
    let p = LocalProvider::open_with(model, &options).expect("open model");
    let texts: Vec<String> = std::io::stdin().lock().lines().map(|l| l.expect("stdin")).collect();
    let started = std::time::Instant::now();
    let v = p.embed_blocking_as(&texts, purpose).expect("embed");
    eprintln!("{} texts in {:.2} s", texts.len(), started.elapsed().as_secs_f64());
    if let Some(Ok(ids)) = p.gguf_tokens(texts.first().map(String::as_str).unwrap_or("")) {
        eprintln!("tokens of the first text: {ids:?}");
    }
    println!("{}", serde_json::to_string(&v).expect("json"));
}
