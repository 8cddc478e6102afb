//! Seeded generator of daily notes that look like an agent's log: dated headings, bullet points about
//! projects, people, ids, config keys and errors.

use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TOPICS: &[&str] = &[
    "gateway", "deploy", "billing", "invoice", "kubernetes", "canary", "database", "migration", "backup", "latency",
    "dashboard", "alerting", "oncall", "release", "roadmap", "budget", "hiring", "interview", "design", "review",
    "security", "certificate", "dns", "cache", "queue", "worker", "scheduler", "embedding", "search", "index",
    "memory", "agent", "prompt", "evaluation", "benchmark", "regression", "incident", "postmortem", "customer",
    "contract", "travel", "flight", "hotel", "dentist", "groceries", "coffee", "running", "garden", "birthday",
];
const PEOPLE: &[&str] = &["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Mallory", "Oscar"];
const VERBS: &[&str] = &[
    "fixed", "reviewed", "discussed", "planned", "shipped", "debugged", "measured", "wrote", "moved", "cancelled",
    "scheduled", "paired on", "documented", "rolled back", "upgraded", "tested", "estimated", "called about",
];
const FILLER: &[&str] = &[
    "the", "new", "old", "staging", "production", "weekly", "slow", "flaky", "shared", "primary", "backup", "next",
    "with", "for", "after", "before", "during", "because", "of", "and", "then", "again", "finally", "quickly",
];

fn sentence(rng: &mut StdRng) -> String {
    let mut s = format!("{} {}", VERBS[rng.gen_range(0..VERBS.len())], FILLER[rng.gen_range(0..FILLER.len())]);
    for _ in 0..rng.gen_range(3..9) {
        s.push(' ');
        if rng.gen_bool(0.45) {
            s.push_str(TOPICS[rng.gen_range(0..TOPICS.len())]);
        } else {
            s.push_str(FILLER[rng.gen_range(0..FILLER.len())]);
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

/// One note of about `bytes` bytes.
pub fn note(rng: &mut StdRng, date: &str, bytes: usize) -> String {
    let mut text = format!("# {date}\n\n");
    let mut section = 0;
    while text.len() < bytes {
        if section == 0 || rng.gen_range(0..8) == 0 {
            text.push_str(&format!("\n## {}\n\n", TOPICS[rng.gen_range(0..TOPICS.len())]));
        }
        section += 1;
        text.push_str("- ");
        text.push_str(&sentence(rng));
        text.push('\n');
    }
    text
}

/// Write `n` daily notes of ~2 KB into `memory/` of `workspace`, plus a MEMORY.md.
pub fn generate(workspace: &Path, n: usize, seed: u64) -> std::io::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = workspace.join("memory");
    std::fs::create_dir_all(&dir)?;
    std::fs::write(workspace.join("MEMORY.md"), note(&mut rng, "Long-term memory", 2048))?;
    let start = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).expect("valid date");
    for i in 0..n {
        let date = (start + chrono::Days::new(i as u64)).format("%Y-%m-%d").to_string();
        std::fs::write(dir.join(format!("{date}.md")), note(&mut rng, &date, 2048))?;
    }
    Ok(())
}

/// Queries like an agent's: a topic or two, a person, an id.
pub fn queries(n: usize, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed);
    (0..n)
        .map(|i| match i % 4 {
            0 => TOPICS[rng.gen_range(0..TOPICS.len())].to_string(),
            1 => format!("{} {}", TOPICS[rng.gen_range(0..TOPICS.len())], TOPICS[rng.gen_range(0..TOPICS.len())]),
            2 => format!("what did {} say about the {}?", PEOPLE[rng.gen_range(0..PEOPLE.len())], TOPICS[rng.gen_range(0..TOPICS.len())]),
            _ => format!("E{}", rng.gen_range(1000..9999)),
        })
        .collect()
}
