//! What changed between the files on disk and the index: pure functions over the discovered files and the
//! stored records, shared by the sync (what to read) and the freshness check before a search (is a sync needed).

use std::collections::HashSet;

// Fx hashing: these maps hold one entry per memory file and are built before every search.
use rustc_hash::{FxHashMap, FxHashSet};

use crate::discovery::MemoryFile;
use crate::store::{FileRecord, FileState};
use crate::types::Source;

pub(crate) type FileKey = (Source, String);

/// File times tick coarsely (a few ms on Linux, 2 s on FAT): a file rewritten within the same tick as it was
/// read, with the same size, would look unchanged for ever. Content read less than this after its file's mtime
/// is recorded as not settled ([`FileState::Indexed`]), and such a record is trusted only after its content is
/// checked again (git's "racily clean" entries).
pub(crate) const SETTLE_MS: i64 = 2_000;

/// The record of content `hash` of file `f` (its mtime and [`StatId`] as listed), read at `now_ms`.
pub(crate) fn indexed_state<'a>(hash: &'a str, f: &MemoryFile, now_ms: i64) -> FileState<'a> {
    FileState::Indexed { hash, settled: now_ms.saturating_sub(f.mtime_ms) >= SETTLE_MS, stat: Some(f.stat) }
}

/// Does `r` still describe `f` by its metadata alone: same size and mtime, and a record that can be trusted to
/// mean "same content" (fully indexed, settled, readable) whose inode and ctime are the file's. A record that
/// kept no inode and ctime (written by an older version) is not trusted: its file's content is checked once.
fn is_unchanged(f: &MemoryFile, r: &FileRecord) -> bool {
    if r.size != f.size || r.mtime_ms != f.mtime_ms {
        return false;
    }
    let state = r.state();
    match state {
        FileState::Pending | FileState::Unreadable { .. } => false,
        FileState::Indexed { settled: false, .. } => false,
        FileState::Indexed { .. } => state.same_stat(f.stat) == Some(true),
        FileState::Skipped { .. } | FileState::Session(_) => true,
    }
}

/// Is `f` indexed by its words as it is on disk (same size and mtime), only waiting for its vectors?
fn is_waiting(f: &MemoryFile, r: &FileRecord) -> bool {
    r.size == f.size && r.mtime_ms == f.mtime_ms && matches!(r.state(), FileState::Pending)
}

/// The work of one sync.
pub(crate) struct SyncPlan<'a> {
    /// New files and files whose size or mtime moved (or whose embeddings are still missing), with their record.
    pub work: Vec<(&'a MemoryFile, Option<&'a FileRecord>)>,
    /// Indexed files no longer on disk.
    pub removals: Vec<FileKey>,
    pub unchanged: usize,
}

/// Plan a sync: a file is unchanged when its size and mtime are the recorded ones and it is fully indexed (a
/// record with an empty hash still waits for embeddings; with `leave_waiting`, such a file is left as it is, as
/// [`stale_for_search`] leaves it), unless a host announced it (`announced` keys: read by content whatever their
/// stat says, as [`stale_for_search`] counts them).
pub(crate) fn plan_sync<'a>(files: &'a [MemoryFile], stored: &'a [FileRecord], announced: &HashSet<String>, leave_waiting: bool) -> SyncPlan<'a> {
    let by_key = records_by_key(stored);
    let mut seen: FxHashSet<(Source, &str)> = FxHashSet::with_capacity_and_hasher(files.len(), Default::default());
    let mut work = Vec::new();
    let mut unchanged = 0;
    for f in files {
        seen.insert((f.source, f.key.as_str()));
        let old = by_key.get(&(f.source, f.key.as_str())).copied();
        match old {
            Some(o) if (is_unchanged(f, o) || leave_waiting && is_waiting(f, o)) && !announced.contains(&f.key) => unchanged += 1,
            _ => work.push((f, old)),
        }
    }
    let removals = stored.iter().filter(|r| !seen.contains(&(r.source, r.path.as_str()))).map(|r| (r.source, r.path.clone())).collect();
    SyncPlan { work, removals, unchanged }
}

