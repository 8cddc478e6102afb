//! Generated workspaces (issue 19): file and folder names from every script, contents with CRLF, BOM, front
//! matter, empty files, huge one-line paragraphs and invalid UTF-8, every ranking option on and off, random
//! queries. Index, search, get and status must never panic and never answer with an internal error, and every
//! readable note must be found by a word only it contains.
//!
//! The case budget is fixed (`PROPTEST_CASES` raises it) and the seed is fixed, so CI runs the same cases
//! every time; a failure prints the shrunk workspace.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use conformance::testing::open_context;
use memory_builtin::BuiltinFactory;
use memory_core::{Config, ErrorKind, GetRequest, MemoryBackend, SearchRequest, SyncOptions};
use proptest::prelude::*;

use crate::common::run_seeded_cases;

/// Name parts in many scripts, with the forms that broke things before: CJK names (a byte slice at 10 panicked
/// under temporal decay), names that look like dates with suffixes, NFC vs NFD, combining marks, RTL, emoji.
const NAME_PARTS: &[&str] = &[
    "会议记录",
    "打ち合わせ",
    "회의록",
    "اجتماع",
    "שלום",
    "🎉party",
    "e\u{301}te\u{301}",
    "\u{e9}t\u{e9}",
    "Straße",
    "ΑΒΓ",
    "notes",
    "a b",
    "2026-11-30",
    "2026-11-30-会议",
    "2026-02-30",
    "2026-11-30x",
    "2026-11-3é",
    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "...dots",
    "-dash",
    "日記2026-11-30",
    "ẞ",
    "ﬁle",
];

/// Unique words each note carries so the search for it can be checked; ASCII so every analyser keeps them.
fn marker(i: usize) -> String {
    format!("zq{i}marker")
}

#[derive(Debug, Clone)]
enum Body {
    Text { crlf: bool, bom: bool, front_matter: bool, lines: Vec<String> },
    Empty,
    HugeLine(usize),
    InvalidUtf8,
    Binary,
}

#[derive(Debug, Clone)]
struct Note {
    folder: Vec<&'static str>,
    name: &'static str,
    body: Body,
}

fn text_line() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z ]{0,40}",
        "\\PC{0,30}",
        Just("# Heading 标题 見出し".to_string()),
        Just("<!-- importance: 9 -->".to_string()),
        Just("- [ ] todo ✅ 完成".to_string()),
        Just("مرحبا بالعالم".to_string()),
    ]
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        12 => (any::<bool>(), any::<bool>(), any::<bool>(), prop::collection::vec(text_line(), 0..6))
            .prop_map(|(crlf, bom, front_matter, lines)| Body::Text { crlf, bom, front_matter, lines }),
        1 => Just(Body::Empty),
        1 => (200_000usize..1_050_000).prop_map(Body::HugeLine),
        1 => Just(Body::InvalidUtf8),
        1 => Just(Body::Binary),
    ]
}

fn note() -> impl Strategy<Value = Note> {
    (prop::collection::vec(prop::sample::select(NAME_PARTS), 0..3), prop::sample::select(NAME_PARTS), body()).prop_map(|(folder, name, body)| Note {
        folder,
        name,
        body,
    })
}

#[derive(Debug, Clone)]
struct Options {
    decay: bool,
    mmr: Option<f64>,
    min_score: f64,
    sessions: bool,
}

fn options() -> impl Strategy<Value = Options> {
    (any::<bool>(), prop::option::of(0.0f64..=1.0), 0.0f64..=1.0, any::<bool>()).prop_map(|(decay, mmr, min_score, sessions)| Options {
        decay,
        mmr,
        min_score,
        sessions,
    })
}

fn query() -> impl Strategy<Value = String> {
    prop_oneof![Just("会议".to_string()), Just("meeting notes".to_string()), "\\PC{0,20}", "[a-z]{1,8}( [a-z]{1,8}){0,4}", Just("\"*:(".to_string())]
}

