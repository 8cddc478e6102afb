//! Freshness on search: before answering, compare the files with the index and sync what changed into the live
//! index (never waiting for a rebuild), and vouch for hits of files that could not be synced.

use super::files::Files;
use super::*;
use crate::discovery::{ChangeFeed, ChangeJournal};
use crate::locks::LockExt;

/// How long a search waits for a sync that another task or process is running before it answers without the
/// files that changed (it never waits for a rebuild: it updates the live index itself meanwhile).
const FRESHEN_WAIT: Duration = super::LOCK_WAIT;

/// How long past its own wait for the provider a search on an index never built waits for another sync that is
/// building it: that sync stops waiting for the provider by the same time, then writes what it indexed.
const FIRST_BUILD_GRACE: Duration = super::LOCK_WAIT;

/// Workspaces with at least this many files free the freshness check's lists on a blocking thread.
const PARALLEL_FREE_MIN: usize = 4096;

/// A check looks at the files the change journal named alone when they are at most this many (more: a bulk
/// write, for which listing every file costs little beside syncing them).
const NAMED_CHECK_MAX: usize = 256;

/// What the engine knows of changes it has not checked yet: its change journal and the files a check must read
/// by content. The one owner of the decision what a search's freshness check looks at ([`Freshness::begin`]).
#[derive(Default)]
pub(super) struct Freshness {
    journal: Mutex<Journal>,
    /// Keys of files a search could not sync (its sync failed): the next search syncs them whatever their size
    /// and mtime say. (Files a host announces join the journal's named files: `Journal::announce`.)
    hinted: Mutex<HashSet<String>>,
}

/// What a freshness check is to look at ([`Freshness::begin`]).
pub(super) struct Check {
    pub(super) plan: CheckPlan,
    /// Keys read by content whatever their stat says: failed before, announced, or named by the journal.
    pub(super) hinted: HashSet<String>,
    /// The paths the journal named, for a check of them alone ([`CheckPlan::Named`]).
    pub(super) named: Vec<PathBuf>,
}

impl Freshness {
    /// Start a check: what the journal saw since the last one, and the keys that must be read by content.
    pub(super) fn begin(&self, files: &Files) -> Check {
        let mut hinted = std::mem::take(&mut *self.hinted.locked());
        let (plan, named) = {
            let mut journal = self.journal.locked();
            let plan = journal.plan(files.roots(), files.sessions_dir(), !hinted.is_empty());
            (plan, journal.take_files())
        };
        // What the journal saw written is checked by content, as a host's announcement is.
        hinted.extend(named.iter().map(|p| files.key_of_changed(p)));
        Check { plan, hinted, named }
    }

    /// A check that started at `epoch` found the index in step with the files (or brought it there).
    pub(super) fn in_step_at(&self, epoch: u64) {
        self.journal.locked().in_step_at(epoch);
    }

    /// A check could not sync these keys: the next one reads them by content.
    pub(super) fn retry(&self, hinted: HashSet<String>) {
        self.hinted.locked().extend(hinted);
    }

    /// The live index was swapped: what the last check found in step was the old one.
    pub(super) fn forget(&self) {
        self.journal.locked().forget();
    }

    /// A host announced `paths` (absolute) as changed ([`Journal::announce`]).
    pub(super) fn announce(&self, paths: impl IntoIterator<Item = PathBuf>) {
        self.journal.locked().announce(paths);
    }

    /// The files announced since the last check, for a sync of every file to read by content.
    pub(super) fn take_announced(&self) -> Vec<PathBuf> {
        self.journal.locked().take_announced()
    }

    /// A feed of the journal's changes for a host's watcher ([`Journal::subscribe`]).
    pub(super) fn subscribe(&self, files: &Files) -> Option<ChangeFeed> {
        self.journal.locked().subscribe(files.roots(), files.sessions_dir())
    }

    /// The keys the next check reads by content whatever their stat says (what `status` counts as stale).
    pub(super) fn pending_hints(&self, files: &Files) -> HashSet<String> {
        let mut hinted = self.hinted.locked().clone();
        hinted.extend(self.journal.locked().announced().iter().map(|p| files.key_of_changed(p)));
        hinted
    }
}

