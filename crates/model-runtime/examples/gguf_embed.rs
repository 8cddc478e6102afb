//! Embeds texts (one per line on stdin) with a local model (a `.gguf` file or a folder) and prints one JSON array
//! of vectors, for comparing by hand with a reference runtime (llama.cpp: scripts/lib/gguf_reference.py).
//! Usage: gguf_embed MODEL [query|document|raw] < texts.txt
use std::io::BufRead;
use std::path::Path;

use model_runtime::{is_gguf, FolderEncoder, FolderModelInfo, GgufEncoder, GgufModelInfo, ModelOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model = Path::new(args.get(1).expect("usage: gguf_embed MODEL [query|document|raw] < texts"));
    let mode = args.get(2).map(String::as_str).unwrap_or("raw");
    let options = match mode {
        "raw" => ModelOptions { query_prompt: Some(String::new()), document_prompt: Some(String::new()), ..Default::default() },
        _ => ModelOptions::default(),
    };
    let texts: Vec<String> = std::io::stdin().lock().lines().map(|l| l.expect("stdin")).collect();
    let prompted = |prompts: &model_runtime::Prompts| -> Vec<String> {
        let prompt = if mode == "query" { &prompts.query } else { &prompts.document };
        texts.iter().map(|t| format!("{prompt}{t}")).collect()
    };
    let started = std::time::Instant::now();
    let v = if is_gguf(model) {
        let (info, _) = GgufModelInfo::inspect(model, &options).expect("open model");
        let encoder = GgufEncoder::load(&info).expect("load model");
        let v = encoder.embed(&info, &prompted(&info.prompts)).expect("embed");
        eprintln!("tokens of the first text: {:?}", encoder.tokens(texts.first().map(String::as_str).unwrap_or("")));
        v
    } else {
        let info = FolderModelInfo::inspect_with(model, &options).expect("open model");
        FolderEncoder::load(&info).expect("load model").embed(&info, &prompted(&info.prompts)).expect("embed")
    };
    eprintln!("{} texts in {:.2} s", texts.len(), started.elapsed().as_secs_f64());
    println!("{}", serde_json::to_string(&v).expect("json"));
}