fn records_by_key(stored: &[FileRecord]) -> FxHashMap<(Source, &str), &FileRecord> {
    stored.iter().map(|r| ((r.source, r.path.as_str()), r)).collect()
}

/// Files a search cannot answer for from the index as it is.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Staleness {
    /// On disk with other content than indexed (or not indexed at all).
    pub changed: HashSet<FileKey>,
    /// Indexed but no longer on disk.
    pub removed: HashSet<FileKey>,
}

impl Staleness {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.removed.is_empty()
    }

    pub fn len(&self) -> usize {
        self.changed.len() + self.removed.len()
    }
}

/// What the next search must sync first. Unlike [`plan_sync`] it ignores what a sync would only complete (a
/// file waiting for embeddings is searchable by its words), and a transcript that grew by less than
/// `session_delta_bytes` waits for its thresholds as in OpenClaw; a new, removed, truncated or rotated
/// transcript counts at once. `hinted` keys (changes a host announced) count whatever their size and mtime say.
///
/// Files whose record is unsettled but whose size and mtime match go to `verify`, with that record: the caller
/// compares their content with it and adds them to `changed` when it differs.
pub(crate) fn stale_for_search<'a>(
    files: &'a [MemoryFile],
    stored: &'a [FileRecord],
    session_delta_bytes: u64,
    hinted: &HashSet<String>,
    verify: &mut Vec<(&'a MemoryFile, &'a FileRecord)>,
) -> Staleness {
    use std::cmp::Ordering;
    // A merge of the two lists in key order rather than hash maps of both: this runs before every search that
    // checks, at 20,000 notes the maps were a tenth of the check. Discovery lists in key order and a store
    // usually does too; either is sorted here when it does not.
    let files = in_key_order(files, |f| (f.source, f.key.as_str()));
    let stored = in_key_order(stored, |r| (r.source, r.path.as_str()));
    let mut out = Staleness::default();
    let (mut on_disk, mut records) = (files.into_iter().peekable(), stored.into_iter().peekable());
    loop {
        // Which list holds the lower key next (a file alone: new; a record alone: removed; both: compare).
        let order = match (on_disk.peek(), records.peek()) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(f), Some(r)) => (f.source, f.key.as_str()).cmp(&(r.source, r.path.as_str())),
        };
        if order == Ordering::Greater {
            let r = records.next().expect("peeked");
            out.removed.insert((r.source, r.path.clone()));
            continue;
        }
        let f = on_disk.next().expect("peeked");
        let record = if order == Ordering::Equal { records.next() } else { None };
        if file_changed(f, record, session_delta_bytes, hinted, verify) {
            out.changed.insert((f.source, f.key.clone()));
        }
    }
    out
}

/// `items` as references sorted by `key` (no sort when they already are).
fn in_key_order<'a, T, K: Ord + 'a>(items: &'a [T], key: impl Fn(&'a T) -> K) -> Vec<&'a T> {
    let mut refs: Vec<&T> = items.iter().collect();
    if !refs.windows(2).all(|w| key(w[0]) <= key(w[1])) {
        refs.sort_by_key(|a| key(*a));
    }
    refs
}

