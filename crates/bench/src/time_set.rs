//! Questions about time (issue "memory that understands last week"): a generated year of daily logs and questions
//! that say when in English and Chinese ("what did we decide about Project Alder last week?", "上周我们对青松项目做了
//! 什么决定？"), asked on a fixed day (`memory.search.query.now`). Each question's subject appears in five logs
//! across the year with five different decisions; only one of those logs lies inside the time the question names,
//! so the words alone cannot tell which is meant. A question is answered when that log is the first result.

use std::path::Path;
use std::sync::Arc;

use chrono::{Datelike, Duration, NaiveDate};
use memory_builtin::BuiltinFactory;
use memory_core::registry::OpenContext;
use memory_core::time::{find, DateRange};
use memory_core::{Config, MemoryBackend, SearchRequest, SyncOptions};
use rand::{rngs::StdRng, Rng, SeedableRng};

/// The day every question is asked on: Wednesday, 17 June 2026.
const ASKED_ON: &str = "2026-06-17";

/// How each question says when (`{}` is where the subject goes).
const ENGLISH: &[&str] = &[
    "What did we decide about {} today?",
    "What did we decide about {} yesterday?",
    "What did we decide about {} the day before yesterday?",
    "What did we decide about {} this week?",
    "What did we decide about {} last week?",
    "What did we decide about {} this month?",
    "What did we decide about {} last month?",
    "What did we decide about {} last year?",
    "What did we decide about {} 3 days ago?",
    "What did we decide about {} five days ago?",
    "What did we decide about {} two weeks ago?",
    "What did we decide about {} 3 weeks ago?",
    "What did we decide about {} 2 months ago?",
    "What did we decide about {} four months ago?",
    "What did we decide about {} last Tuesday?",
    "What did we decide about {} on Monday?",
    "What did we decide about {} last Friday?",
    "What did we decide about {} in March?",
    "What did we decide about {} in January?",
    "What did we decide about {} in December 2025?",
    "What did we decide about {} in September of 2025?",
    "What did we decide about {} on March 3?",
    "What did we decide about {} on 2026-04-10?",
    "What did we decide about {} on 12 February 2026?",
    "What did we decide about {} last weekend?",
    "What did we decide about {} earlier this month?",
    "What did we decide about {} a couple of days ago?",
    "What did we decide about {} last March?",
    "What did we decide about {} before July 2025?",
    "Last week, what did we decide about {}?",
    "Yesterday we talked about {}: what did we decide?",
    "What was decided on {} in the past week?",
];

const CHINESE: &[&str] = &[
    "今天我们对{}做了什么决定？",
    "昨天我们对{}做了什么决定？",
    "前天我们对{}做了什么决定？",
    "上周我们对{}做了什么决定？",
    "上个星期关于{}的决定是什么？",
    "这周我们对{}做了什么决定？",
    "本月我们对{}做了什么决定？",
    "上个月我们对{}做了什么决定？",
    "去年我们对{}做了什么决定？",
    "三天前我们对{}做了什么决定？",
    "5天前我们对{}做了什么决定？",
    "两周前我们对{}做了什么决定？",
    "两个月前我们对{}做了什么决定？",
    "三月我们对{}做了什么决定？",
    "2026年2月我们对{}做了什么决定？",
    "2025年12月我们对{}做了什么决定？",
    "3月5日我们对{}做了什么决定？",
    "周一我们对{}做了什么决定？",
    "上周二我们对{}做了什么决定？",
    "星期五我们对{}做了什么决定？",
    "最近三天我们对{}做了什么决定？",
    "上周末我们对{}做了什么决定？",
    "四月份我们对{}做了什么决定？",
    "十二月我们对{}做了什么决定？",
    "2025年8月20日我们对{}做了什么决定？",
];

const EN_SUBJECTS: &[&str] = &[
    "Alder", "Birch", "Cedar", "Dogwood", "Elm", "Fir", "Ginkgo", "Hazel", "Juniper", "Larch", "Maple", "Nutmeg", "Oak", "Pine", "Quince", "Rowan",
    "Spruce", "Tamarack", "Upas", "Viburnum", "Willow", "Yew", "Zelkova", "Acacia", "Baobab", "Cypress", "Dammar", "Ebony", "Fig", "Gum", "Hemlock",
    "Ironwood",
];

