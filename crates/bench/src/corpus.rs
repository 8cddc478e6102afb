//! Seeded generator of daily notes that look like an agent's log: dated headings, bullet points about
//! projects, people, ids, config keys and errors.

use std::path::Path;

use conformance::testing::NOTE_TOPICS;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PEOPLE: &[&str] = &["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Oscar"];
const VERBS: &[&str] = &[
    "fixed",
    "reviewed",
    "discussed",
    "planned",
    "shipped",
    "debugged",
    "measured",
    "wrote",
    "moved",
    "cancelled",
    "scheduled",
    "paired on",
    "documented",
    "rolled back",
    "upgraded",
    "tested",
    "estimated",
    "called about",
];
const FILLER: &[&str] = &[
    "the",
    "new",
    "old",
    "staging",
    "production",
    "weekly",
    "slow",
    "flaky",
    "shared",
    "primary",
    "backup",
    "next",
    "with",
    "for",
    "after",
    "before",
    "during",
    "because",
    "of",
    "and",
    "then",
    "again",
    "finally",
    "quickly",
];

const SYLLABLES: &[&str] = &[
    "ka", "ro", "mi", "ten", "vel", "dor", "san", "lu", "pre", "qua", "zi", "mon", "tra", "bel", "cor", "fin", "gal", "hor", "ix", "jun", "kel",
    "lor", "mar", "nev", "ost", "pil", "ras", "sol", "tur", "ul", "var", "wen",
];

/// A seeded vocabulary: the topic words above, then pronounceable made-up words, drawn with a Zipf law so that
/// a few words are everywhere and most are rare, as in real notes.
struct Vocabulary {
    words: Vec<String>,
    cumulative: Vec<f64>,
}

impl Vocabulary {
    fn new(rng: &mut StdRng, size: usize) -> Vocabulary {
        let mut words: Vec<String> = NOTE_TOPICS.iter().map(std::string::ToString::to_string).collect();
        let mut seen: std::collections::HashSet<String> = words.iter().cloned().collect();
        while words.len() < size {
            let n = rng.gen_range(2..4);
            let w: String = (0..n).map(|_| SYLLABLES[rng.gen_range(0..SYLLABLES.len())]).collect();
            if seen.insert(w.clone()) {
                words.push(w);
            }
        }
        // Shuffle so topic words are not all at the head of the distribution.
        for i in (1..words.len()).rev() {
            let j = rng.gen_range(0..=i);
            words.swap(i, j);
        }
        let mut acc = 0.0;
        let cumulative = (1..=words.len())
            .map(|r| {
                acc += 1.0 / r as f64;
                acc
            })
            .collect();
        Vocabulary { words, cumulative }
    }

    fn pick(&self, rng: &mut StdRng) -> &str {
        let x = rng.gen::<f64>() * self.cumulative.last().unwrap();
        let i = self.cumulative.partition_point(|c| *c < x).min(self.words.len() - 1);
        &self.words[i]
    }
}

fn sentence(rng: &mut StdRng, vocab: &Vocabulary, day_topics: &[String]) -> String {
    let mut s = format!("{} {}", VERBS[rng.gen_range(0..VERBS.len())], FILLER[rng.gen_range(0..FILLER.len())]);
    for _ in 0..rng.gen_range(3..9) {
        s.push(' ');
        match rng.gen_range(0..10) {
            0..=2 => s.push_str(&day_topics[rng.gen_range(0..day_topics.len())]),
            3..=5 => s.push_str(vocab.pick(rng)),
            _ => s.push_str(FILLER[rng.gen_range(0..FILLER.len())]),
        }
    }
    match rng.gen_range(0..10) {
        0 => s.push_str(&format!(" (error E{})", rng.gen_range(1000..9999))),
        1 => s.push_str(&format!(" with {}", PEOPLE[rng.gen_range(0..PEOPLE.len())])),
        2 => s.push_str(&format!(", ticket OPS-{}", rng.gen_range(100..999))),
        3 => s.push_str(" via memory.search.provider"),
        _ => {}
    }
    s
}

/// One note of about `bytes` bytes: a few topics of the day, each a section of bullet points.
fn note(rng: &mut StdRng, vocab: &Vocabulary, title: &str, bytes: usize) -> String {
    let day_topics: Vec<String> = (0..rng.gen_range(2..5)).map(|_| vocab.pick(rng).to_string()).collect();
    let mut text = format!("# {title}\n");
    let mut section = 0;
    while text.len() < bytes {
        if section % 6 == 0 {
            text.push_str(&format!("\n## {}\n\n", day_topics[(section / 6) % day_topics.len()]));
        }
        section += 1;
        text.push_str("- ");
        text.push_str(&sentence(rng, vocab, &day_topics));
        text.push('\n');
    }
    text
}

const VOCABULARY_SIZE: usize = 5000;

/// Write `n` daily notes of ~2 KB into `memory/` of `workspace`, plus a MEMORY.md.
pub fn generate(workspace: &Path, n: usize, seed: u64) -> std::io::Result<()> {
    generate_sized(workspace, n, seed, 2048)
}

/// [`generate`] with notes of about `bytes` each.
pub fn generate_sized(workspace: &Path, n: usize, seed: u64, bytes: usize) -> std::io::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let vocab = Vocabulary::new(&mut rng, VOCABULARY_SIZE);
    let dir = workspace.join("memory");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(workspace.join("MEMORY.md"), note(&mut rng, &vocab, "Long-term memory", bytes))?;
    let start = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).expect("valid date");
    for i in 0..n {
        let date = (start + chrono::Days::new(i as u64)).format("%Y-%m-%d").to_string();
        std::fs::write(dir.join(format!("{date}.md")), note(&mut rng, &vocab, &date, bytes))?;
    }
    Ok(())
}

/// Queries like an agent's, drawn from the same vocabulary: a word or two, a question, an id.
pub fn queries(n: usize, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let vocab = Vocabulary::new(&mut rng, VOCABULARY_SIZE);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    (0..n)
        .map(|i| match i % 4 {
            0 => vocab.pick(&mut rng).to_string(),
            1 => format!("{} {}", vocab.pick(&mut rng), vocab.pick(&mut rng)),
            2 => format!("what did {} say about the {}?", PEOPLE[rng.gen_range(0..PEOPLE.len())], vocab.pick(&mut rng)),
            _ => format!("E{}", rng.gen_range(1000..9999)),
        })
        .collect()
}

/// Queries whose every word appears in most notes (issue 22): the vocabulary's most frequent words (the head
/// of its Zipf law: the first is in every note, the tenth in about two thirds) and the generator's filler
/// content words, one to four of them. OR-ed, such words match nearly every chunk, which is the worst case
/// for keyword search.
pub fn common_queries(n: usize, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let vocab = Vocabulary::new(&mut rng, VOCABULARY_SIZE);
    let head: Vec<&str> = vocab.words.iter().take(8).map(String::as_str).collect();
    let filler = ["staging", "production", "weekly", "slow", "flaky", "shared", "primary", "backup"];
    let mut rng = StdRng::seed_from_u64(seed ^ 0xc033_u64);
    (0..n)
        .map(|_| {
            let words = rng.gen_range(1..=4);
            (0..words)
                .map(|_| if rng.gen_bool(0.5) { head[rng.gen_range(0..head.len())] } else { filler[rng.gen_range(0..filler.len())] })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}
