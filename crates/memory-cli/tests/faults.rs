//! Fault injection through the built `memory` command (issue 33): a full or read-only disk at each phase of
//! append, index, sync and rebuild; a damaged pointer, header, data pages and WAL. After each fault the invariants
//! hold: the notes are unchanged, no entry is torn, the next command answers correctly or says exactly what is
//! wrong, and `reset --yes` / `index --force` recover.
//!
//! Disk-full cases run on a small tmpfs each test mounts (we run as root in CI); where mounting is refused the
//! test says so and passes without checking.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

/// A tmpfs mounted for one test, unmounted when dropped.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `size` (`mount -o size=`, e.g. `1m`) at `dir`, or `None` (printed) when not allowed.
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        fs::create_dir_all(dir).unwrap();
        let o = Command::new("mount").args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(dir).output();
        match o {
            Ok(o) if o.status.success() => Some(Tmpfs { dir: dir.to_path_buf() }),
            Ok(o) => {
                conformance::testing::skipped(
                    "a test on a small file system",
                    &format!("cannot mount a tmpfs here ({})", String::from_utf8_lossy(&o.stderr).trim()),
                );
                None
            }
            Err(e) => {
                conformance::testing::skipped("a test on a small file system", &format!("cannot run mount ({e})"));
                None
            }
        }
    }

    /// Fill the file system with `filler` until it is full, then free about `free` bytes (whole pages).
    fn fill_leaving(&self, free: u64) -> PathBuf {
        let filler = self.dir.join("filler.bin");
        let mut f = fs::File::create(&filler).unwrap();
        let page = [b'f'; 4096];
        while f.write_all(&page).is_ok() {}
        let len = f.metadata().unwrap().len() / 4096 * 4096;
        f.set_len(len.saturating_sub(free.div_ceil(4096) * 4096)).unwrap();
        f.sync_all().unwrap();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount").arg(&self.dir).status().is_ok_and(|s| s.success());
        if !ok {
            // Something still holds it (a child the test failed to reap): detach it, never leave it mounted.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

const CONFIG: &str = r#"{"memory":{"search":{"provider":"none"}}}"#;

/// A workspace with a few notes, a state folder and a keyword-only config.
struct Env {
    ws: PathBuf,
    state: PathBuf,
    config: PathBuf,
}

impl Env {
    fn new(ws: PathBuf, state: PathBuf) -> Env {
        fs::create_dir_all(ws.join("memory")).unwrap();
        fs::create_dir_all(&state).unwrap();
        fs::write(ws.join("MEMORY.md"), "# Memory\n\nThe gateway runs on the Mac Studio.\n").unwrap();
        fs::write(ws.join("memory/2026-11-29.md"), "# 2026-11-29\n\n- Fixed error E4012 in billing\n").unwrap();
        fs::write(ws.join("memory/garden.md"), "# Garden\n\nThe tomatoes need watering on Sundays.\n").unwrap();
        let config = state.join("..").join(format!("{}.cfg.json", state.file_name().unwrap().to_string_lossy()));
        fs::write(&config, CONFIG).unwrap();
        Env { ws, state, config }
    }

    fn cmd(&self) -> Command {
        let mut c = common::memory(&self.ws, &self.state, Some(&self.config));
        c.stdin(std::process::Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> Output {
        let o = self.run(args);
        assert!(o.status.success(), "memory {args:?} failed: {}", text(&o));
        o
    }

    /// The paths of a keyword search's results.
    fn found(&self, query: &str) -> Vec<String> {
        let v: serde_json::Value = serde_json::from_slice(&self.ok(&["search", query, "--json"]).stdout).unwrap();
        v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
    }

    /// Every memory file's bytes, by path (the notes must never change under a fault).
    fn notes(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = vec![("MEMORY.md".to_string(), fs::read(self.ws.join("MEMORY.md")).unwrap())];
        let mut names: Vec<_> = fs::read_dir(self.ws.join("memory")).unwrap().flatten().map(|e| e.file_name()).collect();
        names.sort();
        for n in names {
            out.push((format!("memory/{}", n.to_string_lossy()), fs::read(self.ws.join("memory").join(&n)).unwrap()));
        }
        out
    }
}

fn today() -> String {
    chrono::Local::now().format("%Y-%m-%d").to_string()
}

/// Item 4: an append that does not fit leaves the daily log exactly as it was (no half entry), however often it is
/// retried; once there is room the entry goes in whole, once.
#[test]
fn append_on_a_full_disk_is_all_or_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(disk) = Tmpfs::mount(&tmp.path().join("disk"), "1m") else { return };
    let env = Env::new(disk.dir.join("ws"), tmp.path().join("state"));
    // Not even room for a new day's heading: nothing is created, no temporary file is left.
    let listing = || {
        let mut names: Vec<String> =
            fs::read_dir(env.ws.join("memory")).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    };
    let (names, notes) = (listing(), env.notes());
    let filler = disk.fill_leaving(0);
    let o = env.run(&["append", "No room for this"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert_eq!((listing(), env.notes()), (names, notes), "{}", text(&o));
    fs::remove_file(filler).unwrap();
    env.ok(&["append", "The first entry of the day"]);
    let log = env.ws.join(format!("memory/{}.md", today()));
    let before = fs::read(&log).unwrap();
    let notes = env.notes();

    // A page free: the 12,000-byte entry starts to fit, then the disk is full (a short write).
    let filler = disk.fill_leaving(4096);
    let big = format!("Zorblax {}", "long entry text ".repeat(750));
    for attempt in 0..3 {
        let o = env.run(&["append", &big]);
        assert!(!o.status.success(), "attempt {attempt}: an append that cannot fit succeeded");
        let said = text(&o);
        assert_eq!(fs::read(&log).unwrap(), before, "attempt {attempt}: a torn entry was left in the log ({said})");
        assert!(said.contains(&log.display().to_string()) && said.to_lowercase().contains("space"), "attempt {attempt}: {said}");
        assert_eq!(env.notes(), notes, "attempt {attempt}");
    }
    // Room again: the entry goes in whole, once, and is found.
    fs::remove_file(&filler).unwrap();
    env.ok(&["append", &big]);
    let after = String::from_utf8(fs::read(&log).unwrap()).unwrap();
    assert!(after.as_bytes().starts_with(&before));
    assert_eq!(after.matches("Zorblax").count(), 1, "{after}");
    assert!(after.ends_with("long entry text\n"));
    assert_eq!(env.found("Zorblax").first().map(String::as_str), Some(format!("memory/{}.md", today()).as_str()));
}

/// The index files of the only agent: (base path, live database path from `status`).
fn index_base(state: &Path) -> PathBuf {
    let dir = state.join("agents/main");
    let mut bases: Vec<PathBuf> =
        fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "sqlite")).collect();
    assert_eq!(bases.len(), 1, "{bases:?}");
    bases.pop().unwrap()
}

fn live_db(env: &Env) -> PathBuf {
    let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
    PathBuf::from(v["indexPath"].as_str().unwrap())
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The next commands answer as an undamaged index would.
fn answers_correctly(env: &Env) {
    assert_eq!(env.found("tomatoes watering"), ["memory/garden.md"]);
    assert_eq!(env.found("E4012").first().map(String::as_str), Some("memory/2026-11-29.md"));
    let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
    assert_eq!(v["files"], env.notes().len(), "{v}");
}

/// Item 8: an empty or garbage `<index>.current` pointer is repaired by the next command, whichever it is:
/// search, status, `reset --yes` and `index --force` (the documented cures) all work on it.
#[test]
fn a_damaged_index_pointer_never_blocks_a_command() {
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    env.ok(&["index"]);
    env.ok(&["index", "--force"]); // generation 1: the pointer exists
    let pointer = with_suffix(&index_base(&env.state), ".current");
    assert!(pointer.exists());
    let notes = env.notes();
    let damage: [&[u8]; 3] = [b"", b"garbage\n", &[0xff, 0xfe, 0x00, 0x17]];
    for (i, bad) in damage.iter().enumerate() {
        for command in
            [&["search", "tomatoes"][..], &["status", "--json"], &["reset", "--yes"], &["index", "--force"], &["index"], &["get", "MEMORY.md"]]
        {
            fs::write(&pointer, bad).unwrap();
            let o = env.run(command);
            assert!(o.status.success(), "damage {i}, memory {command:?}: {}", text(&o));
            answers_correctly(&env);
        }
    }
    assert_eq!(env.notes(), notes);
}

/// Item 8: `memory serve` starts on a damaged pointer and answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_starts_on_a_damaged_index_pointer() {
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    env.ok(&["index"]);
    env.ok(&["index", "--force"]);
    fs::write(with_suffix(&index_base(&env.state), ".current"), "garbage").unwrap();
    let client = serve::connect(&env, &["--no-watch"]).await;
    assert_eq!(serve::found(&client, "tomatoes").await, ["memory/garden.md"]);
    client.cancel().await.unwrap();
}

/// Item 8: damaged data pages (text that is no longer UTF-8: a disk's random write) are noticed by the search that
/// reads them: the index is set aside and rebuilt from the notes, and the search answers (saying so).
#[test]
fn damaged_data_pages_are_set_aside_and_rebuilt() {
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    env.ok(&["index"]);
    let notes = env.notes();
    let db = live_db(&env);
    let mut bytes = fs::read(&db).unwrap();
    let needle = b"tomatoes need";
    let mut hits = 0;
    for at in 0..bytes.len() - needle.len() {
        if &bytes[at..at + needle.len()] == needle {
            bytes[at..at + needle.len()].fill(0xff);
            hits += 1;
        }
    }
    assert!(hits > 0, "the chunk text was not found in {}", db.display());
    fs::write(&db, &bytes).unwrap();

    let o = env.ok(&["search", "tomatoes watering", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["path"], "memory/garden.md", "{v}");
    assert!(v["warnings"].to_string().contains("damaged"), "the repair is not said: {v}");
    answers_correctly(&env);
    assert_eq!(env.notes(), notes);
    // The damaged file is kept for inspection until `reset` deletes the index.
    let aside = || fs::read_dir(db.parent().unwrap()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains(".corrupt-")).count();
    assert_eq!(aside(), 1);
    env.ok(&["reset", "--yes"]);
    assert_eq!(aside(), 0);
    answers_correctly(&env);
}

/// Item 8: damage no search has met yet is found by `status --deep`, which reads the whole index, and repaired
/// there: `status` no longer says all is well over damaged data.
#[test]
fn status_deep_finds_and_repairs_damage_no_search_has_met() {
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    env.ok(&["index"]);
    let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--deep", "--json"]).stdout).unwrap();
    assert_eq!(v["deep"]["integrity"]["ok"], true, "{v}");
    let db = live_db(&env);
    let mut bytes = fs::read(&db).unwrap();
    let needle = b"tomatoes need";
    let at = bytes.windows(needle.len()).position(|w| w == needle).expect("chunk text in the file");
    bytes[at..at + needle.len()].fill(0xff);
    fs::write(&db, &bytes).unwrap();

    let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--deep", "--json"]).stdout).unwrap();
    assert_eq!(v["deep"]["integrity"]["repaired"], true, "the damage was not found: {v}");
    assert!(v["deep"]["integrity"]["note"].as_str().unwrap().contains("damaged"), "{v}");
    let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
    assert_eq!((&v["files"], &v["dirty"]), (&serde_json::json!(3), &serde_json::json!(false)), "{v}");
    let o = env.ok(&["search", "tomatoes", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["results"][0]["path"], "memory/garden.md");
    assert!(!v["warnings"].to_string().contains("damaged"), "already repaired: {v}");
    let human = String::from_utf8_lossy(&env.ok(&["status", "--deep"]).stdout).into_owned();
    assert!(human.contains("no damage"), "{human}");
}

/// Item 8: scribbled pages, a scribbled header and a garbage WAL: the next command answers correctly or says the
/// index is damaged, and `index --force` and `reset --yes` always recover.
#[test]
fn scribbled_index_files_are_recovered_by_force_and_reset() {
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    // Enough notes for many pages.
    for i in 0..200 {
        fs::write(env.ws.join(format!("memory/filler-{i}.md")), format!("# Filler {i}\n\n{}\n", "alpha beta gamma delta ".repeat(40))).unwrap();
    }
    let notes = env.notes();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..12 {
        let cure: &[&str] = if round % 2 == 0 { &["index", "--force"] } else { &["reset", "--yes"] };
        env.ok(&["index"]);
        let db = live_db(&env);
        let len = fs::metadata(&db).unwrap().len();
        let mut f = fs::OpenOptions::new().write(true).open(&db).unwrap();
        use std::io::{Seek, SeekFrom};
        match round % 3 {
            // The header.
            0 => {
                f.write_all(&[0x5a; 100]).unwrap();
            }
            // Random runs of bytes in data pages.
            1 => {
                for _ in 0..8 {
                    let at = 4096 + next() % (len - 4096 - 64);
                    f.seek(SeekFrom::Start(at)).unwrap();
                    let junk: Vec<u8> = (0..64).map(|_| next() as u8).collect();
                    f.write_all(&junk).unwrap();
                }
            }
            // A garbage write-ahead log beside it.
            _ => fs::write(with_suffix(&db, "-wal"), (0..70_000).map(|_| next() as u8).collect::<Vec<u8>>()).unwrap(),
        }
        drop(f);
        let o = env.run(&["search", "tomatoes watering", "--json"]);
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert_eq!(v["results"][0]["path"], "memory/garden.md", "round {round}: a wrong answer from a damaged index: {v}");
        } else {
            let said = text(&o);
            assert!(
                said.contains("index") && (said.contains("damaged") || said.contains("malformed") || said.contains("corrupt")),
                "round {round}: {said}"
            );
        }
        let o = env.run(cure);
        assert!(o.status.success(), "round {round}: memory {cure:?} did not recover: {}", text(&o));
        answers_correctly(&env);
        assert_eq!(env.notes(), notes, "round {round}");
    }
}

/// `cmd` run without the capabilities that let root read any file (`setpriv` drops CAP_DAC_OVERRIDE and
/// CAP_DAC_READ_SEARCH from its bounding set), so that a `chmod 000` note is unreadable to it as to a user.
/// `None` (printed) where setpriv is missing or refused.
// Unix only: setpriv and chmod 000 are Linux's.
#[cfg(unix)]
fn unprivileged(cmd: &Command) -> Option<Command> {
    let probe = Command::new("setpriv").args(["--bounding-set=-dac_override,-dac_read_search", "true"]).output();
    if !probe.as_ref().is_ok_and(|o| o.status.success()) {
        conformance::testing::skipped("a test of unreadable notes", &format!("setpriv cannot drop the file-reading capabilities here ({probe:?})"));
        return None;
    }
    let mut c = Command::new("setpriv");
    c.arg("--bounding-set=-dac_override,-dac_read_search").arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.stdin(std::process::Stdio::null());
    Some(c)
}

/// Item 7: a note that cannot be read when indexed is said to be unreadable (not binary), and is indexed as soon as
/// it can be read: by the next `index` and by the next search (a chmod moves no mtime).
// Unix only: setpriv and chmod 000 are Linux's.
#[cfg(unix)]
#[test]
fn an_unreadable_note_is_retried_and_said_unreadable() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    let garden = env.ws.join("memory/garden.md");
    fs::set_permissions(&garden, fs::Permissions::from_mode(0o000)).unwrap();
    let Some(mut index) = unprivileged(&{
        let mut c = env.cmd();
        c.args(["index", "--json"]);
        c
    }) else {
        return;
    };
    let o = index.output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("memory/garden.md: skipped: unreadable (permission denied)"), "{}", text(&o));
    let mut status = unprivileged(&{
        let mut c = env.cmd();
        c.args(["status", "--json"]);
        c
    })
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&status.output().unwrap().stdout).unwrap();
    let skipped = v["skipped"].to_string();
    assert!(skipped.contains("unreadable (permission denied)") && skipped.contains("memory/garden.md"), "{v}");
    assert!(!skipped.contains("binary"), "an unreadable note is called binary: {v}");

    // Readable again (same size, same mtime): the next search finds it, without an explicit index.
    fs::set_permissions(&garden, fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(env.found("tomatoes watering"), ["memory/garden.md"]);
    let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
    assert!(!v["warnings"].to_string().contains("garden") && !v["skipped"].to_string().contains("garden"), "{v}");

    // Unreadable again, then readable: `index` picks it up too.
    fs::set_permissions(&garden, fs::Permissions::from_mode(0o000)).unwrap();
    fs::write(env.ws.join("memory/other.md"), "# Other\n\nNothing to see.\n").unwrap();
    let o = unprivileged(&{
        let mut c = env.cmd();
        c.arg("index");
        c
    })
    .unwrap()
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    fs::set_permissions(&garden, fs::Permissions::from_mode(0o644)).unwrap();
    let o = env.ok(&["index", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["filesChanged"].as_u64().unwrap() + report["filesAdded"].as_u64().unwrap(), 1, "{report}");
    assert_eq!(env.found("tomatoes watering"), ["memory/garden.md"]);
}

/// Item 6's workspace, indexed while memory/garden.md had an old mtime: (the env, the garden note).
fn indexed_with_an_old_garden(tmp: &Path) -> (Env, PathBuf) {
    let env = Env::new(tmp.join("ws"), tmp.join("state"));
    let garden = env.ws.join("memory/garden.md");
    set_old_mtime(&garden);
    env.ok(&["index"]);
    (env, garden)
}

/// Rewrite the garden note about `word` (eight letters, as "tomatoes": the size stays) and put its old mtime back.
fn rewrite_garden(garden: &Path, word: &str) {
    assert_eq!(word.len(), "tomatoes".len(), "the rewrite must keep the size");
    fs::write(garden, format!("# Garden\n\nThe {word} need watering on Sundays.\n")).unwrap();
    set_old_mtime(garden);
}

fn set_old_mtime(p: &Path) {
    assert!(Command::new("touch").args(["-d", "2020-01-01"]).arg(p).status().unwrap().success());
}

/// Item 6: a rewrite that keeps the size and puts the mtime back (`touch -d`, `rsync -t`, `cp -p`, `tar x`) is
/// seen, by the next search and by `index`: the old text is never returned.
#[test]
fn a_rewrite_keeping_size_and_mtime_is_seen() {
    let tmp = tempfile::tempdir().unwrap();
    let (env, garden) = indexed_with_an_old_garden(tmp.path());
    assert_eq!(env.found("tomatoes"), ["memory/garden.md"]);
    let before = fs::metadata(&garden).unwrap();
    // Same length, other words, same mtime.
    rewrite_garden(&garden, "potatoes");
    let after = fs::metadata(&garden).unwrap();
    assert_eq!((before.len(), before.modified().unwrap()), (after.len(), after.modified().unwrap()));
    assert_eq!(env.found("potatoes"), ["memory/garden.md"], "the rewrite was not seen by the search");
    assert!(env.found("tomatoes").is_empty());

    // `index` sees the next one.
    rewrite_garden(&garden, "cabbages");
    let report: serde_json::Value = serde_json::from_slice(&env.ok(&["index", "--json"]).stdout).unwrap();
    assert_eq!(report["filesChanged"], 1, "{report}");
    assert_eq!(env.found("cabbages"), ["memory/garden.md"]);
}

/// Item 6 in `memory serve` (the issue's case: its change journal saw the write): the rewrite is returned, the
/// old text never again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_sees_a_rewrite_keeping_size_and_mtime() {
    let tmp = tempfile::tempdir().unwrap();
    let (env, garden) = indexed_with_an_old_garden(tmp.path());
    for extra in [&["--no-watch"][..], &[]] {
        let client = serve::connect(&env, extra).await;
        // Twice: the second search runs with the change journal armed.
        for _ in 0..2 {
            assert_eq!(serve::found(&client, "watering").await, ["memory/garden.md"]);
        }
        for word in ["potatoes", "cabbages", "tomatoes"] {
            rewrite_garden(&garden, word);
            assert_eq!(serve::found(&client, word).await, ["memory/garden.md"], "{extra:?}: {word}");
        }
        client.cancel().await.unwrap();
    }
}

/// Bytes in use on the file system holding `p` (statvfs through `df`, in KiB).
fn used_kib(p: &Path) -> u64 {
    let o = Command::new("df").args(["-k", "--output=used"]).arg(p).output().unwrap();
    String::from_utf8_lossy(&o.stdout).lines().nth(1).unwrap().trim().parse().unwrap()
}

/// Notes enough for an index of some hundreds of KiB.
fn many_notes(env: &Env, n: usize) {
    let words = ["gateway", "deploy", "billing", "invoice", "kubernetes", "canary", "database", "migration", "backup", "latency", "roadmap"];
    for i in 0..n {
        let mut text = format!("# Note {i}\n\n");
        for j in 0..120 {
            text.push_str(words[(i * 7 + j * 3) % words.len()]);
            text.push_str(&format!(" w{i}x{j} "));
        }
        fs::write(env.ws.join(format!("memory/note-{i}.md")), text).unwrap();
    }
}

/// A workspace in `tmp` whose state folder is on a disk of `size` of its own (under `tmp`); `None` where no disk
/// can be mounted (the test then returns, as [`Tmpfs::mount`] says).
fn state_on_a_small_disk(tmp: &Path, size: &str) -> Option<(Tmpfs, Env)> {
    let disk = Tmpfs::mount(&tmp.join("disk"), size)?;
    let env = Env::new(tmp.join("ws"), disk.dir.join("state"));
    Some((disk, env))
}

/// Item 5: `index --force` on a state disk without room for the new generation fails, says why, and removes what
/// it wrote: the disk is as free as before, and the old index still answers and syncs.
#[test]
fn a_forced_rebuild_that_fills_the_disk_leaves_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((disk, env)) = state_on_a_small_disk(tmp.path(), "16m") else { return };
    many_notes(&env, 300);
    env.ok(&["index"]);
    let db = live_db(&env);
    let index_kib = fs::metadata(&db).unwrap().len() / 1024;
    assert!(index_kib > 200, "index too small for the test: {index_kib} KiB");
    let filler = disk.fill_leaving(index_kib * 1024 / 2);
    let used = used_kib(&disk.dir);
    let notes = env.notes();

    let o = env.run(&["index", "--force"]);
    assert!(!o.status.success(), "a rebuild without room succeeded: {}", text(&o));
    assert!(text(&o).contains("full"), "{}", text(&o));
    let left: Vec<String> = fs::read_dir(db.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".g1"))
        .collect();
    assert!(left.is_empty(), "the failed staging generation was left behind: {left:?}");
    assert!(used_kib(&disk.dir) <= used + 8, "the failed rebuild keeps the disk full ({} KiB used, {used} before)", used_kib(&disk.dir));
    assert_eq!(env.notes(), notes);
    // The old index answers, and syncs a change.
    fs::write(env.ws.join("memory/garden.md"), "# Garden\n\nThe potatoes need watering on Sundays.\n").unwrap();
    assert_eq!(env.found("potatoes"), ["memory/garden.md"]);
    // Room again: the rebuild succeeds.
    fs::remove_file(filler).unwrap();
    env.ok(&["index", "--force"]);
    answers_after_rebuild(&env);
}

