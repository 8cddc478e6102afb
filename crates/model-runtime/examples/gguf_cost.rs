//! What a GGUF embedding model costs here, side by side with llama.cpp on the same file and thread count:
//! query embedding p50 (distinct short queries with the model's query prompt) and indexing throughput (chunks of
//! 400 tokens per second), with the model's own prompts (any architecture the runtime runs). llama.cpp is timed
//! by its own `llama-bench` (`-embd 1`, prompt lengths equal to ours).
//! Usage: gguf_cost MODEL.gguf [LLAMA_BENCH] (threads: RAYON_NUM_THREADS, else every core; llama-bench gets the same)
use std::path::Path;
use std::time::Instant;

use model_runtime::{GgufEncoder, GgufModelInfo, ModelOptions};

const WORDS: &[&str] = &[
    "gateway",
    "office",
    "backup",
    "night",
    "server",
    "memory",
    "search",
    "index",
    "model",
    "note",
    "meeting",
    "design",
    "team",
    "Friday",
    "deploy",
    "release",
    "invoice",
    "travel",
    "Tokyo",
    "Hangzhou",
    "router",
    "database",
    "migration",
    "cache",
    "vector",
    "keyword",
    "user",
    "project",
    "deadline",
    "review",
    "budget",
    "schedule",
    "coffee",
    "cat",
    "morning",
    "alert",
    "error",
    "rate",
    "log",
    "retention",
];

fn words(seed: &mut u64, n: usize) -> String {
    (0..n)
        .map(|_| {
            *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            WORDS[(*seed >> 33) as usize % WORDS.len()]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = args.get(1).expect("usage: gguf_cost MODEL.gguf [LLAMA_BENCH]");
    let threads = rayon::current_num_threads();
    let (info, _) = GgufModelInfo::inspect(Path::new(model), &ModelOptions::default()).expect("open model");
    let (query_prompt, document_prompt) = (info.prompts.query.clone(), info.prompts.document.clone());
    // As the provider embeds: the purpose's prompt in front of each text.
    let t = Instant::now();
    let encoder = GgufEncoder::load(&info).expect("load");
    let embed = |texts: &[String], prompt: &str| {
        let prompted: Vec<String> = texts.iter().map(|t| format!("{prompt}{t}")).collect();
        encoder.embed(&info, &prompted).expect("embed")
    };
    embed(&["warm up".to_string()], &query_prompt);
    eprintln!("load + first query: {:.0} ms", t.elapsed().as_secs_f64() * 1000.0);
    let mut seed = 42u64;
    // Queries: 8 words after the prompt (17 tokens with BOS and EOS for EmbeddingGemma, 14 for nomic).
    let queries: Vec<String> = (0..31).map(|_| words(&mut seed, 8)).collect();
    let query_tokens = encoder.tokens(&format!("{query_prompt}{}", queries[0])).len();
    let mut times: Vec<f64> = queries
        .iter()
        .map(|q| {
            let t = Instant::now();
            embed(std::slice::from_ref(q), &query_prompt);
            t.elapsed().as_secs_f64() * 1000.0
        })
        .collect();
    times.sort_by(f64::total_cmp);
    let p50 = times[times.len() / 2];
    // Chunks of 400 tokens (prompt included).
    let mut chunks = Vec::new();
    for _ in 0..8 {
        let mut n = 380;
        loop {
            let text = words(&mut seed.clone(), n);
            let len = encoder.tokens(&format!("{document_prompt}{text}")).len();
            if len >= 400 || n > 2000 {
                chunks.push(text);
                break;
            }
            n += 400 - len;
        }
        words(&mut seed, 50);
    }
    let t = Instant::now();
    embed(&chunks, &document_prompt);
    let chunks_per_s = chunks.len() as f64 / t.elapsed().as_secs_f64();
    println!("{} ({}), threads {threads}, query of {query_tokens} tokens, chunks of 400 tokens", info.name, info.architecture);
    println!("memory-rs  query p50 {p50:.1} ms   indexing {chunks_per_s:.2} chunks/s");
    if let Some(bench) = args.get(2) {
        let out = std::process::Command::new(bench)
            .args(["-m", model, "-n", "0", "-embd", "1", "-r", "5", "-o", "json", "-t", &threads.to_string(), "-p"])
            .arg(format!("{query_tokens},400"))
            .stderr(std::process::Stdio::null())
            .output()
            .expect("run llama-bench");
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("llama-bench json");
        let ms = |n: u64| {
            rows.as_array().expect("rows").iter().find(|r| r["n_prompt"] == n).map(|r| r["avg_ns"].as_f64().expect("avg_ns") / 1e6).expect("row")
        };
        let (q, c) = (ms(query_tokens as u64), ms(400));
        println!("llama.cpp  query p50 {q:.1} ms (mean of 5)   indexing {:.2} chunks/s", 1000.0 / c);
        println!("ratio (llama.cpp time / ours): query {:.2}, indexing {:.2}", q / p50, chunks_per_s * c / 1000.0);
    }
}
