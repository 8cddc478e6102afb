//! Update scheduling with a stand-in qmd that logs each run: updates never overlap, the interval is debounced,
//! embed runs on its own interval only for modes that need vectors.

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use memory_core::{MemoryBackend, SyncOptions};
use memory_qmd::{QmdBackend, QmdOptions};

/// A qmd whose `update`/`embed` take 200 ms and log `start`/`end` lines; overlapping runs log `OVERLAP`.
fn logging_qmd(dir: &Path) -> std::path::PathBuf {
    let log = dir.join("log");
    let lock = dir.join("running");
    let script = dir.join("slow-qmd");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n  update|embed)\n    if [ -e '{lock}' ]; then echo OVERLAP >> '{log}'; fi\n    touch '{lock}'\n    echo \"start $1\" >> '{log}'\n    sleep 0.2\n    echo \"end $1\" >> '{log}'\n    rm -f '{lock}'\n    echo 'Indexed: 0 new, 0 updated, 3 unchanged, 0 removed' ;;\n  collection) echo 'Indexed: 3 new, 0 updated, 0 unchanged, 0 removed' ;;\n  *) echo '[]' ;;\nesac\n",
            lock = lock.display(),
            log = log.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn log_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("log")).unwrap_or_default().lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_updates_are_serialised() {
    let (tmp, ws) = temp_sample_workspace();
    let script = logging_qmd(tmp.path());
    let mut cfg = config(script.to_str().unwrap());
    edit_qmd(&mut cfg, |q| q.update.on_boot = false);
    let qmd = std::sync::Arc::new(QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state")), QmdOptions::default()).await.unwrap());
    let mut handles = Vec::new();
    for _ in 0..4 {
        let q = qmd.clone();
        handles.push(tokio::spawn(async move { q.sync(SyncOptions::default()).await }));
    }
    let e = qmd.clone();
    handles.push(tokio::spawn(async move { e.embed().await.map(|_| Default::default()) }));
    for h in handles {
        h.await.unwrap().unwrap();
    }
    let log = log_lines(tmp.path());
    assert!(!log.iter().any(|l| l == "OVERLAP"), "{log:?}");
    assert_eq!(log.iter().filter(|l| *l == "start update").count(), 4, "{log:?}");
    assert_eq!(log.iter().filter(|l| *l == "start embed").count(), 1, "{log:?}");
    // Strictly alternating start/end.
    for pair in log.chunks(2) {
        assert!(pair[0].starts_with("start") && pair[1].starts_with("end"), "{log:?}");
    }
    let rep = qmd.sync(SyncOptions::default()).await.unwrap();
    assert_eq!(rep.files_unchanged, 3);
    qmd.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interval_updates_are_debounced_and_embed_follows_the_mode() {
    // Debounce longer than the interval: after the boot update, interval ticks do nothing.
    let (tmp, ws) = temp_sample_workspace();
    let script = logging_qmd(tmp.path());
    let mut cfg = config(script.to_str().unwrap());
    edit_qmd(&mut cfg, |q| {
        q.update.interval = Some(Duration::from_millis(100));
        q.update.debounce = Duration::from_secs(60);
        q.update.embed_interval = Some(Duration::from_millis(100));
    });
    let qmd = QmdBackend::open(ctx(cfg.clone(), &ws, &tmp.path().join("state")), QmdOptions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    qmd.close().await.unwrap();
    let log = log_lines(tmp.path());
    assert_eq!(log.iter().filter(|l| *l == "start update").count(), 1, "only the boot update: {log:?}");
    assert_eq!(log.iter().filter(|l| *l == "start embed").count(), 0, "searchMode=search needs no embeddings: {log:?}");

    // No debounce, and a mode that needs vectors: the interval updates and embeds run, never overlapping.
    let tmp = tempfile::tempdir().unwrap();
    let script = logging_qmd(tmp.path());
    let mut cfg = config(script.to_str().unwrap());
    edit_qmd(&mut cfg, |q| {
        q.search_mode = memory_qmd::SearchMode::VSearch;
        q.update.interval = Some(Duration::from_millis(100));
        q.update.debounce = Duration::ZERO;
        q.update.embed_interval = Some(Duration::from_millis(150));
    });
    let qmd = QmdBackend::open(ctx(cfg, &ws, &tmp.path().join("state")), QmdOptions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    qmd.close().await.unwrap();
    // Closing stops the timers: nothing runs afterwards.
    let log = log_lines(tmp.path());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let after = log_lines(tmp.path());
    assert!(after.len() <= log.len() + 1, "timers still running after close: {log:?} -> {after:?}");
    assert!(!after.iter().any(|l| l == "OVERLAP"), "{after:?}");
    assert!(after.iter().filter(|l| *l == "start update").count() >= 2, "{after:?}");
    assert!(after.iter().filter(|l| *l == "start embed").count() >= 1, "{after:?}");
}
