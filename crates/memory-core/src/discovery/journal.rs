//! A change journal over the folders discovery walks, so that a long-lived engine can tell, without a stat per
//! memory file, that nothing changed since its last freshness check.
//!
//! Linux only (inotify): the kernel queues an event before the `write`, `rename` or `unlink` that caused it
//! returns, so draining the queue at the start of a search sees every change made before the search was asked
//! for. Elsewhere [`ChangeJournal::start`] returns `None` and every search checks the files themselves.
//!
//! The journal errs on the side of "changed": an event it cannot place, a folder created, moved or removed, a
//! watched folder itself moved or deleted, or a lost event queue all answer `true` and re-arm the watches from
//! scratch (the full check that follows finds whatever happened in between). What it cannot see, it must not be
//! trusted for: changes made through a network file system by another machine, or to a file written through a
//! memory map that is never closed. Hosts on such file systems turn the check's shortcut off by keeping searches
//! one-shot, or announce changes with `MemoryBackend::notify_changed`.

use std::path::Path;

use super::MemoryRoots;

/// Watches the memory files' folders; [`take_changes`](ChangeJournal::take_changes) says whether anything
/// relevant happened since the last call.
pub struct ChangeJournal {
    #[cfg(target_os = "linux")]
    inner: linux::Watches,
    #[cfg(not(target_os = "linux"))]
    _never: std::convert::Infallible,
}

impl ChangeJournal {
    /// Watch what discovery walks under `roots`, and the transcripts folder. `None` where the platform has no
    /// such events or the watches cannot be set (too many watches, no inotify instance left): the caller then
    /// checks every file, as without a journal.
    pub fn start(roots: &MemoryRoots, sessions_dir: Option<&Path>) -> Option<ChangeJournal> {
        #[cfg(target_os = "linux")]
        {
            match linux::Watches::start(roots, sessions_dir) {
                Ok(inner) => Some(ChangeJournal { inner }),
                Err(e) => {
                    tracing::debug!(error = %e, "no change journal; every search checks the files");
                    None
                }
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (roots, sessions_dir);
            None
        }
    }

    /// `Ok(true)` when a memory file, a folder of them or the transcripts may have changed since the last call
    /// (or since [`start`](Self::start)); `Ok(false)` when certainly nothing did. An error means the journal
    /// can no longer tell: drop it.
    pub fn take_changes(&mut self) -> std::io::Result<bool> {
        #[cfg(target_os = "linux")]
        {
            self.inner.take_changes()
        }
        #[cfg(not(target_os = "linux"))]
        {
            match self._never {}
        }
    }

    /// The memory files the events taken so far named (written, created, moved, removed), since the last call:
    /// the next check looks at each of them whatever its size and times say, and only at them when the
    /// list is [complete](ChangedFiles::complete).
    pub fn take_changed_files(&mut self) -> ChangedFiles {
        #[cfg(target_os = "linux")]
        {
            ChangedFiles { paths: std::mem::take(&mut self.inner.files), complete: std::mem::replace(&mut self.inner.all_named, true) }
        }
        #[cfg(not(target_os = "linux"))]
        {
            match self._never {}
        }
    }
}

/// What [`ChangeJournal::take_changed_files`] answers.
#[derive(Debug, Default)]
pub struct ChangedFiles {
    pub paths: Vec<std::path::PathBuf>,
    /// Every change since the last call is a change of one of `paths`: no folder was created, moved or removed,
    /// no event was lost or could not be placed, the list did not reach its cap. A check may then look at
    /// these files alone.
    pub complete: bool,
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashMap;
    use std::ffi::{OsStr, OsString};
    use std::io;
    use std::path::{Path, PathBuf};

    use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

    use crate::discovery::{MemoryRoots, IGNORED_DIRS};