fn answers_after_rebuild(env: &Env) {
    assert_eq!(env.found("potatoes"), ["memory/garden.md"]);
    assert_eq!(env.found("E4012").first().map(String::as_str), Some("memory/2026-11-29.md"));
}

/// Item 10: with the state disk read-only, then full, the one-shot commands still answer: `get` needs no index,
/// searches answer from the index as it is (saying that changed notes are not in it and why), `status` reports,
/// and what must write (`index`) fails with an error naming the path and the cause. Once the disk is writable
/// again, everything catches up.
#[test]
fn one_shot_commands_answer_from_a_read_only_or_full_state_disk() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((disk, env)) = state_on_a_small_disk(tmp.path(), "8m") else { return };
    env.ok(&["index"]);
    // Past the settle window: the notes indexed moments after they were written are read again by the next check,
    // and the sync that would settle their records cannot write; they are current all the same, not "changed".
    std::thread::sleep(std::time::Duration::from_millis(2_100));
    let notes_dir = env.ws.join("memory");
    for (round, fault) in ["read-only", "full"].into_iter().enumerate() {
        let filler = match fault {
            "read-only" => {
                assert!(Command::new("mount").args(["-o", "remount,ro"]).arg(&disk.dir).status().unwrap().success());
                None
            }
            _ => Some(disk.fill_leaving(0)),
        };
        let o = env.ok(&["get", "MEMORY.md"]);
        assert!(String::from_utf8_lossy(&o.stdout).contains("Mac Studio"), "{fault}: {}", text(&o));
        assert_eq!(env.found("tomatoes"), ["memory/garden.md"], "{fault}");
        // Said in the answer itself (an MCP client sees no stderr), with the cause.
        let v: serde_json::Value = serde_json::from_slice(&env.ok(&["search", "tomatoes", "--json"]).stdout).unwrap();
        assert!(v["warnings"].to_string().contains("read-only"), "{fault}: {v}");
        let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
        assert!(v["warnings"].to_string().contains("read-only"), "{fault}: {v}");
        // A note written meanwhile: the answer comes from the index as it is, and says why the note is not in it.
        let word = ["zorblax", "quuxinate"][round];
        fs::write(notes_dir.join(format!("{word}.md")), format!("# {word}\n\nThe {word} lives here.\n")).unwrap();
        let o = env.ok(&["search", "tomatoes", "--json"]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["results"][0]["path"], "memory/garden.md", "{fault}: {v}");
        let said = format!("{} {}", v["warnings"], text(&o));
        let cause = if fault == "read-only" { "read-only" } else { "space" };
        assert!(said.to_lowercase().contains(cause) && said.contains(&env.state.display().to_string()), "{fault}: {said}");
        // The note is named, so that the agent can read it meanwhile; the notes that did not change are not counted.
        assert!(said.contains(&format!("memory/{word}.md changed and is not in the index yet")), "{fault}: {said}");
        assert!(said.contains("read it with memory_get"), "{fault}: {said}");
        env.ok(&["status", "--json"]);
        for command in [&["index"][..], &["index", "--force"]] {
            let o = env.run(command);
            assert!(!o.status.success(), "{fault}: {command:?} succeeded on a {fault} disk");
            let said = text(&o);
            assert!(said.to_lowercase().contains(cause) && said.contains(&env.state.display().to_string()), "{fault}: {command:?}: {said}");
        }
        let staging: Vec<_> =
            fs::read_dir(live_db(&env).parent().unwrap()).unwrap().flatten().filter(|e| e.file_name().to_string_lossy().contains(".g1")).collect();
        assert!(staging.is_empty(), "{fault}: a failed rebuild left {staging:?}");

        match filler {
            None => assert!(Command::new("mount").args(["-o", "remount,rw"]).arg(&disk.dir).status().unwrap().success()),
            Some(f) => fs::remove_file(f).unwrap(),
        }
        assert_eq!(env.found(word), [format!("memory/{word}.md")], "{fault}: not caught up once writable");
    }
}