const ZH_SUBJECTS: &[&str] = &[
    "青松", "白桦", "红杉", "银杏", "翠柏", "金桂", "紫檀", "黄杨", "梧桐", "香樟", "雪松", "玉兰", "海棠", "木棉", "丁香", "合欢", "榕树", "棕榈",
    "枫香", "云杉", "冷杉", "水杉", "柳杉", "铁杉", "红豆",
];

const EN_DECISIONS: &[&str] = &[
    "move the database to Postgres",
    "postpone the launch by a month",
    "hire two more engineers",
    "drop the mobile app",
    "switch the billing provider",
    "rewrite the importer in Rust",
    "open the beta to everyone",
    "cut the budget by ten percent",
];

const ZH_DECISIONS: &[&str] = &[
    "把数据库迁移到 Postgres",
    "发布推迟一个月",
    "再招两名工程师",
    "放弃移动应用",
    "更换计费服务商",
    "用 Rust 重写导入工具",
    "向所有人开放测试",
    "预算削减百分之十",
];

struct Question {
    text: String,
    /// The log holding the answer.
    answer: String,
    chinese: bool,
}

/// Days of the generated year: a year back from the asking day, through it.
fn year_of_days(asked: NaiveDate) -> Vec<NaiveDate> {
    (0..=365).map(|i| asked - Duration::days(365 - i)).collect()
}

fn note_path(d: NaiveDate) -> String {
    format!("memory/{}.md", d.format("%Y-%m-%d"))
}

/// Write the logs and return the questions. Each question's subject is written into one log inside its time (the
/// answer) and four outside (two of them next to the time, before and after, where the calendar allows).
fn generate(ws: &Path, seed: u64) -> anyhow::Result<Vec<Question>> {
    let asked = NaiveDate::parse_from_str(ASKED_ON, "%Y-%m-%d")?;
    let days = year_of_days(asked);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut lines: std::collections::BTreeMap<NaiveDate, Vec<String>> = days.iter().map(|d| (*d, Vec::new())).collect();
    let mut questions = Vec::new();
    let sets = [(ENGLISH, EN_SUBJECTS, EN_DECISIONS, false), (CHINESE, ZH_SUBJECTS, ZH_DECISIONS, true)];
    for (templates, subjects, decisions, chinese) in sets {
        for (i, template) in templates.iter().enumerate() {
            let subject = if chinese { format!("{}项目", subjects[i]) } else { format!("Project {}", subjects[i]) };
            let text = template.replace("{}", &subject);
            let found = find(&text, asked);
            let Some(range) = found.first().map(|e| e.range) else {
                anyhow::bail!("the generated question {text:?} says no time the engine reads");
            };
            let inside: Vec<NaiveDate> = days.iter().copied().filter(|d| range.contains(*d)).collect();
            let outside: Vec<NaiveDate> = days.iter().copied().filter(|d| !range.contains(*d)).collect();
            if inside.is_empty() || outside.len() < 4 {
                anyhow::bail!("the generated question {text:?} names {range:?}, which the year of logs cannot test");
            }
            let answer_day = inside[rng.gen_range(0..inside.len())];
            let mut others = neighbours(range, &outside);
            while others.len() < 4 {
                let d = outside[rng.gen_range(0..outside.len())];
                if !others.contains(&d) {
                    others.push(d);
                }
            }
            let first = rng.gen_range(0..decisions.len());
            for (k, day) in std::iter::once(answer_day).chain(others).enumerate() {
                let decision = decisions[(first + k) % decisions.len()];
                let line =
                    if chinese { format!("- {subject}：我们决定{decision}。") } else { format!("- {subject}: we decided to {decision}.") };
                lines.entry(day).or_default().push(line);
            }
            questions.push(Question { text, answer: note_path(answer_day), chinese });
        }
    }
    std::fs::create_dir_all(ws.join("memory"))?;
    for (day, mut entries) in lines {
        // Every day has a log, so an empty window is never what decides.
        entries.insert(0, format!("Standup notes. Weather: {}.", ["sunny", "rain", "cloudy", "windy"][day.ordinal0() as usize % 4]));
        let text = format!("# {}\n\n{}\n", day.format("%Y-%m-%d"), entries.join("\n"));
        std::fs::write(ws.join(note_path(day)), text)?;
    }
    Ok(questions)
}

/// The days just before and just after `range` among `outside` (the hardest wrong answers).
fn neighbours(range: DateRange, outside: &[NaiveDate]) -> Vec<NaiveDate> {
    let before = outside.iter().copied().filter(|d| *d < range.first).max();
    let after = outside.iter().copied().filter(|d| *d > range.last).min();
    before.into_iter().chain(after).collect()
}