/// Writes the notes; returns the index key and marker of every note that must be searchable.
fn write_workspace(ws: &Path, notes: &[Note]) -> BTreeMap<String, String> {
    let mut expected = BTreeMap::new();
    fs::create_dir_all(ws.join("memory")).unwrap();
    for (i, n) in notes.iter().enumerate() {
        let mut dir = ws.join("memory");
        for f in &n.folder {
            dir = dir.join(f);
        }
        if fs::create_dir_all(&dir).is_err() {
            continue;
        }
        // Distinct file per note (two notes may draw the same name).
        let file = dir.join(format!("{}-{i}.md", n.name));
        let rel = file.strip_prefix(ws).unwrap().to_string_lossy().replace('\\', "/");
        let bytes: Vec<u8> = match &n.body {
            Body::Text { crlf, bom, front_matter, lines } => {
                let nl = if *crlf { "\r\n" } else { "\n" };
                let mut t = String::new();
                if *bom {
                    t.push('\u{feff}');
                }
                if *front_matter {
                    t.push_str(&format!("---{nl}title: {}{nl}---{nl}", n.name));
                }
                for l in lines {
                    t.push_str(l);
                    t.push_str(nl);
                }
                t.push_str(&format!("{}{nl}", marker(i)));
                expected.insert(rel.clone(), marker(i));
                t.into_bytes()
            }
            Body::Empty => Vec::new(),
            Body::HugeLine(n_bytes) => {
                let mut t = "lorem ipsum dolor ".repeat(n_bytes / 18);
                t.push_str(&marker(i));
                t.push('\n');
                expected.insert(rel.clone(), marker(i));
                t.into_bytes()
            }
            Body::InvalidUtf8 => b"valid start \xff\xfe\xc3\x28 then more\n".to_vec(),
            Body::Binary => vec![0, 1, 2, 3, 0, 159, 146, 150],
        };
        if fs::write(&file, bytes).is_err() {
            expected.remove(&rel);
        }
    }
    expected
}

fn config(o: &Options) -> Config {
    let mmr = match o.mmr {
        Some(l) => format!("mmr: {{ enabled: true, lambda: {l} }},"),
        None => String::new(),
    };
    let sources = if o.sessions { r#"sources: ["memory", "sessions"],"# } else { "" };
    Config::from_json5(&format!(
        "{{ memory: {{ search: {{ {sources} query: {{ minScore: {}, hybrid: {{ {mmr} temporalDecay: {{ enabled: {} }} }} }} }} }} }}",
        o.min_score, o.decay
    ))
    .expect("generated config is valid")
}

fn not_internal<T: std::fmt::Debug>(what: &str, r: &memory_core::Result<T>) -> Result<(), TestCaseError> {
    if let Err(e) = r {
        prop_assert!(e.kind() != ErrorKind::Internal, "{what}: internal error: {e}");
    }
    Ok(())
}

async fn check(notes: Vec<Note>, opts: Options, queries: Vec<String>) -> Result<(), TestCaseError> {
    let ws = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let expected = write_workspace(ws.path(), &notes);
    let ctx = open_context(config(&opts), ws.path(), state.path(), None);
    let engine = BuiltinFactory.open_indexed(ctx).await.unwrap();
    let report = engine.sync(SyncOptions::default()).await;
    prop_assert!(report.is_ok(), "sync: {report:?}");
    for (path, word) in &expected {
        let r = engine.search(&SearchRequest::new(word)).await;
        prop_assert!(r.is_ok(), "search {word}: {r:?}");
        let r = r.unwrap();
        prop_assert!(r.results.iter().any(|h| &h.path == path), "{word} should find {path}: {:?}", r.results);
        prop_assert!(r.results.iter().all(|h| h.score.is_finite() && h.score > 0.0), "{:?}", r.results);
        let g = engine.get(&GetRequest { path: path.clone(), from: None, lines: Some(3), offset: None }).await;
        prop_assert!(g.is_ok(), "get {path}: {g:?}");
    }
    for q in &queries {
        let r = engine.search(&SearchRequest::new(q.clone())).await;
        not_internal(&format!("search {q:?}"), &r)?;
        if q.trim().is_empty() {
            prop_assert!(r.is_err());
        }
    }
    for n in ["memory/../MEMORY.md", "/etc/passwd", "memory/会议记录-0.md", "memory/%00.md"] {
        let g = engine.get(&GetRequest { path: n.into(), from: Some(0), lines: Some(0), offset: None }).await;
        not_internal(&format!("get {n:?}"), &g)?;
    }
    let st = engine.status().await;
    prop_assert!(st.is_ok(), "status: {st:?}");
    // A second sync finds nothing to do.
    let again = engine.sync(SyncOptions::default()).await.unwrap();
    prop_assert_eq!((again.files_added, again.files_changed, again.files_removed), (0, 0, 0), "{:?}", again);
    Ok(())
}

#[test]
fn generated_workspaces_index_search_get_and_status_without_panics() {
    let strategy = (prop::collection::vec(note(), 1..7), options(), prop::collection::vec(query(), 1..5));
    let cases = run_seeded_cases(32, 19, &strategy, |(notes, opts, queries)| check(notes, opts, queries));
    eprintln!("generated workspaces: {cases} cases passed");
}