/// A `memory serve` of `env` with an MCP client, and its `memory_search`.
mod serve {
    use rmcp::model::{CallToolRequestParams, CallToolResult};
    use rmcp::service::{RoleClient, RunningService};
    use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
    use rmcp::ServiceExt;
    use serde_json::{json, Value};
    use std::time::Duration;

    const LIMIT: Duration = Duration::from_secs(30);

    pub async fn connect(env: &super::Env, extra: &[&str]) -> RunningService<RoleClient, ()> {
        let mut std_cmd = env.cmd();
        std_cmd.arg("serve").args(extra);
        let cmd = tokio::process::Command::from(std_cmd);
        let transport = TokioChildProcess::new(cmd.configure(|_| {})).unwrap();
        tokio::time::timeout(LIMIT, ().serve(transport)).await.expect("handshake timed out").expect("handshake failed")
    }

    pub async fn found(client: &RunningService<RoleClient, ()>, query: &str) -> Vec<String> {
        let params = CallToolRequestParams::new("memory_search").with_arguments(json!({ "query": query }).as_object().unwrap().clone());
        let r: CallToolResult = tokio::time::timeout(LIMIT, client.call_tool(params)).await.expect("tool call timed out").expect("tool call failed");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).expect("text content");
        let v: Value = serde_json::from_str(&text).unwrap();
        v["results"].as_array().unwrap().iter().map(|r| r["path"].as_str().unwrap().to_string()).collect()
    }
}

