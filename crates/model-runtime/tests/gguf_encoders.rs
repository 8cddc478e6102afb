//! The runtime on BERT-family GGUF files, checked against llama.cpp on the same files (tokens and vectors of the
//! 308 texts of `data/gguf_reference_texts.txt`, even ones as queries and odd ones as documents with the model's
//! prompts; generated once by `scripts/lib/gguf_reference.py` and committed), with their cuts, prompts, pooling
//! and context length. The provider contract on the same files is `providers`' `tests/gguf_contract.rs`. Run in
//! release for speed: `cargo test --release -p memory-rs-model-runtime --test gguf_encoders`. The files:
//! - nomic-embed-text-v1.5 (`nomic-bert`) in F16 as GPT4All ships it (`scripts/setup.d/nomic.sh`), and the same
//!   weights requantized to Q8_0 (checked against the F16 file's llama.cpp vectors: its quantization costs less
//!   than the bound);
//! - all-MiniLM-L6-v2 (`bert`, mean pooling) converted to F32 and Q8_0 GGUF files
//!   (`scripts/setup.d/bert_gguf.sh`).

mod common;

use std::path::PathBuf;

use common::{agreement, cosine, int8_vectors, models_dir, texts, Folder, Gguf, Purpose};
use model_runtime::ModelOptions;

/// One model file and its llama.cpp reference.
struct Case {
    /// The file's name under the models cache (or the variable that overrides it).
    file: &'static str,
    var: &'static str,
    prompts: (&'static str, &'static str),
    dims: usize,
    tokens: &'static str,
    vectors: &'static [u8],
}

const NOMIC_F16: Case = Case {
    file: "nomic-embed-text-v1.5.f16.gguf",
    var: "MEMORY_TEST_NOMIC_GGUF",
    prompts: ("search_query: ", "search_document: "),
    dims: 768,
    tokens: include_str!("data/nomic-embed-text-v1.5-f16.tokens.json"),
    vectors: include_bytes!("data/nomic-embed-text-v1.5-f16.vectors.i8"),
};

const NOMIC_Q8: Case = Case { file: "nomic-embed-text-v1.5.Q8_0.gguf", var: "MEMORY_TEST_NOMIC_Q8_GGUF", ..NOMIC_F16 };

const BERT_F32: Case = Case {
    file: "all-MiniLM-L6-v2.F32.gguf",
    var: "MEMORY_TEST_BERT_GGUF",
    prompts: ("", ""),
    dims: 384,
    tokens: include_str!("data/all-MiniLM-L6-v2-f32.tokens.json"),
    vectors: include_bytes!("data/all-MiniLM-L6-v2-f32.vectors.i8"),
};

const BERT_Q8: Case = Case { file: "all-MiniLM-L6-v2.Q8_0.gguf", var: "MEMORY_TEST_BERT_Q8_GGUF", ..BERT_F32 };

/// The case's file, or `None` (recorded as a missing prerequisite) when the setup has not made it.
fn model(case: &Case, test: &str) -> Option<PathBuf> {
    common::model(case.var, case.file, test)
}

fn tokens_match(case: &Case, test: &str) {
    let Some(path) = model(case, test) else { return };
    let p = Gguf::open(&path).unwrap();
    let want: Vec<Vec<u32>> = serde_json::from_str(case.tokens).unwrap();
    let texts = texts();
    assert_eq!(want.len(), texts.len());
    let mut differ = Vec::new();
    for (i, (t, want)) in texts.iter().zip(&want).enumerate() {
        let prompted = format!("{}{t}", if i % 2 == 0 { case.prompts.0 } else { case.prompts.1 });
        let got = p.tokens(&prompted);
        if &got != want {
            differ.push(format!("{t:?}: {got:?} vs llama.cpp {want:?}"));
        }
    }
    eprintln!("{}: {} of {} texts tokenized as llama.cpp does", case.file, texts.len() - differ.len(), texts.len());
    assert!(differ.is_empty(), "{} of {} texts tokenized differently:\n{}", differ.len(), texts.len(), differ.join("\n"));
}

fn embeddings_match(case: &Case, test: &str) {
    let Some(path) = model(case, test) else { return };
    let p = Gguf::open(&path).unwrap();
    assert_eq!(p.info.dimensions, case.dims);
    let texts = texts();
    let a = agreement(|t, purpose| p.embed(t, purpose), &texts, &int8_vectors(case.vectors, case.dims));
    eprintln!("{}: {} texts against llama.cpp: mean cosine {:.5}, lowest {:.5} ({:?})", case.file, texts.len(), a.mean, a.lowest, texts[a.worst]);
    assert!(a.lowest >= 0.99, "cosine {} < 0.99 against llama.cpp for {:?}", a.lowest, texts[a.worst]);
}

#[test]
fn nomic_tokens_match_llama_cpp_on_the_same_file() {
    tokens_match(&NOMIC_F16, "gguf_encoders::nomic_tokens_match_llama_cpp_on_the_same_file");
}