    /// What a watched folder is to the memory files, which decides what its folder events do to the watches.
    /// Which files count is not decided here: a file's event asks discovery's rule
    /// ([`MemoryRoots::is_relevant_file_change`]), the one the watcher asks too.
    #[derive(Debug, Clone)]
    enum Role {
        /// The workspace: the names in `names` (`memory`, the first folder of an extra path or of the transcripts
        /// folder inside the workspace) re-arm.
        Workspace { names: Vec<OsString> },
        /// A folder walked for memory files (`memory/**`, an extra path folder): any sub-folder created, moved or
        /// removed re-arms the watches.
        Tree,
        /// The folder holding a watched target (an extra path, the transcripts folder): only that name. Its
        /// contents changing is a change (an extra path that is one file); it appearing, going away or being
        /// replaced re-arms the watches.
        Holder { name: OsString },
        /// The nearest folder that exists above a target that does not: anything created there re-arms.
        Ancestor,
        /// The transcripts folder.
        Sessions,
    }

    /// A watched folder and what it is to the memory files (one folder can be more than one thing: an extra path
    /// inside `memory/`).
    struct Watched {
        dir: PathBuf,
        roles: Vec<Role>,
    }

    /// Changes to contents and names; never reads or opens, so the sync's own reads of the files do not count.
    /// One mask for every watch: a folder watched in two roles keeps one mask.
    fn mask() -> WatchMask {
        WatchMask::MODIFY
            | WatchMask::ATTRIB
            | WatchMask::CLOSE_WRITE
            | WatchMask::CREATE
            | WatchMask::DELETE
            | WatchMask::MOVED_FROM
            | WatchMask::MOVED_TO
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
            | WatchMask::ONLYDIR
            | WatchMask::DONT_FOLLOW
    }

    pub(super) struct Watches {
        roots: MemoryRoots,
        sessions_dir: Option<PathBuf>,
        inotify: Inotify,
        watched: HashMap<WatchDescriptor, Watched>,
        buffer: Vec<u8>,
        /// Memory files named by events since the last `take_changed_files` (bounded: past the cap, the
        /// freshness check's own comparison finds the rest).
        pub(super) files: Vec<PathBuf>,
        /// Every change since the last `take_changed_files` is in `files`.
        pub(super) all_named: bool,
    }

    /// At most this many changed files are remembered between two checks.
    const MAX_FILES: usize = 1024;

    impl Watches {
        pub(super) fn start(roots: &MemoryRoots, sessions_dir: Option<&Path>) -> io::Result<Watches> {
            let mut w = Watches {
                roots: roots.clone(),
                sessions_dir: sessions_dir.map(Path::to_path_buf),
                inotify: Inotify::init()?,
                watched: HashMap::new(),
                buffer: vec![0; 64 * 1024],
                files: Vec::new(),
                all_named: true,
            };
            w.arm()?;
            Ok(w)
        }

        /// Set every watch. Folders that do not exist are covered by their holder or nearest ancestor.
        fn arm(&mut self) -> io::Result<()> {
            let ws = self.roots.workspace.clone();
            let mut names: Vec<OsString> = vec![crate::discovery::MEMORY_DIR.into()];
            let targets: Vec<PathBuf> = self.roots.extra_paths.iter().chain(self.sessions_dir.iter()).cloned().collect();
            for t in &targets {
                if let Some(first) = t.strip_prefix(&ws).ok().and_then(|rel| rel.components().next()) {
                    names.push(first.as_os_str().to_os_string());
                }
            }
            self.add(&ws, Role::Workspace { names })?;
            let memory = ws.join(crate::discovery::MEMORY_DIR);
            if is_real_dir(&memory) {
                self.add_tree(&memory)?;
            }
            for extra in self.roots.extra_paths.clone() {
                self.add_target(&extra)?;
                if is_real_dir(&extra) {
                    self.add_tree(&extra)?;
                }
            }
            if let Some(dir) = self.sessions_dir.clone() {
                self.add_target(&dir)?;
                if is_real_dir(&dir) {
                    self.add(&dir, Role::Sessions)?;
                }
            }
            Ok(())
        }

        fn add(&mut self, dir: &Path, role: Role) -> io::Result<()> {
            let wd = self.inotify.watches().add(dir, mask())?;
            self.watched.entry(wd).or_insert_with(|| Watched { dir: dir.to_path_buf(), roles: Vec::new() }).roles.push(role);
            Ok(())
        }