/// The change journal ([`ChangeJournal`]) of an engine that searches more than once. A search that finds it
/// quiet since a check that found the index in step with the files skips the check (a stat per file).
#[derive(Default)]
pub(super) struct Journal {
    journal: Option<ChangeJournal>,
    /// Full checks so far: the journal starts with the second, so a one-shot search never pays for its watches.
    checks: u32,
    /// It could not be started or failed (platform, limits): every search checks the files.
    unavailable: bool,
    /// Bumped for every change the journal reports, and when it starts.
    epoch: u64,
    /// Files the journal's events named since the last check: checked whatever their size and times say (a
    /// rewrite within one tick of the file clock keeps both).
    files: Vec<PathBuf>,
    /// The newest epoch whose check found the index in step with the files.
    in_step: Option<u64>,
    /// Files a host announced as changed since the last check ([`Journal::announce`]; the watcher's events).
    announced: Vec<PathBuf>,
    /// More were announced than [`NAMED_CHECK_MAX`]: the next check looks at every file.
    announced_too_many: bool,
}

/// What a search does about freshness.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CheckPlan {
    /// Nothing changed since a check found the index in step.
    Skip,
    /// Since a check found the index in step, only the files the journal named changed: check them alone.
    Named(u64),
    /// Check every file; a check that finds the index in step answers for this epoch.
    Run(u64),
}

impl Journal {
    /// The next check does not trust the journal (the index was swapped, a host said something changed).
    pub(super) fn forget(&mut self) {
        self.in_step = None;
    }

    pub(super) fn plan(&mut self, roots: &MemoryRoots, sessions_dir: Option<&Path>, must_check: bool) -> CheckPlan {
        // Announced files are named files like the journal's own: exact paths, checked by content.
        let announced = std::mem::take(&mut self.announced);
        let must_check = must_check || std::mem::take(&mut self.announced_too_many);
        let was_announced = !announced.is_empty();
        self.files.extend(announced);
        if let Some(journal) = self.journal.as_ref() {
            let mut named_only = false;
            let seen = match journal.take_changes() {
                Ok(false) => Ok(None),
                Ok(true) => Ok(Some(journal.take_changed_files())),
                Err(e) => Err(e),
            };
            match seen {
                Ok(None) if !was_announced => {}
                Ok(named) => {
                    let was_in_step = self.in_step == Some(self.epoch);
                    self.epoch += 1;
                    let complete = match named {
                        Some(named) => {
                            self.files.extend(named.paths);
                            named.complete
                        }
                        None => true,
                    };
                    self.files.sort_unstable();
                    self.files.dedup();
                    named_only = was_in_step && complete && self.files.len() <= NAMED_CHECK_MAX;
                }
                Err(e) => {
                    debug!(error = %e, "change journal failed; every search checks the files");
                    self.journal = None;
                    self.unavailable = true;
                    self.in_step = None;
                }
            }
            if !must_check && self.journal.is_some() && self.in_step == Some(self.epoch) {
                return CheckPlan::Skip;
            }
            if !must_check && named_only {
                return CheckPlan::Named(self.epoch);
            }
        } else if !self.unavailable {
            self.checks += 1;
            if self.checks >= 2 {
                // Started before this check lists the files: what changes from here on is in the journal.
                self.start(roots, sessions_dir);
            }
        }
        CheckPlan::Run(self.epoch)
    }

    fn start(&mut self, roots: &MemoryRoots, sessions_dir: Option<&Path>) {
        match ChangeJournal::start(roots, sessions_dir) {
            Some(j) => {
                self.journal = Some(j);
                self.epoch += 1;
            }
            None => self.unavailable = true,
        }
    }

    /// A feed of the journal's changes for a host's watcher, the journal started now if it was not yet (the
    /// searches' checks then trust it from the next one that finds the index in step). `None` where it cannot
    /// run: the watcher watches on its own.
    pub(super) fn subscribe(&mut self, roots: &MemoryRoots, sessions_dir: Option<&Path>) -> Option<ChangeFeed> {
        if self.journal.is_none() && !self.unavailable {
            self.start(roots, sessions_dir);
        }
        match self.journal.as_ref()?.subscribe() {
            Ok(feed) => Some(feed),
            Err(e) => {
                warn!(error = %e, "cannot feed the watcher from the change journal");
                None
            }
        }
    }

