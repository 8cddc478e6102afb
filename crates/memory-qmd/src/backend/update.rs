//! The update scheduler: when `qmd update` and `qmd embed` run (boot, timers, debounce, before a search) and
//! keeping QMD's collections in step with the plan.

use memory_core::locks::LockExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use memory_core::error::{MemoryError, Result};
use tracing::{debug, info, warn};

use super::{write_state, Inner, QmdBackend, MIN_TIMEOUT};
use crate::collections::{self, Collection};
use crate::parse::{self, UpdateCounts};

/// What asked for an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// Start of the engine (not debounced; followed by `embed` when the mode needs vectors).
    Boot,
    /// The update timer (debounced).
    Interval,
    /// A search noticed results may be stale (debounced).
    Search,
    /// A search found memory files changed since the last update: it waits for this one (not debounced).
    Changed,
    /// An explicit sync (not debounced); `force` re-creates every collection.
    Sync { force: bool },
}

impl QmdBackend {
    /// The boot update (awaited when `update.waitForBootSync`, else in the background), then the update and
    /// embed timers.
    pub(super) async fn start_updates(&self) -> Result<()> {
        let (inner, backend) = (&self.inner, self);
        let (update_every, embed_every, mode) = (inner.cfg.update.interval, inner.cfg.update.embed_interval, inner.mode);
        if inner.cfg.update.on_boot {
            if inner.cfg.update.wait_for_boot_sync {
                inner.clone().update(Trigger::Boot).await?;
            } else {
                let i = inner.clone();
                backend.spawn(async move {
                    if let Err(e) = i.clone().update(Trigger::Boot).await {
                        warn!(error = %e, "qmd boot update failed");
                    }
                });
            }
        }
        if let Some(every) = update_every {
            let i = inner.clone();
            backend.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Err(e) = i.clone().update(Trigger::Interval).await {
                        warn!(error = %e, "qmd interval update failed");
                    }
                }
            });
        }
        if let (Some(every), true) = (embed_every, mode.needs_vectors()) {
            let i = inner.clone();
            backend.spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    if let Err(e) = i.embed().await {
                        warn!(error = %e, "qmd embed failed");
                    }
                }
            });
        }
        Ok(())
    }
}

impl Inner {
    pub(super) fn update_timeout(&self) -> Duration {
        self.cfg.update.update_timeout.max(MIN_TIMEOUT)
    }

    /// Make QMD's collections match the plan: remove stale ones, add missing ones (adding indexes them).
    pub(super) async fn ensure_collections(&self, force: bool) -> Result<bool> {
        let want = collections::plan(&self.workspace, &self.cfg, self.sessions.as_ref().map(|s| s.out.as_path()));
        let have = self.state.locked().registered.clone();
        if !force && want == have {
            return Ok(false);
        }
        if self.cfg.include_default_memory {
            let dir = self.workspace.join(memory_core::discovery::MEMORY_DIR);
            if !dir.exists() {
                std::fs::create_dir_all(&dir).map_err(|e| MemoryError::io_path("cannot create", &dir, e))?;
            }
        }
        let timeout = self.update_timeout();
        let mut registered: Vec<Collection> = have.iter().filter(|c| want.contains(c)).cloned().collect();
        let command_timeout = self.cfg.update.command_timeout.max(MIN_TIMEOUT);
        for c in &have {
            if force || !want.contains(c) {
                self.remove_collection(&c.name, command_timeout).await?;
                registered.retain(|r| r.name != c.name);
                // Keep the state file true to QMD at every step, so an interruption never leaves it lying.
                write_state(&self.home, &registered)?;
            }
        }
        for c in &want {
            if registered.contains(c) {
                continue;
            }
            let args = |c: &Collection| {
                vec![
                    "collection".to_string(),
                    "add".into(),
                    c.root.to_string_lossy().into_owned(),
                    "--name".into(),
                    c.name.clone(),
                    "--mask".into(),
                    c.mask.clone(),
                ]
            };
            match self.run("qmd collection add", args(c), timeout).await {
                Ok(_) => {}
                Err(e) if e.to_string().contains("already exists") => {
                    // QMD knows it from a run whose state file was lost: replace it.
                    self.remove_collection(&c.name, command_timeout).await?;
                    self.run("qmd collection add", args(c), timeout).await?;
                }
                Err(e) => return Err(e),
            }
            info!(name = %c.name, root = %c.root.display(), mask = %c.mask, "qmd collection added");
            registered.push(c.clone());
            write_state(&self.home, &registered)?;
        }
        self.state.locked().registered = registered;
        Ok(true)
    }

