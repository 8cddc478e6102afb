use crate::locks::LockExt;
use memory_contract::changes::ChangeStream;
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
    let j = ChangeJournal::start(&roots, None).expect("inotify is available on Linux");
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
    let j = ChangeJournal::start(&roots, None).expect("inotify is available on Linux");
    let take = |act: &dyn Fn()| {
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
    let j = ChangeJournal::start(&roots, Some(&sessions)).expect("inotify is available on Linux");
    let step = |what: &str, changed: bool, act: &dyn Fn()| {
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
    let j = ChangeJournal::start(&MemoryRoots::new(&w, &[] as &[String]), None).unwrap();
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
    let j = ChangeJournal::start(&roots, None).unwrap();
    write(&w.join("memory/photos/cat.png"), "png");
    assert!(j.take_changes().unwrap(), "media in the extra path");
    write(&w.join("memory/photos/README"), "x");
    write(&w.join("memory/cat.png"), "png");
    assert!(!j.take_changes().unwrap(), "no extension; media outside the extra path");
}

/// The next changes of `feed`, within a few seconds.
async fn next(feed: &mut ChangeFeed) -> ChangedFiles {
    tokio::time::timeout(std::time::Duration::from_secs(5), feed.next()).await.expect("changes within 5 s").expect("the feed goes on")
}

/// A workspace with `memory/a.md`, and its journal.
fn journal_of_one_note() -> (tempfile::TempDir, ChangeJournal) {
    let ws = tempfile::tempdir().unwrap();
    write(&ws.path().join("memory/a.md"), "a\n");
    let j = ChangeJournal::start(&MemoryRoots::new(ws.path(), &Vec::<String>::new()), None).unwrap();
    (ws, j)
}

/// A watcher's feed and the searches' freshness check share the watches: what one drains, the other still gets.
#[tokio::test]
async fn a_feed_and_the_searches_both_get_every_change() {
    let (ws, j) = journal_of_one_note();
    let w = ws.path();
    let mut feed = j.subscribe().unwrap();
    // A search drains first: the feed still hears it.
    write(&w.join("memory/a.md"), "A\n");
    assert!(j.take_changes().unwrap());
    let heard = next(&mut feed).await;
    assert!(heard.complete && heard.events >= 1, "{heard:?}");
    assert!(heard.paths.iter().all(|p| *p == w.join("memory/a.md")), "{heard:?}");
    assert_eq!(j.take_changed_files().paths.first(), Some(&w.join("memory/a.md")));
    // The feed's thread drains first (nobody searches): the next search still sees it, by name.
    write(&w.join("memory/b.md"), "b\n");
    assert!(next(&mut feed).await.paths.contains(&w.join("memory/b.md")));
    assert!(j.take_changes().unwrap(), "taken by the feed, still a change for the search");
    let named = j.take_changed_files();
    assert!(named.complete && named.paths.contains(&w.join("memory/b.md")), "{named:?}");
    assert!(!j.take_changes().unwrap());
    // A new folder is a change no name covers.
    write(&w.join("memory/projects/c.md"), "c\n");
    assert!(!next(&mut feed).await.complete);
}

/// The thread that waits for a feed's events ends once no feed is left, and starts again for the next one.
#[tokio::test]
async fn the_waiting_thread_ends_with_the_last_feed() {
    let (ws, j) = journal_of_one_note();
    let w = ws.path();
    let waiting = || j.shared.state.locked().waiting;
    assert!(!waiting(), "no feed, no thread: a search drains the events itself");
    let feed = j.subscribe().unwrap();
    assert!(waiting());
    drop(feed);
    let deadline = std::time::Instant::now() + EVENT_WAIT * 4;
    while waiting() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!waiting(), "the thread ended");
    let mut feed = j.subscribe().unwrap();
    write(&w.join("memory/a.md"), "A\n");
    assert_eq!(next(&mut feed).await.paths.first(), Some(&w.join("memory/a.md")));
}

/// The `notify` crate's watcher, the journal's backend where there is no inotify, built here on Linux: it feeds
/// a watcher the memory files that changed (and nothing else), and the folders that appear later.
#[tokio::test]
async fn the_portable_backend_feeds_a_watcher() {
    let ws = tempfile::tempdir().unwrap();
    let w = &fs::canonicalize(ws.path()).unwrap();
    let outside = tempfile::tempdir().unwrap();
    let later = fs::canonicalize(outside.path()).unwrap().join("later");
    let roots = MemoryRoots::new(w, &[later.display().to_string()]);
    let mut feed = ChangeFeed::subscribe(Shared::start_portable(&roots, None).unwrap()).unwrap();
    let mut until = async |path: &Path| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if next(&mut feed).await.paths.iter().any(|p| p == path) {
                return;
            }
        }
        panic!("{} not heard", path.display());
    };
    write(&w.join("notes.txt"), "not a memory file\n");
    write(&w.join("MEMORY.md"), "root\n");
    until(&w.join("MEMORY.md")).await;
    // memory/ did not exist when the watches were set (its first note may come before its watch: the folder's
    // event covers it).
    write(&w.join("memory/2026-12-01.md"), "first\n");
    until(&w.join("memory")).await;
    write(&w.join("memory/2026-12-01.md"), "again\n");
    until(&w.join("memory/2026-12-01.md")).await;
    // The extra path appears (its note may come before its watch: the folder's event covers it).
    write(&later.join("c.md"), "c\n");
    until(&later).await;
    write(&later.join("c.md"), "cc\n");
    until(&later.join("c.md")).await;
}