    /// A host announced `paths` (absolute) as changed: the next check looks at them by content, and at them alone
    /// when the journal vouches for every other file (as for the files its own events name). Bounded: past
    /// [`NAMED_CHECK_MAX`] files the next check looks at every file instead.
    pub(super) fn announce(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        if self.announced_too_many {
            return;
        }
        self.announced.extend(paths);
        if self.announced.len() > NAMED_CHECK_MAX {
            self.announced = Vec::new();
            self.announced_too_many = true;
        }
    }

    /// The files announced since the last check, for a sync of every file to read by content (it answers for
    /// them, as a check would).
    pub(super) fn take_announced(&mut self) -> Vec<PathBuf> {
        self.announced_too_many = false;
        std::mem::take(&mut self.announced)
    }

    /// The files announced and not checked yet (what `status` counts as stale whatever their stat says).
    pub(super) fn announced(&self) -> &[PathBuf] {
        &self.announced
    }

    /// The files the journal named since the last call.
    pub(super) fn take_files(&mut self) -> Vec<PathBuf> {
        std::mem::take(&mut self.files)
    }

    /// A check that started at `epoch` found the index in step (or brought it there).
    pub(super) fn in_step_at(&mut self, epoch: u64) {
        if self.journal.is_some() {
            self.in_step = Some(self.in_step.map_or(epoch, |e| e.max(epoch)));
        }
    }
}

impl IndexedBackend {
    /// Before a search (`sync.onSearch`): compare the files on disk with the index (a stat per file, one read of
    /// the file records) and sync what changed, so the search sees what was just written, rewritten or deleted.
    /// A rebuild in progress is not waited for: the changed files go into the live index meanwhile. Returns the
    /// files the index could not be brought up to date for (the search vouches for their hits itself).
    pub(super) async fn freshen(&self, warnings: &mut Vec<String>, deadline: tokio::time::Instant) -> Result<Staleness> {
        self.follow_live().await?;
        let store = self.store();
        if !self.live.known_indexed() && store.identity().await?.is_none() && !self.build_first_index(warnings, deadline).await? {
            return Ok(Staleness::default());
        }
        self.live.mark_indexed();
        if !self.config.memory.search.sync.on_search {
            return Ok(Staleness::default());
        }
        let Check { plan, hinted, named } = self.freshness.begin(&self.files);
        let (epoch, only_named) = match plan {
            CheckPlan::Skip => return Ok(Staleness::default()),
            CheckPlan::Named(epoch) => (epoch, self.files.named(&named)),
            CheckPlan::Run(epoch) => (epoch, None),
        };
        // The stats of the files and the read of the records overlap: together they are the check's cost.
        let started = std::time::Instant::now();
        let (files, stored, listed_in, read_in, named_only) = match only_named {
            Some((files, keys)) => {
                let stored = store.file_records(&keys).await?;
                (files, stored, started.elapsed(), started.elapsed(), true)
            }
            None => {
                let discover = self.files.discovery();
                let listing = tokio::task::spawn_blocking(move || {
                    let files = discover();
                    (files, started.elapsed())
                });
                let stored = store.files().await;
                let read_in = started.elapsed();
                let (files, listed_in) = listing.await.map_err(|e| MemoryError::Internal(format!("file discovery failed: {e}")))?;
                (files, stored?, listed_in, read_in, false)
            }
        };
        let mut verify = Vec::new();
        let mut stale = stale_for_search(&files, &stored, self.config.memory.search.sync.sessions.delta_bytes, &hinted, &mut verify);
        debug!(
            files = files.len(),
            named_only,
            listed_ms = listed_in.as_secs_f64() * 1e3,
            records_ms = read_in.as_secs_f64() * 1e3,
            compared_ms = started.elapsed().as_secs_f64() * 1e3,
            "freshness check"
        );
        // Files whose content is what the index holds but whose record still asks to be read at each check: a
        // sync settles them, and they are not stale (their hits are current).
        let mut settling: Vec<FileKey> = Vec::new();
        if !verify.is_empty() {
            // Read moments after they were written: same size and mtime do not prove same content.
            for (f, record) in verify {
                match self.prepare(f, Some(record)) {
                    // Same content, still within the settle window: checked again next time.
                    Prepared::Touched(r) if r.state().is_unsettled() => {}
                    // Still unreadable: nothing a sync could add.
                    Prepared::Skipped { record, .. } if matches!(record.state(), FileState::Unreadable { .. }) => {}
                    // Same content and settled now: sync it once, so that its record stops asking for checks.
                    Prepared::Touched(_) => settling.push((f.source, f.key.clone())),
                    // Anything else changed.
                    _ => {
                        stale.changed.insert((f.source, f.key.clone()));
                    }
                }
            }
        }
        if stale.is_empty() && settling.is_empty() {
            // Freeing a record and a listed file per memory file is a few ms at 20,000 notes: done beside the
            // search rather than before it.
            if files.len() >= PARALLEL_FREE_MIN {
                drop(tokio::task::spawn_blocking(move || drop((files, stored))));
            }
            self.freshness.in_step_at(epoch);
            return Ok(stale);
        }
        debug!(
            changed = stale.changed.len(),
            removed = stale.removed.len(),
            settling = settling.len(),
            "files changed since the last sync; syncing before the search"
        );
        // Only those files are synced: the others are as indexed. Notes still waiting for their vectors (a first
        // build or an outage left them) are found by their words; completing them is for `memory index` and the
        // watcher, not for a search, which would spend its wait on them before the note just written.
        let keys: Vec<FileKey> = stale.changed.iter().chain(&stale.removed).cloned().chain(settling.iter().cloned()).collect();
        let wanted: HashSet<(Source, &str)> = keys.iter().map(|(source, key)| (*source, key.as_str())).collect();
        let files: Vec<MemoryFile> = files.into_iter().filter(|f| wanted.contains(&(f.source, f.key.as_str()))).collect();
        let scope = SyncScope::Named { files, keys };
        match self.sync_for_search(scope, deadline).await {
            Ok(None) => {
                self.freshness.in_step_at(epoch);
                Ok(Staleness::default())
            }
            Ok(Some(pending)) => {
                self.freshness.in_step_at(epoch);
                warnings.push(pending);
                Ok(Staleness::default())
            }
            // A damaged index is repaired by the caller, not answered from.
            Err(why) if why.kind() == crate::ErrorKind::CorruptIndex => Err(why),
            Err(why) => {
                if stale.is_empty() {
                    // Only records to settle: the index answers as current; the next check settles them.
                    debug!(error = %why, settling = settling.len(), "settling file records failed; the index is current");
                } else {
                    warn!(error = %why, "sync before search failed; answering from the current index");
                    warnings.push(not_in_index_warning(&stale, &why));
                }
                self.freshness.retry(hinted);
                Ok(stale)
            }
        }
    }

