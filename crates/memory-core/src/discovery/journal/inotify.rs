//! The journal's backend on Linux: inotify, whose events are queued before the change that caused them returns.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

use super::is_real_dir;
use super::Change;
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
}

impl Watches {
    pub(super) fn start(roots: &MemoryRoots, sessions_dir: Option<&Path>) -> io::Result<Watches> {
        let mut w = Watches {
            roots: roots.clone(),
            sessions_dir: sessions_dir.map(Path::to_path_buf),
            inotify: Inotify::init()?,
            watched: HashMap::new(),
            buffer: vec![0; 64 * 1024],
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

    /// The descriptor to wait on for events (it changes when the watches are re-armed).
    pub(super) fn fd(&self) -> RawFd {
        self.inotify.as_raw_fd()
    }

    /// Read every queued event and `record` what each means to the memory files; re-arm the watches from
    /// scratch when one asks for it (a rearm is a change no file name covers).
    pub(super) fn drain(&mut self, record: &mut dyn FnMut(Change)) -> io::Result<()> {
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
                    Effect::Changed => record(watched.zip(ev.name).map(|(w, name)| w.dir.join(name))),
                    Effect::Rearm => rearm = true,
                }
            }
        }
        if rearm {
            record(None);
            // A fresh instance: watches of moved folders would report under their old names.
            self.inotify = Inotify::init()?;
            self.watched.clear();
            self.arm()?;
        }
        Ok(())
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
