//! A model that does not read the question's language: its vector leg is set aside beside a keyword leg that
//! matched, so the search ranks by words (`memory_core::ranking::vector_leg_tells`); a model that reads it keeps
//! its leg.

use std::sync::Arc;

use conformance::testing::TestDirs;
use conformance::{BagOfWordsEmbedder, FnEmbedder};
use memory_builtin::BuiltinFactory;
use memory_core::embedding::EmbeddingProvider;
use memory_core::{Config, MemoryBackend, SearchRequest, SyncOptions};

const DIMS: usize = 64;

/// An English model reading Chinese, at its simplest: English words land in a bag of words, and every Chinese
/// text on one arc, placed by its number of Han characters alone. Chinese texts of about the same length look alike to it,
/// whatever they say, as unrelated Chinese sentences look nearly alike to an English model.
fn english_only() -> FnEmbedder {
    let words = BagOfWordsEmbedder::new(DIMS);
    FnEmbedder::new("english-only", DIMS, move |t| {
        let han = t.chars().filter(|c| ('\u{4e00}'..='\u{9fff}').contains(c)).count();
        if han == 0 {
            return words.embed_one(t);
        }
        let angle = han as f32 / 20.0;
        let mut v = vec![0.0; DIMS];
        (v[0], v[1]) = (angle.cos(), angle.sin());
        v
    })
}

/// The note that answers the question about alerts holds one of its words (服务器) and is long; the others share
/// none of its words and are about as long as the question, so the blind model's cosines prefer them.
fn workspace() -> TestDirs {
    let env = TestDirs::new();
    env.write(
        "memory/monitoring.md",
        "# 监控\n\n线上服务器的告警先发到值班群，再打电话给当周值班的工程师；周末的告警也一样处理，不会延后到周一，值班表在共享日历里。\n",
    );
    for (i, note) in
        ["周三下午和设计部门开会讨论新版首页", "妈妈对青霉素过敏要记得提醒医生", "电动车在家慢充大约需要八个小时", "孩子每周二和周五下午学钢琴"]
            .iter()
            .enumerate()
    {
        env.write(&format!("memory/n{i}.md"), &format!("# 笔记\n\n{note}\n"));
    }
    env
}

async fn explained(embedder: Arc<dyn EmbeddingProvider>, query: &str) -> memory_core::SearchResponse {
    let env = workspace();
    let engine = BuiltinFactory.open_indexed(env.context(Config::default(), Some(embedder))).await.unwrap();
    engine.sync(SyncOptions::default()).await.unwrap();
    let mut request = SearchRequest::new(query);
    request.explain = true;
    engine.search(&request).await.unwrap()
}

#[tokio::test]
async fn a_model_that_does_not_read_the_language_leaves_the_ranking_to_words() {
    let res = explained(Arc::new(english_only()), "服务器出问题会通知到哪里？").await;
    assert_eq!(res.mode.as_deref(), Some("hybrid"), "{:?}", res.warnings);
    assert_eq!(res.results.first().map(|r| r.path.as_str()), Some("memory/monitoring.md"), "{:?}", res.results);
    let explanation = res.explanation.expect("asked to explain");
    let aside = explanation.vector_set_aside.expect("the vector leg is set aside");
    assert!(aside.best <= aside.unrelated, "{aside:?}");
    let weights = explanation.weights.expect("weights");
    assert_eq!((weights.text, weights.vector), (1.0, 0.0));
    assert_eq!(explanation.vector_floor, None);
}

#[tokio::test]
async fn a_model_that_reads_the_language_keeps_its_leg() {
    let res = explained(Arc::new(BagOfWordsEmbedder::new(DIMS)), "妈妈对什么药过敏？").await;
    assert_eq!(res.results.first().map(|r| r.path.as_str()), Some("memory/n1.md"), "{:?}", res.results);
    let explanation = res.explanation.expect("asked to explain");
    assert_eq!(explanation.vector_set_aside, None);
    assert!(explanation.weights.is_some_and(|w| w.vector > 0.0), "{:?}", explanation.weights);
}