    /// A search on an index never built builds it before answering (by its words at least: the provider is
    /// waited for until `deadline`). Another sync of this engine may be building it already (the watcher's
    /// first sync, a search sent at the same moment): that one is waited for, up to the search's own wait and
    /// [`FIRST_BUILD_GRACE`] for its commit, and what it built answers. Returns whether the usual check of the
    /// files still has to run (it does when the index was built by the sync waited for). Never an error for
    /// being busy: a search that cannot get the index answers from what it holds, and `warnings` says so.
    async fn build_first_index(&self, warnings: &mut Vec<String>, deadline: tokio::time::Instant) -> Result<bool> {
        let wait = deadline.saturating_duration_since(tokio::time::Instant::now()) + FIRST_BUILD_GRACE;
        let Ok(_guard) = tokio::time::timeout(wait, self.writer.sync_lock()).await else {
            self.follow_live().await?;
            let built = self.store().identity().await?.is_some();
            warnings.push(if built {
                "another sync of this engine is still updating the new index; answering from it as it is".to_string()
            } else {
                format!(
                    "the index is still being built by another sync of this engine (waited {} s); this answer comes from what it holds so far",
                    wait.as_secs()
                )
            });
            return Ok(false);
        };
        self.follow_live().await?;
        if self.store().identity().await?.is_some() {
            self.live.mark_indexed();
            return Ok(true);
        }
        let _writer = match super::writer::Writer::writer_lock(self.storage.as_ref(), "first index").await {
            Ok(w) => w,
            Err(e) if e.kind() == crate::ErrorKind::Unavailable => {
                warnings.push(format!("the index could not be built before this search: {e}; this answer comes from what it holds so far"));
                return Ok(false);
            }
            Err(e) => return Err(e),
        };
        let embed_wait = crate::EmbedWait::AtMost(deadline.saturating_duration_since(tokio::time::Instant::now()));
        self.sync_locked(SyncOptions { embed_wait, ..SyncOptions::default() }).await?;
        self.live.mark_indexed();
        Ok(false)
    }