/// Item 9: `reset --yes` while `memory serve` runs: the server follows the reset (as it follows a rebuild swapped
/// in) instead of reading and writing the deleted index, so there is one index, which both see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_while_serve_runs_leaves_one_index() {
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    env.ok(&["index"]);
    for extra in [&["--no-watch"][..], &[]] {
        let client = serve::connect(&env, extra).await;
        assert_eq!(serve::found(&client, "tomatoes").await, ["memory/garden.md"]);
        assert_eq!(serve::found(&client, "tomatoes").await, ["memory/garden.md"]);
        env.ok(&["reset", "--yes"]);
        let word = if extra.is_empty() { "quuxinate" } else { "zorblax" };
        fs::write(env.ws.join(format!("memory/{word}.md")), format!("# {word}\n\nThe {word} lives here.\n")).unwrap();
        assert_eq!(serve::found(&client, word).await, [format!("memory/{word}.md")], "{extra:?}");
        // What the server synced is in the index the one-shot commands see.
        let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
        assert_eq!(v["files"], env.notes().len(), "{extra:?}: the server wrote into another index: {v}");
        assert_eq!(env.found(word), [format!("memory/{word}.md")]);
        client.cancel().await.unwrap();
    }
}

/// Item 14: a file name that is not UTF-8 (`memory/$'\xff'.md`) is skipped with a warning naming it, never indexed
/// under a lossy key that collides with a real `memory/\u{fffd}.md`: `index` settles and the real file answers.
// Unix only: only Unix file names can be bytes that are not UTF-8.
#[cfg(unix)]
#[test]
fn file_names_that_are_not_utf8_are_skipped_not_confused() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    let raw = env.ws.join("memory").join(std::ffi::OsStr::from_bytes(b"\xff.md"));
    fs::write(&raw, "# Raw\n\nzorblax from the raw name\n").unwrap();
    fs::write(env.ws.join("memory/\u{fffd}.md"), "# Real\n\nzorblax from the real name\n").unwrap();
    let o = env.ok(&["index", "--json"]);
    assert!(text(&o).contains("not UTF-8"), "no warning: {}", text(&o));
    for _ in 0..2 {
        let report: serde_json::Value = serde_json::from_slice(&env.ok(&["index", "--json"]).stdout).unwrap();
        assert_eq!((report["filesAdded"].as_u64(), report["filesChanged"].as_u64()), (Some(0), Some(0)), "index never settles: {report}");
    }
    let v: serde_json::Value = serde_json::from_slice(&env.ok(&["search", "zorblax", "--json"]).stdout).unwrap();
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{v}");
    assert_eq!(results[0]["path"], "memory/\u{fffd}.md");
    assert!(results[0]["snippet"].as_str().unwrap().contains("real name"), "{v}");
    let o = env.ok(&["get", "memory/\u{fffd}.md"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("real name"));
}