#[test]
fn nomic_embeddings_match_llama_cpp_on_the_same_file() {
    embeddings_match(&NOMIC_F16, "gguf_encoders::nomic_embeddings_match_llama_cpp_on_the_same_file");
}

#[test]
fn nomic_q8_0_stays_within_the_bound_of_llama_cpp() {
    embeddings_match(&NOMIC_Q8, "gguf_encoders::nomic_q8_0_stays_within_the_bound_of_llama_cpp");
}

/// nomic's Matryoshka cut: a layer norm over the full vector, its first values, normalised; another identity; a
/// width the model was not trained for is refused. The prompts are nomic's unless configured.
#[test]
fn nomic_matryoshka_cuts_prompts_and_identity() {
    let Some(path) = model(&NOMIC_F16, "gguf_encoders::nomic_matryoshka_cuts_prompts_and_identity") else { return };
    let full = Gguf::open(&path).unwrap();
    let info = &full.info;
    assert_eq!(info.architecture, "nomic-bert");
    assert_eq!((info.prompts.query.as_str(), info.prompts.document.as_str()), NOMIC_F16.prompts);
    let text = vec!["The gateway runs on the Mac Studio in the office, next to the router.".to_string()];
    let a = full.embed(&text, Purpose::Document).remove(0);
    for dims in [512, 256, 128, 64] {
        let cut = Gguf::open_with(&path, &ModelOptions { dimensions: Some(dims), ..Default::default() }).unwrap();
        assert_eq!(cut.info.dimensions, dims);
        assert_ne!(cut.info.fingerprint, full.info.fingerprint);
        let b = cut.embed(&text, Purpose::Document).remove(0);
        assert_eq!(b.len(), dims);
        // The layer norm is blind to the full vector's scale: it can be redone on the unit vector.
        let mean = a.iter().sum::<f32>() / a.len() as f32;
        let var = a.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / a.len() as f32;
        let want: Vec<f32> = a[..dims].iter().map(|x| (x - mean) / var.sqrt()).collect();
        assert!(cosine(&want, &b) > 0.9999, "{dims}: {}", cosine(&want, &b));
    }
    assert_eq!(Gguf::open(&path).unwrap().info.fingerprint, full.info.fingerprint, "the same file is the same identity");
    let err = Gguf::open_with(&path, &ModelOptions { dimensions: Some(300), ..Default::default() }).err().unwrap();
    assert!(err.to_string().contains("not 300"), "{err}");

    // Configured prompts replace nomic's, and change the identity and the vectors.
    let plain = ModelOptions { query_prompt: Some(String::new()), document_prompt: Some(String::new()), ..Default::default() };
    let raw = Gguf::open_with(&path, &plain).unwrap();
    assert_ne!(raw.info.fingerprint, full.info.fingerprint);
    let r = raw.embed(&text, Purpose::Document).remove(0);
    assert!(cosine(&r, &a) < 0.999, "the document prefix changes the vector");

    // A question finds the note it is about.
    let notes = vec![text[0].clone(), "Weekly design review with the team on Friday at 3pm.".to_string()];
    let n = full.embed(&notes, Purpose::Document);
    let ask = full.embed_query("Which machine does the gateway run on?");
    assert!(cosine(&ask, &n[0]) > cosine(&ask, &n[1]) + 0.05, "{} vs {}", cosine(&ask, &n[0]), cosine(&ask, &n[1]));
}

/// Past the 2,048 positions the file was trained on, nomic-bert reads on to 8,192 tokens as nomic's model does
/// (dynamic NTK rotary scaling): what a long text says after its first 2,048 tokens reaches its vector, a long
/// text of one topic stays near that topic, and a text past 8,192 tokens is cut there with `[SEP]` kept last.
#[test]
fn nomic_reads_past_its_trained_context() {
    let Some(path) = model(&NOMIC_Q8, "gguf_encoders::nomic_reads_past_its_trained_context") else { return };
    let p = Gguf::open(&path).unwrap();
    assert_eq!(p.info.max_tokens, 8192);
    let budget: String = (0..160).map(|i| format!("Budget line {i}: the finance team approved {} euros for office rent. ", 100 + i * 7)).collect();
    let cat: String = (0..60).map(|i| format!("Night {i}: Luna the cat hunted moths in the garden until dawn. ")).collect();
    let tokens = |t: &str| p.tokens(&format!("search_document: {t}")).len();
    let (head, tail) = (tokens(&budget), tokens(&cat));
    assert!(head > 2048 && head + tail < 8192, "the budget alone fills the trained context: {head} + {tail} tokens");
    let ask = p.embed_query("What does the cat do at night?");
    let docs = p.embed(&[budget.clone(), format!("{budget}{cat}"), cat.clone()], Purpose::Document);
    let (alone, both, only_cat) = (cosine(&ask, &docs[0]), cosine(&ask, &docs[1]), cosine(&ask, &docs[2]));
    eprintln!("{head} + {tail} tokens: the question against the budget {alone:.3}, budget and cat {both:.3}, the cat alone {only_cat:.3}");
    assert!(both > alone + 0.05, "the cat past 2,048 tokens is in the vector: {both} vs {alone}");
    // One topic over 3,000 tokens stays that topic: the scaled positions give no garbage.
    let short: String = budget.chars().take(600).collect();
    let s = p.embed(&[short], Purpose::Document);
    assert!(cosine(&s[0], &docs[0]) > 0.8, "a long text of one topic near a short one: {}", cosine(&s[0], &docs[0]));
    let longest = "moth ".repeat(9000);
    let ids = p.tokens(&longest);
    assert_eq!(ids.len(), 8192);
    assert_eq!(ids.last(), p.tokens("").last(), "[SEP] kept last");
}