    /// Sync `files` into the live index for a search. Waits (at most [`FRESHEN_WAIT`]) for a sync another task
    /// or process is running, never for a rebuild. Returns a warning when a rebuild is pending or running.
    pub(super) async fn sync_for_search(&self, files: SyncScope, embed_deadline: tokio::time::Instant) -> Result<Option<String>> {
        let mut poll = super::patience::LockPoll::within(FRESHEN_WAIT);
        let busy = |what: &str| MemoryError::Unavailable(format!("{what} is still updating the index"));
        // This engine's own sync lock: free, or held by a short sync (wait) or by a rebuild (update live beside it).
        let _guard = loop {
            if self.writer.rebuilding() {
                let _patch = self.writer.patch().await;
                if self.writer.rebuilding() {
                    self.sync_live(files, embed_deadline).await?;
                    return Ok(Some(
                        "the index is being rebuilt for new settings; searching the current index, updated with the files that changed".into(),
                    ));
                }
                continue;
            }
            if let Some(g) = self.writer.try_sync_lock() {
                break g;
            }
            if poll.expired() {
                return Err(busy("another sync of this engine"));
            }
            poll.pause().await;
        };
        // Other processes: a writer's syncs are short; a rebuild there holds the lock for long, so give up then.
        let _writer = loop {
            match self.storage.writer_lock(false).await {
                Ok(w) => break w,
                Err(e) if e.kind() == crate::ErrorKind::Unavailable && !poll.expired() => poll.pause().await,
                Err(e) if e.kind() == crate::ErrorKind::Unavailable => return Err(busy("another process")),
                Err(e) => return Err(e),
            }
        };
        let pending = self.sync_live(files, embed_deadline).await?;
        Ok(pending.then(|| "the index was built with other settings than the configuration now asks for; searching it as it is (updated with the files that changed) until `memory index` rebuilds it".into()))
    }

    /// Sync `files` into the live index with its own identity's settings: when a rebuild is pending, changed
    /// files get vectors only if the live index's embedding settings are still the provider's (else they are
    /// found by their words until the rebuild). The caller holds the locks. Returns whether a rebuild is pending.
    pub(super) async fn sync_live(&self, files: SyncScope, embed_deadline: tokio::time::Instant) -> Result<bool> {
        let live = self.store();
        let desired = self.desired_identity();
        let current = live.identity().await?;
        let pending = current.as_ref().is_some_and(|c| !c.same_settings(&desired));
        let planned = match &current {
            Some(c) if pending => c.provider_fingerprint.clone(),
            _ => desired.provider_fingerprint.clone(),
        };
        let result = self.sync_into(&live, &live, planned.as_deref(), files, super::patience::Bound::Until(embed_deadline).into()).await;
        self.live.forget_fingerprint();
        let report = result?;
        if !pending {
            live.set_meta(META_LAST_SYNC, &crate::now_ms().to_string()).await?;
        }
        debug!(?report, pending, "synced before a search");
        Ok(pending)
    }

    /// Drop candidates the index cannot vouch for: of files deleted since the last sync, and of changed files
    /// whose current text no longer contains the candidate's (a rewrite; an append keeps the old text valid).
    pub(super) fn vouch(&self, stale: &Staleness, candidates: Vec<Candidate>) -> Vec<Candidate> {
        if stale.is_empty() {
            return candidates;
        }
        let mut texts: HashMap<FileKey, Option<String>> = HashMap::new();
        candidates
            .into_iter()
            .filter(|c| {
                let key = (c.source, c.path.clone());
                if stale.removed.contains(&key) {
                    return false;
                }
                if !stale.changed.contains(&key) || c.source == Source::Sessions {
                    return true;
                }
                let text = texts
                    .entry(key)
                    .or_insert_with(|| read_text(&self.files.roots().abs_path(&c.path), self.config.memory.search.max_file_bytes).ok());
                text.as_deref().is_some_and(|t| t.contains(c.text.trim()))
            })
            .collect()
    }