/// The disk of the state folder fills up during a first index, then during an incremental sync: the command fails
/// saying the disk is full and where; the notes are untouched; searches and status still answer (truthfully: the
/// index is not fresh); once there is room, `index` completes to what an undisturbed index holds.
#[test]
fn a_sync_that_fills_the_disk_fails_cleanly_and_completes_later() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((disk, env)) = state_on_a_small_disk(tmp.path(), "16m") else { return };
    many_notes(&env, 300);
    // How large the index grows, measured on another disk.
    let reference = Env { state: tmp.path().join("reference"), ..Env::new(env.ws.clone(), tmp.path().join("reference")) };
    reference.ok(&["index"]);
    let index_bytes = fs::metadata(live_db(&reference)).unwrap().len();
    let notes = env.notes();
    for phase in ["first index", "incremental sync"] {
        if phase == "incremental sync" {
            for i in 300..450 {
                fs::write(env.ws.join(format!("memory/note-{i}.md")), format!("# Note {i}\n\nunique{i} {}\n", "later words ".repeat(80))).unwrap();
            }
        }
        let notes = env.notes();
        let filler = disk.fill_leaving(index_bytes / 3);
        let o = env.run(&["index"]);
        assert!(!o.status.success(), "{phase}: an index without room succeeded");
        let said = text(&o);
        assert!(said.contains("full") && said.contains(&env.state.display().to_string()), "{phase}: {said}");
        assert_eq!(env.notes(), notes, "{phase}");
        // Searches answer, or say what is wrong; status tells the truth.
        let o = env.run(&["search", "unique310 gateway", "--json"]);
        if o.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            assert!(!v["warnings"].as_array().unwrap().is_empty() || phase == "first index", "{phase}: a partial answer without a warning: {v}");
        } else {
            assert!(text(&o).contains("full"), "{phase}: {}", text(&o));
        }
        let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
        assert_eq!(v["dirty"], true, "{phase}: an incomplete index reported fresh: {v}");
        fs::remove_file(filler).unwrap();
        env.ok(&["index"]);
        let v: serde_json::Value = serde_json::from_slice(&env.ok(&["status", "--json"]).stdout).unwrap();
        assert_eq!((v["files"].as_u64().unwrap() as usize, &v["dirty"]), (env.notes().len(), &serde_json::Value::Bool(false)), "{phase}: {v}");
        assert_eq!(env.found("w42x7").first().map(String::as_str), Some("memory/note-42.md"));
    }
    assert_eq!(env.found("unique310"), ["memory/note-310.md"]);
    let _ = notes;
}