        /// The folder that holds `target` (its name's appearance or removal), or the nearest one that exists.
        fn add_target(&mut self, target: &Path) -> io::Result<()> {
            let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else { return Ok(()) };
            if is_real_dir(parent) {
                return self.add(parent, Role::Holder { name: name.to_os_string() });
            }
            let mut up = parent.parent();
            while let Some(dir) = up {
                if is_real_dir(dir) {
                    return self.add(dir, Role::Ancestor);
                }
                up = dir.parent();
            }
            Ok(())
        }

        /// `dir` and every folder under it that discovery walks (no links, no tool folders).
        fn add_tree(&mut self, dir: &Path) -> io::Result<()> {
            let mut stack = vec![dir.to_path_buf()];
            while let Some(d) = stack.pop() {
                match self.add(&d, Role::Tree) {
                    Ok(()) => {}
                    // Gone between the listing and the watch: its removal is an event of its parent.
                    Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => continue,
                    Err(e) => return Err(e),
                }
                let Ok(rd) = std::fs::read_dir(&d) else { continue };
                for entry in rd.flatten() {
                    // The listing's own type: no stat per file.
                    let Ok(ft) = entry.file_type() else { continue };
                    if ft.is_dir() && !IGNORED_DIRS.iter().any(|n| entry.file_name() == *n) {
                        stack.push(entry.path());
                    }
                }
            }
            Ok(())
        }

        pub(super) fn take_changes(&mut self) -> io::Result<bool> {
            let mut changed = false;
            let mut rearm = false;
            let files = Files { roots: &self.roots, sessions_dir: self.sessions_dir.as_deref() };
            loop {
                let events = match self.inotify.read_events(&mut self.buffer) {
                    Ok(events) => events,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                };
                for ev in events {
                    let watched = self.watched.get(&ev.wd);
                    match classify(watched, ev.mask, ev.name, &files) {
                        Effect::None => {}
                        Effect::Changed => {
                            changed = true;
                            match (watched, ev.name) {
                                (Some(w), Some(name)) if self.files.len() < MAX_FILES => self.files.push(w.dir.join(name)),
                                _ => self.all_named = false,
                            }
                        }
                        Effect::Rearm => rearm = true,
                    }
                }
            }
            if rearm {
                self.all_named = false;
                // A fresh instance: watches of moved folders would report under their old names.
                self.inotify = Inotify::init()?;
                self.watched.clear();
                self.arm()?;
            }
            Ok(changed || rearm)
        }
    }

    /// Ordered: a folder in two roles takes the stronger answer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Effect {
        None,
        Changed,
        Rearm,
    }