    pub(super) async fn remove_collection(&self, name: &str, timeout: Duration) -> Result<()> {
        match self.run("qmd collection remove", vec!["collection".into(), "remove".into(), name.into()], timeout).await {
            Ok(_) => Ok(()),
            Err(e) if e.to_string().to_ascii_lowercase().contains("not found") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Bring QMD's index in step with the files. Serialised: two updates never run at once. Unless `force`,
    /// an update finished less than `debounceMs` ago makes this a no-op (`None`).
    pub(super) async fn update(self: Arc<Self>, trigger: Trigger) -> Result<Option<UpdateCounts>> {
        let _guard = self.write_lock.lock().await;
        if matches!(trigger, Trigger::Interval | Trigger::Search) {
            let debounce = self.cfg.update.debounce;
            let recent = self.state.locked().last_update_done.is_some_and(|t| t.elapsed() < debounce);
            if recent {
                debug!(?trigger, "qmd update skipped (debounced)");
                return Ok(None);
            }
        }
        if trigger == Trigger::Changed {
            // An update that ran while this one waited for the lock may have covered the change already.
            let now = self.files_fingerprint();
            if self.state.locked().files_updated.as_deref() == Some(now.as_str()) {
                return Ok(None);
            }
        }
        let force = matches!(trigger, Trigger::Sync { force: true });
        let boot = trigger == Trigger::Boot;
        self.state.locked().update_running = true;
        // Taken before the update runs: a file changed while it runs is seen as changed by the next search.
        let files_before = self.files_fingerprint();
        let result = async {
            if let Some(s) = self.sessions.clone() {
                let r = tokio::task::spawn_blocking(move || crate::sessions::export(&s.src, &s.out, s.retention_days))
                    .await
                    .map_err(|e| MemoryError::Internal(format!("exporting transcripts: {e}")))?;
                if let Err(e) = r {
                    // Memory files are still worth updating; the transcripts stay as last exported.
                    warn!(error = %e, "cannot export session transcripts for qmd");
                }
            }
            self.ensure_collections(force).await?;
            let out = self.run("qmd update", vec!["update".into()], self.update_timeout()).await?;
            Ok::<_, MemoryError>(parse::parse_update(&out.stdout))
        }
        .await;
        let mut st = self.state.locked();
        st.update_running = false;
        st.updates += 1;
        st.last_update_done = Some(Instant::now());
        match &result {
            Ok(c) => {
                st.files_updated = Some(files_before);
                st.last_update_ms = Some(memory_core::now_ms());
                st.last_counts = Some(*c);
                st.last_update_error = None;
                info!(new = c.new, updated = c.updated, removed = c.removed, unchanged = c.unchanged, "qmd update done");
            }
            Err(e) => st.last_update_error = Some(e.to_string()),
        }
        drop(st);
        let counts = result?;
        if boot && self.mode.needs_vectors() {
            // Vectors are needed by this mode: embed right after the boot update, in the background.
            let me = self.clone();
            self.spawn(async move {
                if let Err(e) = me.embed().await {
                    warn!(error = %e, "qmd embed after boot failed");
                }
            });
        }
        Ok(Some(counts))
    }

    /// What the memory files are now, as a stat of each (transcripts follow their own thresholds).
    pub(super) fn files_fingerprint(&self) -> String {
        let mut text = String::new();
        for f in memory_core::discovery::discover(&self.roots) {
            text.push_str(&format!("{}\0{}\0{}\n", f.key, f.size, f.mtime_ms));
        }
        memory_core::sha256_hex(text.as_bytes())
    }

    /// Before a search (`sync.onSearch`): when a memory file was added, changed or removed since the last
    /// update, run `qmd update` first (bounded by its timeout), so the search sees it. QMD's CLI cannot update
    /// one file: this costs an update of the collections, which QMD keeps incremental by content hash.
    pub(super) async fn freshen(self: &Arc<Self>, warnings: &mut Vec<String>) {
        let now = self.files_fingerprint();
        if self.state.locked().files_updated.as_deref() == Some(now.as_str()) {
            return;
        }
        if let Err(e) = self.clone().update(Trigger::Changed).await {
            warn!(error = %e, "qmd update before search failed; answering from its index as it is");
            warnings.push(format!("memory files changed but qmd could not update its index ({e}); deleted files are left out"));
        }
    }

    pub(super) async fn embed(&self) -> Result<()> {
        let _guard = self.write_lock.lock().await;
        let timeout = self.cfg.update.embed_timeout.max(MIN_TIMEOUT);
        let r = self.run("qmd embed", vec!["embed".into()], timeout).await;
        let mut st = self.state.locked();
        match &r {
            Ok(_) => {
                st.last_embed_ms = Some(memory_core::now_ms());
                st.last_embed_error = None;
            }
            Err(e) => st.last_embed_error = Some(e.to_string()),
        }
        r.map(|_| ())
    }
}