    /// Files the next search would sync first (the freshness check's rule, without reading any file).
    pub(super) fn count_stale(&self, stored: &[FileRecord]) -> usize {
        let files = self.files.all();
        let hinted = self.freshness.pending_hints(&self.files);
        let mut unverified = Vec::new();
        stale_for_search(&files, stored, self.config.memory.search.sync.sessions.delta_bytes, &hinted, &mut unverified).len()
    }
}

/// What a search says when the files it found changed could not be synced: the changed notes by name (the first
/// few), so that the agent can read them with `memory_get` while the index cannot take them.
fn not_in_index_warning(stale: &Staleness, why: &MemoryError) -> String {
    const NAMED: usize = 3;
    let mut names: Vec<&str> = stale.changed.iter().filter(|(source, _)| *source == Source::Memory).map(|(_, path)| path.as_str()).collect();
    names.sort_unstable();
    names.truncate(NAMED);
    let unnamed = stale.changed.len() - names.len();
    let files = |n: usize| if n == 1 { "1 file".to_string() } else { format!("{n} files") };
    let mut parts = Vec::new();
    if !stale.changed.is_empty() {
        let plural = stale.changed.len() > 1;
        let who = match (names.split_last(), unnamed) {
            (None, n) => format!("{} changed", files(n)),
            (Some((last, [])), 0) => format!("{last} changed"),
            (Some((last, rest)), 0) => format!("{} and {last} changed", rest.join(", ")),
            (Some(_), n) => format!("{} and {n} more changed", names.join(", ")),
        };
        let (is, them) = if plural { ("are", "them") } else { ("is", "it") };
        let read = if names.is_empty() { String::new() } else { format!(": read {them} with memory_get") };
        parts.push(format!("{who} and {is} not in the index yet ({why}){read}; the old text is not returned"));
    }
    if !stale.removed.is_empty() {
        let n = stale.removed.len();
        let deleted = if n == 1 { "1 deleted file is".to_string() } else { format!("{n} deleted files are") };
        let they = if n == 1 { "it is" } else { "they are" };
        parts.push(format!("{deleted} still in the index ({why}); {they} not returned"));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stale(changed: &[(Source, &str)], removed: usize) -> Staleness {
        Staleness {
            changed: changed.iter().map(|(s, p)| (*s, p.to_string())).collect(),
            removed: (0..removed).map(|i| (Source::Memory, format!("memory/gone-{i}.md"))).collect(),
        }
    }

    #[test]
    fn a_search_names_the_notes_the_index_could_not_take() {
        let why = MemoryError::Unavailable("database or disk is full".into());
        let m = Source::Memory;
        assert_eq!(
            not_in_index_warning(&stale(&[(m, "memory/2026-12-04.md")], 0), &why),
            format!("memory/2026-12-04.md changed and is not in the index yet ({why}): read it with memory_get; the old text is not returned")
        );
        let two = not_in_index_warning(&stale(&[(m, "memory/b.md"), (m, "memory/a.md")], 0), &why);
        assert!(two.starts_with("memory/a.md and memory/b.md changed and are not in the index yet ("), "{two}");
        assert!(two.contains("read them with memory_get"), "{two}");
        let many: Vec<(Source, String)> = (0..6).map(|i| (m, format!("memory/n{i}.md"))).collect();
        let many: Vec<(Source, &str)> = many.iter().map(|(s, p)| (*s, p.as_str())).collect();
        assert_eq!(
            not_in_index_warning(&stale(&many, 0), &why),
            format!("memory/n0.md, memory/n1.md, memory/n2.md and 3 more changed and are not in the index yet ({why}): read them with memory_get; the old text is not returned")
        );
        // Transcripts are not named (memory_get does not read them); deletions are counted.
        assert_eq!(
            not_in_index_warning(&stale(&[(Source::Sessions, "sessions/a.jsonl")], 2), &why),
            format!("1 file changed and is not in the index yet ({why}); the old text is not returned; 2 deleted files are still in the index ({why}); they are not returned")
        );
        assert_eq!(not_in_index_warning(&stale(&[], 1), &why), format!("1 deleted file is still in the index ({why}); it is not returned"));
    }
}