/// Has file `f` changed since its `record` (none: never indexed)? A record read moments after its file was
/// written, or of a file that could not be read, goes to `verify` with its file: same size and mtime do not prove
/// same content.
fn file_changed<'a>(
    f: &'a MemoryFile,
    record: Option<&'a FileRecord>,
    session_delta_bytes: u64,
    hinted: &HashSet<String>,
    verify: &mut Vec<(&'a MemoryFile, &'a FileRecord)>,
) -> bool {
    match record {
        None => true,
        Some(_) if hinted.contains(&f.key) => true,
        Some(r) if r.size == f.size && r.mtime_ms == f.mtime_ms => {
            let state = r.state();
            match state.same_stat(f.stat) {
                // Rewritten (or chmod'ed, linked, renamed over) with size and mtime kept: the next sync reads it.
                Some(false) => return true,
                // A record from before inodes and ctimes were kept: its content is checked once.
                None if state.content_hash().is_some() => verify.push((f, r)),
                _ if state.is_unsettled() || matches!(state, FileState::Unreadable { .. }) => verify.push((f, r)),
                _ => {}
            }
            false
        }
        Some(r) if f.source == Source::Sessions => match r.state() {
            // Grown: only once past the byte threshold (the message threshold is checked by the sync).
            FileState::Session(st) if f.size >= st.bytes => f.size - st.bytes >= session_delta_bytes.max(1),
            // Shrunk (truncated or rotated), or never read completely.
            _ => true,
        },
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::StatId;
    use crate::sessions::SessionState;
    use std::path::PathBuf;

    fn file(source: Source, key: &str, size: u64, mtime: i64) -> MemoryFile {
        MemoryFile { source, key: key.into(), abs_path: PathBuf::from(format!("/ws/{key}")), size, mtime_ms: mtime, stat: STAT }
    }

    /// The inode and ctime every test file has (`record` gives indexed records the same, unless one is given).
    const STAT: StatId = StatId { ctime_ns: 7, ino: 42 };

    fn record(source: Source, key: &str, hash: &str, size: u64, mtime: i64) -> FileRecord {
        let hash = match FileState::parse(hash) {
            FileState::Indexed { hash: h, settled, stat: None } => FileState::Indexed { hash: h, settled, stat: Some(STAT) }.to_stored(),
            _ => hash.to_string(),
        };
        FileRecord { source, path: key.into(), hash, size, mtime_ms: mtime }
    }

    fn keys(set: &HashSet<FileKey>) -> Vec<&str> {
        let mut v: Vec<&str> = set.iter().map(|(_, k)| k.as_str()).collect();
        v.sort();
        v
    }

    #[test]
    fn sync_plan_reads_new_moved_and_unembedded_files_and_removes_the_gone() {
        let files = vec![
            file(Source::Memory, "MEMORY.md", 10, 1),
            file(Source::Memory, "memory/a.md", 20, 2),
            file(Source::Memory, "memory/b.md", 30, 3),
            file(Source::Memory, "memory/new.md", 5, 5),
        ];
        let stored = vec![
            record(Source::Memory, "MEMORY.md", "h", 10, 1),
            record(Source::Memory, "memory/a.md", "h", 20, 9),
            record(Source::Memory, "memory/b.md", "", 30, 3),
            record(Source::Memory, "memory/gone.md", "h", 1, 1),
        ];
        let plan = plan_sync(&files, &stored, &HashSet::new(), false);
        let work: Vec<&str> = plan.work.iter().map(|(f, _)| f.key.as_str()).collect();
        assert_eq!(work, ["memory/a.md", "memory/b.md", "memory/new.md"]);
        assert!(plan.work[2].1.is_none());
        assert_eq!(plan.unchanged, 1);
        assert_eq!(plan.removals, vec![(Source::Memory, "memory/gone.md".to_string())]);
    }

    #[test]
    fn staleness_ignores_pending_embeddings_and_small_transcript_growth() {
        let session = SessionState { bytes: 1000, records: 3, messages: 3, prefix_hash: "p".into() }.encode();
        let files = vec![
            file(Source::Memory, "memory/pending.md", 30, 3),
            file(Source::Memory, "memory/same.md", 10, 1),
            file(Source::Memory, "memory/edited.md", 11, 2),
            file(Source::Sessions, "sessions/small.jsonl", 1100, 9),
            file(Source::Sessions, "sessions/big.jsonl", 1000 + 200_000, 9),
            file(Source::Sessions, "sessions/rotated.jsonl", 400, 9),
            file(Source::Sessions, "sessions/new.jsonl", 10, 9),
        ];
        let stored = vec![
            record(Source::Memory, "memory/pending.md", "", 30, 3),
            record(Source::Memory, "memory/same.md", "h", 10, 1),
            record(Source::Memory, "memory/edited.md", "h", 10, 1),
            record(Source::Memory, "memory/deleted.md", "h", 10, 1),
            record(Source::Sessions, "sessions/small.jsonl", &session, 1000, 1),
            record(Source::Sessions, "sessions/big.jsonl", &session, 1000, 1),
            record(Source::Sessions, "sessions/rotated.jsonl", &session, 1000, 1),
            record(Source::Sessions, "sessions/deleted.jsonl", &session, 1000, 1),
        ];
        let s = stale_for_search(&files, &stored, 100_000, &HashSet::new(), &mut Vec::new());
        assert_eq!(keys(&s.changed), ["memory/edited.md", "sessions/big.jsonl", "sessions/new.jsonl", "sessions/rotated.jsonl"]);
        assert_eq!(keys(&s.removed), ["memory/deleted.md", "sessions/deleted.jsonl"]);
        assert_eq!(s.len(), 6);
    }

    /// The merge in key order finds what a lookup of every file in every record finds, whatever order either
    /// list comes in (a store need not list its records sorted) and whatever keys they share.
    #[test]
    fn the_merge_finds_what_a_lookup_finds_in_any_order() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        for _ in 0..300 {
            let (mut files, mut stored) = (Vec::new(), Vec::new());
            for i in 0..next(40) {
                let source = if next(4) == 0 { Source::Sessions } else { Source::Memory };
                // Keys that sort across both sources and across "a.md" / "a.md.md" / "a/…" boundaries.
                let key = format!("{}/{}{}", source.as_str(), ["a", "a.md", "b", "a/c", "é", "Z"][next(6) as usize], i);
                let (size, mtime) = (next(3), next(3) as i64);
                match next(4) {
                    0 => files.push(file(source, &key, size, mtime)),
                    1 => stored.push(record(source, &key, ["h", "", "~h"][next(3) as usize], size, mtime)),
                    _ => {
                        files.push(file(source, &key, size, mtime));
                        stored.push(record(source, &key, ["h", "~h"][next(2) as usize], next(3), next(3) as i64));
                    }
                }
            }
            for v in [&mut files as &mut dyn ShuffleMe, &mut stored] {
                v.shuffle_with(next(1000));
            }
            let mut verify = Vec::new();
            let got = stale_for_search(&files, &stored, 1, &HashSet::new(), &mut verify);
            // The reference: every file looked up among the records, every record among the files.
            let mut want = Staleness::default();
            let mut want_verify = Vec::new();
            for f in &files {
                let r = stored.iter().find(|r| r.source == f.source && r.path == f.key);
                if file_changed(f, r, 1, &HashSet::new(), &mut want_verify) {
                    want.changed.insert((f.source, f.key.clone()));
                }
            }
            for r in &stored {
                if !files.iter().any(|f| f.source == r.source && f.key == r.path) {
                    want.removed.insert((r.source, r.path.clone()));
                }
            }
            assert_eq!(got, want);
            let mut a: Vec<(&str, &str)> = verify.iter().map(|(f, r)| (f.key.as_str(), r.path.as_str())).collect();
            let mut b: Vec<(&str, &str)> = want_verify.iter().map(|(f, r)| (f.key.as_str(), r.path.as_str())).collect();
            a.sort();
            b.sort();
            assert_eq!(a, b);
        }
    }

    /// A deterministic shuffle of a test list (no rand dependency in this crate).
    trait ShuffleMe {
        fn shuffle_with(&mut self, seed: u64);
    }

    impl<T> ShuffleMe for Vec<T> {
        fn shuffle_with(&mut self, mut seed: u64) {
            for i in (1..self.len()).rev() {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                self.swap(i, (seed >> 33) as usize % (i + 1));
            }
        }
    }

    #[test]
    fn announced_changes_count_even_when_size_and_mtime_did_not_move() {
        let files = vec![file(Source::Memory, "memory/same.md", 10, 1)];
        let stored = vec![record(Source::Memory, "memory/same.md", "h", 10, 1)];
        assert!(stale_for_search(&files, &stored, 1, &HashSet::new(), &mut Vec::new()).is_empty());
        let hinted: HashSet<String> = ["memory/same.md".to_string()].into();
        assert_eq!(keys(&stale_for_search(&files, &stored, 1, &hinted, &mut Vec::new()).changed), ["memory/same.md"]);
        // A sync reads them by content too.
        assert_eq!(plan_sync(&files, &stored, &HashSet::new(), false).unchanged, 1);
        assert_eq!(plan_sync(&files, &stored, &hinted, false).work.len(), 1);
    }

    #[test]
    fn content_read_in_the_same_tick_as_its_mtime_is_checked_again() {
        let now = 1_000_000;
        let fresh = indexed_state("abc", &file(Source::Memory, "memory/a.md", 10, now - 5), now).to_stored();
        assert_eq!(fresh, "~abc@7/42");
        assert_eq!(FileState::parse(&fresh), FileState::Indexed { hash: "abc", settled: false, stat: Some(STAT) });
        assert_eq!(indexed_state("abc", &file(Source::Memory, "memory/a.md", 10, now - SETTLE_MS), now).to_stored(), "abc@7/42");
        let files = vec![file(Source::Memory, "memory/a.md", 10, now - 5), file(Source::Memory, "memory/b.md", 10, 1)];
        let stored = vec![record(Source::Memory, "memory/a.md", &fresh, 10, now - 5), record(Source::Memory, "memory/b.md", "abc", 10, 1)];
        // A sync re-reads it (and records it settled once it is)...
        let plan = plan_sync(&files, &stored, &HashSet::new(), false);
        assert_eq!(plan.work.iter().map(|(f, _)| f.key.as_str()).collect::<Vec<_>>(), ["memory/a.md"]);
        // ...and a search checks its content before trusting it.
        let mut verify = Vec::new();
        assert!(stale_for_search(&files, &stored, 1, &HashSet::new(), &mut verify).is_empty());
        assert_eq!(verify.iter().map(|(f, _)| f.key.as_str()).collect::<Vec<_>>(), ["memory/a.md"]);
    }

    /// A rewrite that keeps size and mtime (`touch -d`, `rsync -t`) moves the ctime: sync and search see it.
    #[test]
    fn a_rewrite_with_the_same_size_and_mtime_is_seen_by_its_ctime_or_inode() {
        let stored = vec![record(Source::Memory, "memory/a.md", "abc", 10, 1)];
        for stat in [StatId { ctime_ns: 8, ..STAT }, StatId { ino: 43, ..STAT }] {
            let files = vec![MemoryFile { stat, ..file(Source::Memory, "memory/a.md", 10, 1) }];
            assert_eq!(plan_sync(&files, &stored, &HashSet::new(), false).work.len(), 1);
            let mut verify = Vec::new();
            assert_eq!(keys(&stale_for_search(&files, &stored, 1, &HashSet::new(), &mut verify).changed), ["memory/a.md"]);
        }
        let same = vec![file(Source::Memory, "memory/a.md", 10, 1)];
        assert_eq!(plan_sync(&same, &stored, &HashSet::new(), false).unchanged, 1);
    }

    /// Records written before inodes and ctimes were kept still work: their files are checked by content once
    /// (the sync reads them, a search verifies them), then recorded with their stat.
    #[test]
    fn records_without_a_stat_are_checked_by_content_once() {
        let old = vec![FileRecord { source: Source::Memory, path: "memory/a.md".into(), hash: "abc".into(), size: 10, mtime_ms: 1 }];
        assert_eq!(old[0].state(), FileState::Indexed { hash: "abc", settled: true, stat: None });
        let files = vec![file(Source::Memory, "memory/a.md", 10, 1)];
        assert_eq!(plan_sync(&files, &old, &HashSet::new(), false).work.len(), 1);
        let mut verify = Vec::new();
        assert!(stale_for_search(&files, &old, 1, &HashSet::new(), &mut verify).is_empty());
        assert_eq!(verify.len(), 1);
        // A touched record carries the stat: trusted from then on.
        let touched = vec![record(Source::Memory, "memory/a.md", "abc", 10, 1)];
        assert_eq!(plan_sync(&files, &touched, &HashSet::new(), false).unchanged, 1);
    }
}