/// The first result's path of each of `texts`, and each search's milliseconds.
async fn first_paths(engine: &dyn MemoryBackend, texts: &[String]) -> anyhow::Result<(Vec<Option<String>>, Vec<f64>)> {
    let mut out = Vec::new();
    let mut took = Vec::new();
    for text in texts {
        let started = std::time::Instant::now();
        let r = engine.search(&SearchRequest { max_results: Some(5), min_score: Some(0.0), ..SearchRequest::new(text.clone()) }).await?;
        took.push(started.elapsed().as_secs_f64() * 1e3);
        out.push(r.results.into_iter().next().map(|h| h.path));
    }
    Ok((out, took))
}

fn p50(mut ms: Vec<f64>) -> f64 {
    ms.sort_by(f64::total_cmp);
    ms.get(ms.len() / 2).copied().unwrap_or(0.0)
}

pub async fn run(model: Option<&Path>, seed: u64, verbose: bool, keep: Option<&Path>) -> anyhow::Result<()> {
    let tmp_dir = tempfile::tempdir()?;
    // With `keep`, the workspace and its indexes stay for a look with `memory` (they are written afresh each run).
    let tmp = keep.unwrap_or(tmp_dir.path());
    if keep.is_some() {
        let _ = std::fs::remove_dir_all(tmp);
    }
    let ws = tmp.join("workspace");
    let questions = generate(&ws, seed)?;
    let (en, zh) = (questions.iter().filter(|q| !q.chinese).count(), questions.iter().filter(|q| q.chinese).count());
    println!("time set: 366 daily logs, {en} English and {zh} Chinese questions, asked on {ASKED_ON} (seed {seed})");
    let mut setups: Vec<(String, Option<&Path>)> = vec![("keyword".into(), None)];
    if let Some(m) = model {
        setups.push((format!("hybrid {}", m.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()), Some(m)));
    }
    // The control: each question without the words that say when ("what did we decide about Project Alder"), what
    // a search that does not understand time can go by (one of five logs).
    let asked = NaiveDate::parse_from_str(ASKED_ON, "%Y-%m-%d")?;
    let with_time: Vec<String> = questions.iter().map(|q| q.text.clone()).collect();
    let without_time: Vec<String> = questions.iter().map(|q| memory_core::time::without_expressions(&q.text, &find(&q.text, asked))).collect();
    println!("{:<40} {:>10} {:>10} {:>10} {:>8}", "setup", "English", "Chinese", "all", "p50 ms");
    for (label, model) in setups {
        let mut config = Config::default();
        config.memory.search.query.now = Some(ASKED_ON.into());
        let embedder = crate::quality::local_embedder(model)?;
        let state = tmp.join(format!("state-{}", label.replace(' ', "-")));
        let ctx = OpenContext::new(Arc::new(config), ws.clone(), state, "time").with_embedder(embedder);
        let engine = BuiltinFactory.open_indexed(ctx).await?;
        engine.sync(SyncOptions::default()).await?;
        let (control, control_ms) = first_paths(&engine, &without_time).await?;
        let (firsts, ms) = first_paths(&engine, &with_time).await?;
        engine.close().await?;
        let answered = |firsts: &[Option<String>], chinese: Option<bool>| {
            let picked: Vec<_> = questions.iter().zip(firsts).filter(|(q, _)| chinese.is_none_or(|c| q.chinese == c)).collect();
            let ok = picked.iter().filter(|(q, f)| f.as_deref() == Some(q.answer.as_str())).count();
            format!("{ok}/{} {:.0}%", picked.len(), 100.0 * ok as f64 / picked.len().max(1) as f64)
        };
        for (name, f, took) in [(format!("{label}, time words left out"), &control, control_ms), (label.clone(), &firsts, ms)] {
            println!("{name:<40} {:>10} {:>10} {:>10} {:>8.2}", answered(f, Some(false)), answered(f, Some(true)), answered(f, None), p50(took));
        }
        if verbose {
            for (q, f) in questions.iter().zip(&firsts) {
                if f.as_deref() != Some(q.answer.as_str()) {
                    println!("  missed: {}  (answer {}, first {})", q.text, q.answer, f.as_deref().unwrap_or("-"));
                }
            }
        }
    }
    Ok(())
}