/// `memory append` with the state disk read-only: the entry is written (the notes are on another disk) and the
/// command says it is not indexed yet and why; once writable, the next search finds it.
#[test]
fn append_with_a_read_only_state_disk_writes_the_entry_and_says_it_is_not_indexed() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((disk, env)) = state_on_a_small_disk(tmp.path(), "8m") else { return };
    env.ok(&["index"]);
    assert!(Command::new("mount").args(["-o", "remount,ro"]).arg(&disk.dir).status().unwrap().success());
    let o = env.ok(&["append", "The zorblax is kept in the shed"]);
    let said = text(&o);
    assert!(said.contains("not indexed yet") && said.to_lowercase().contains("read-only"), "{said}");
    let log = fs::read_to_string(env.ws.join(format!("memory/{}.md", today()))).unwrap();
    assert_eq!(log.matches("zorblax").count(), 1, "{log}");
    assert!(Command::new("mount").args(["-o", "remount,rw"]).arg(&disk.dir).status().unwrap().success());
    assert_eq!(env.found("zorblax"), [format!("memory/{}.md", today())]);
}

/// Item 8: a write-ahead log with real frames (written while `memory serve` holds the index open, so it is not
/// checkpointed away) is scribbled over: the next one-shot search answers correctly or says the index is
/// damaged, and `index --force` recovers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_write_ahead_log_is_recovered() {
    let tmp = tempfile::tempdir().unwrap();
    let env = Env::new(tmp.path().join("ws"), tmp.path().join("state"));
    many_notes(&env, 40);
    env.ok(&["index"]);
    let client = serve::connect(&env, &["--no-watch"]).await;
    assert_eq!(serve::found(&client, "tomatoes").await, ["memory/garden.md"]);
    for i in 40..120 {
        fs::write(env.ws.join(format!("memory/note-{i}.md")), format!("# Note {i}\n\nlate{i} {}\n", "written while served ".repeat(30))).unwrap();
    }
    env.ok(&["index"]);
    let wal = with_suffix(&live_db(&env), "-wal");
    let len = fs::metadata(&wal).map_or(0, |m| m.len());
    if len <= 32 + 24 + 4096 {
        conformance::testing::skipped("a torn write-ahead log", &format!("SQLite kept no frames in the WAL ({len} bytes)"));
        client.cancel().await.unwrap();
        return;
    }
    let mut bytes = fs::read(&wal).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for at in (32..bytes.len()).step_by(997) {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        bytes[at] ^= (seed as u8) | 1;
    }
    fs::write(&wal, &bytes).unwrap();
    let o = env.run(&["search", "tomatoes watering", "--json"]);
    if o.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["results"][0]["path"], "memory/garden.md", "a wrong answer from a damaged WAL: {v}");
        eprintln!("damaged WAL ({len} bytes): the search answered correctly; warnings {}", v["warnings"]);
    } else {
        let said = text(&o);
        assert!(said.contains("index") && (said.contains("damaged") || said.contains("malformed") || said.contains("corrupt")), "{said}");
        eprintln!("damaged WAL ({len} bytes): the search said {said}");
    }
    client.cancel().await.unwrap();
    env.ok(&["index", "--force"]);
    answers_correctly(&env);
    assert_eq!(env.found("late77"), ["memory/note-77.md"]);
}