    /// Discovery's rule for which files are memory files, asked for a file's event.
    struct Files<'a> {
        roots: &'a MemoryRoots,
        sessions_dir: Option<&'a Path>,
    }

    impl Files<'_> {
        fn changed(&self, dir: &Path, name: &OsStr) -> Effect {
            if self.roots.is_relevant_file_change(&dir.join(name), self.sessions_dir) {
                Effect::Changed
            } else {
                Effect::None
            }
        }
    }

    /// What an event means to the memory files, asking each role of its folder (an unknown folder: a change).
    fn classify(watched: Option<&Watched>, mask: EventMask, name: Option<&OsStr>, files: &Files<'_>) -> Effect {
        if mask.intersects(EventMask::Q_OVERFLOW | EventMask::IGNORED | EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::UNMOUNT) {
            return Effect::Rearm;
        }
        let (Some(name), Some(w)) = (name, watched) else { return Effect::Changed };
        w.roles.iter().map(|role| classify_in(role, &w.dir, mask, name, files)).max().unwrap_or(Effect::Changed)
    }

    fn classify_in(role: &Role, dir: &Path, mask: EventMask, name: &OsStr, files: &Files<'_>) -> Effect {
        let is_dir = mask.contains(EventMask::ISDIR);
        match role {
            Role::Workspace { names } if names.iter().any(|n| n == name) => Effect::Rearm,
            Role::Tree if is_dir && !IGNORED_DIRS.iter().any(|n| name == *n) => Effect::Rearm,
            Role::Workspace { .. } | Role::Tree | Role::Sessions if is_dir => Effect::None,
            Role::Workspace { .. } | Role::Tree | Role::Sessions => files.changed(dir, name),
            Role::Holder { name: target } if target != name => Effect::None,
            Role::Holder { .. } => {
                if !is_dir && !mask.intersects(EventMask::CREATE | EventMask::DELETE | EventMask::MOVED_FROM | EventMask::MOVED_TO) {
                    Effect::Changed
                } else {
                    Effect::Rearm
                }
            }
            Role::Ancestor => Effect::Rearm,
        }
    }

    fn is_real_dir(p: &Path) -> bool {
        std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::*;

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    /// The files events named are handed out once, so the next check looks at each of them by content.
    #[test]
    fn names_the_files_that_changed() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        write(&w.join("memory/a.md"), "a\n");
        write(&w.join("memory/b.md"), "b\n");
        let roots = MemoryRoots::new(w, &Vec::<String>::new());
        let mut j = ChangeJournal::start(&roots, None).expect("inotify is available on Linux");
        write(&w.join("memory/a.md"), "A\n");
        drop(fs::read_to_string(w.join("memory/b.md")).unwrap());
        assert!(j.take_changes().unwrap());
        let mut named = j.take_changed_files();
        assert!(named.complete);
        named.paths.dedup();
        assert_eq!(named.paths, [w.join("memory/a.md")]);
        assert!(j.take_changed_files().paths.is_empty());
    }

    /// A check may look at the named files alone only when they are every change: a folder created, renamed or
    /// removed (its notes come and go without an event of their own) says the list is not complete, once.
    #[test]
    fn says_when_the_named_files_are_not_every_change() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        write(&w.join("memory/a.md"), "a\n");
        let roots = MemoryRoots::new(w, &Vec::<String>::new());
        let mut j = ChangeJournal::start(&roots, None).expect("inotify is available on Linux");
        let mut take = |act: &dyn Fn()| {
            act();
            j.take_changes().unwrap();
            let named = j.take_changed_files();
            (named.complete, named.paths.len())
        };
        assert!(take(&|| write(&w.join("memory/a.md"), "A\n")).0, "a rewrite is named");
        assert_eq!(take(&|| fs::remove_file(w.join("memory/a.md")).unwrap()), (true, 1), "a removal is named");
        assert!(!take(&|| write(&w.join("memory/b/c.md"), "c\n")).0, "a new folder with a note");
        assert!(take(&|| write(&w.join("memory/b/c.md"), "C\n")).0, "after it, a rewrite is named again");
        assert!(!take(&|| fs::rename(w.join("memory/b"), w.join("memory/d")).unwrap()).0, "a folder renamed");
        assert_eq!(
            take(&|| {
                fs::rename(w.join("memory/d/c.md"), w.join("memory/e.md")).unwrap();
            }),
            (true, 2),
            "a note moved: both names"
        );
    }

    /// Each step is what a user or an agent does between two searches; `changed` is what the journal must say.
    #[test]
    fn sees_every_change_to_memory_files_and_nothing_else() {
        let ws = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let w = ws.path();
        write(&w.join("memory/2026-11-30.md"), "- first\n");
        let extra_dir = outside.path().join("notes");
        let extra_file = outside.path().join("single/one.md");
        let later = outside.path().join("not/yet/there");
        write(&extra_dir.join("a.md"), "a\n");
        write(&extra_file, "one\n");
        let sessions = outside.path().join("sessions");
        fs::create_dir_all(&sessions).unwrap();
        let extras = [extra_dir.display().to_string(), extra_file.display().to_string(), later.display().to_string()];
        let roots = MemoryRoots::new(w, &extras).with_media(true);
        let mut j = ChangeJournal::start(&roots, Some(&sessions)).expect("inotify is available on Linux");
        let mut step = |what: &str, changed: bool, act: &dyn Fn()| {
            act();
            assert_eq!(j.take_changes().unwrap(), changed, "{what}");
            // Drained: the next search finds it quiet.
            assert!(!j.take_changes().unwrap(), "{what}: quiet afterwards");
        };
        step("nothing", false, &|| {});
        step("reading a note", false, &|| drop(fs::read_to_string(w.join("memory/2026-11-30.md")).unwrap()));
        step("append", true, &|| {
            use std::io::Write;
            fs::OpenOptions::new().append(true).open(w.join("memory/2026-11-30.md")).unwrap().write_all(b"- more\n").unwrap();
        });
        step("new daily log", true, &|| write(&w.join("memory/2026-12-01.md"), "x\n"));
        step("editor swap file", false, &|| write(&w.join("memory/.2026-12-01.md.swp"), "x"));
        step("a file beside the workspace's memory", false, &|| write(&w.join("notes.txt"), "x"));
        step("code folder at the root", false, &|| write(&w.join("src/lib.rs"), "x"));
        step("MEMORY.md created", true, &|| write(&w.join("MEMORY.md"), "root\n"));
        step("MEMORY.md rewritten", true, &|| write(&w.join("MEMORY.md"), "ROOT\n"));
        step("tool folder", false, &|| write(&w.join("memory/node_modules/pkg/x.md"), "x"));
        step("new folder with a note", true, &|| write(&w.join("memory/projects/garden.md"), "tomatoes\n"));
        step("note in the new folder", true, &|| write(&w.join("memory/projects/garden.md"), "peppers\n"));
        step("folder renamed", true, &|| fs::rename(w.join("memory/projects"), w.join("memory/work")).unwrap());
        step("note in the renamed folder", true, &|| write(&w.join("memory/work/garden.md"), "beans\n"));
        step("rename a note", true, &|| fs::rename(w.join("memory/work/garden.md"), w.join("memory/work/plot.md")).unwrap());
        step("delete a note", true, &|| fs::remove_file(w.join("memory/work/plot.md")).unwrap());
        step("folder removed", true, &|| fs::remove_dir(w.join("memory/work")).unwrap());
        step("extra folder note", true, &|| write(&extra_dir.join("deep/b.md"), "b\n"));
        step("extra folder media", true, &|| write(&extra_dir.join("photo.png"), "png"));
        step("extra folder other file", false, &|| write(&extra_dir.join("data.csv"), "1,2"));
        step("extra file rewritten", true, &|| write(&extra_file, "two\n"));
        step("beside the extra file", false, &|| write(&outside.path().join("single/other.md"), "x\n"));
        step("missing extra path appears", true, &|| write(&later.join("c.md"), "c\n"));
        step("note in the extra path that appeared", true, &|| write(&later.join("c.md"), "cc\n"));
        step("transcript appended", true, &|| write(&sessions.join("s1.jsonl"), "{}\n"));
        step("transcript lock file", false, &|| write(&sessions.join("s1.lock"), "x"));
        step("memory folder removed", true, &|| fs::remove_dir_all(w.join("memory")).unwrap());
        step("memory folder back", true, &|| write(&w.join("memory/2026-12-02.md"), "back\n"));
        step("note in the memory folder that came back", true, &|| write(&w.join("memory/2026-12-02.md"), "again\n"));
    }

    #[test]
    fn a_workspace_moved_away_rearms() {
        let parent = tempfile::tempdir().unwrap();
        let w = parent.path().join("ws");
        write(&w.join("memory/a.md"), "a\n");
        let mut j = ChangeJournal::start(&MemoryRoots::new(&w, &[] as &[String]), None).unwrap();
        fs::rename(&w, parent.path().join("old")).unwrap();
        write(&w.join("memory/a.md"), "new\n");
        assert!(j.take_changes().unwrap());
        write(&w.join("memory/a.md"), "newer\n");
        assert!(j.take_changes().unwrap(), "the watches follow the path, not the moved folder");
    }

    /// A folder that is both under memory/ and an extra path: its media count (discovery indexes them), a file
    /// without an extension does not.
    #[test]
    fn an_extra_path_inside_memory_counts_its_media() {
        let ws = tempfile::tempdir().unwrap();
        let w = ws.path();
        write(&w.join("memory/photos/a.md"), "a\n");
        let roots = MemoryRoots::new(w, &[w.join("memory/photos").display().to_string()]).with_media(true);
        let mut j = ChangeJournal::start(&roots, None).unwrap();
        write(&w.join("memory/photos/cat.png"), "png");
        assert!(j.take_changes().unwrap(), "media in the extra path");
        write(&w.join("memory/photos/README"), "x");
        write(&w.join("memory/cat.png"), "png");
        assert!(!j.take_changes().unwrap(), "no extension; media outside the extra path");
    }
}