#[test]
fn bert_tokens_match_llama_cpp_on_the_same_file() {
    tokens_match(&BERT_F32, "gguf_encoders::bert_tokens_match_llama_cpp_on_the_same_file");
}

#[test]
fn bert_embeddings_match_llama_cpp_on_the_same_file() {
    embeddings_match(&BERT_F32, "gguf_encoders::bert_embeddings_match_llama_cpp_on_the_same_file");
}

#[test]
fn bert_q8_0_stays_within_the_bound_of_llama_cpp() {
    embeddings_match(&BERT_Q8, "gguf_encoders::bert_q8_0_stays_within_the_bound_of_llama_cpp");
}

/// A BERT file has no Matryoshka cuts: a cut is refused.
#[test]
fn bert_has_no_matryoshka_cuts() {
    let Some(path) = model(&BERT_Q8, "gguf_encoders::bert_has_no_matryoshka_cuts") else { return };
    assert_eq!(Gguf::open(&path).unwrap().info.architecture, "bert");
    let err = Gguf::open_with(&path, &ModelOptions { dimensions: Some(128), ..Default::default() }).err().unwrap();
    assert!(err.to_string().contains("no Matryoshka cuts"), "{err}");
}

/// `bert.pooling_type` 2 pools the `[CLS]` state: the same file with that one value changed gives what the model
/// folder (this crate's other BERT implementation) gives with `[CLS]` pooling.
#[test]
fn bert_pools_as_the_file_says() {
    let Some(path) = model(&BERT_F32, "gguf_encoders::bert_pools_as_the_file_says") else { return };
    let folder = models_dir().join("all-MiniLM-L6-v2");
    let tmp = tempfile::tempdir().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let key = b"bert.pooling_type";
    let at = bytes.windows(key.len()).position(|w| w == key).expect("the file has a pooling type") + key.len();
    assert_eq!(&bytes[at..at + 8], &[4, 0, 0, 0, 1, 0, 0, 0], "a u32 1 (mean) after the key");
    bytes[at + 4] = 2;
    let cls_file = tmp.path().join("cls.gguf");
    std::fs::write(&cls_file, &bytes).unwrap();
    // The folder with its Pooling module set to [CLS].
    let cls_folder = tmp.path().join("folder");
    std::fs::create_dir_all(cls_folder.join("1_Pooling")).unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json", "sentence_bert_config.json", "modules.json"] {
        std::fs::copy(folder.join(f), cls_folder.join(f)).unwrap();
    }
    std::fs::write(
        cls_folder.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 384, "pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}"#,
    )
    .unwrap();
    let texts: Vec<String> = texts().into_iter().take(12).collect();
    let mean = Gguf::open(&path).unwrap().embed(&texts, Purpose::Document);
    let cls = Gguf::open(&cls_file).unwrap().embed(&texts, Purpose::Document);
    let want = Folder::open(&cls_folder).unwrap().embed(&texts, Purpose::Document);
    for ((t, got), (want, mean)) in texts.iter().zip(&cls).zip(want.iter().zip(&mean)) {
        assert!(cosine(got, want) > 0.999, "{t:?}: {} against the folder's [CLS] vector", cosine(got, want));
        assert!(cosine(got, mean) < 0.99, "{t:?}: the [CLS] vector is not the mean one");
    }
}

/// An architecture the provider does not run is refused by name, with the ones it runs.
#[test]
fn other_architectures_are_refused_by_name() {
    let Some(path) = model(&BERT_Q8, "gguf_encoders::other_architectures_are_refused_by_name") else { return };
    let mut bytes = std::fs::read(&path).unwrap();
    // "bert" -> "qert" in the architecture value only (the first occurrence after its key).
    let key = b"general.architecture";
    let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len() + 4 + 8;
    assert_eq!(&bytes[at..at + 4], b"bert");
    bytes[at] = b'q';
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("other.gguf");
    std::fs::write(&other, &bytes).unwrap();
    let err = Gguf::open(&other).err().unwrap().to_string();
    assert!(err.contains("`qert` is not supported"), "{err}");
    for arch in ["gemma-embedding", "nomic-bert", "`bert`"] {
        assert!(err.contains(arch), "{err}");
    }
}
