use super::*;
use std::fs;

fn ws() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

fn keys(files: &[MemoryFile]) -> Vec<String> {
    files.iter().map(|f| f.key.clone()).collect()
}

/// The keys of the memory files found in the workspace `ws`, without extra paths.
fn found_in(ws: &Path) -> Vec<String> {
    keys(&discover(&MemoryRoots::new(ws, &[] as &[String])))
}

#[test]
fn finds_memory_md_daily_logs_and_nested_notes() {
    let d = ws();
    fs::write(d.path().join("MEMORY.md"), "# Long-term").unwrap();
    fs::create_dir_all(d.path().join("memory/projects/deep/er")).unwrap();
    fs::write(d.path().join("memory/2026-11-29.md"), "log").unwrap();
    fs::write(d.path().join("memory/projects/deep/er/note.md"), "n").unwrap();
    fs::write(d.path().join("memory/readme.txt"), "not md").unwrap();
    fs::write(d.path().join("notes.md"), "outside memory").unwrap();
    assert_eq!(found_in(d.path()), vec!["MEMORY.md", "memory/2026-11-29.md", "memory/projects/deep/er/note.md"]);
}

#[test]
fn memory_md_is_the_fallback_only() {
    let d = ws();
    fs::write(d.path().join("memory.md"), "lower").unwrap();
    let roots = MemoryRoots::new(d.path(), &[] as &[String]);
    let found = discover(&roots);
    // On a case-insensitive file system (Windows, macOS by default) both names are one file, which keeps the name
    // it was created with; either way exactly one is used, under its real name.
    assert_eq!(found.len(), 1);
    let case_insensitive = d.path().join("MEMORY.md").exists();
    assert_eq!(keys(&found), vec!["memory.md"]);
    fs::write(d.path().join("MEMORY.md"), "upper").unwrap();
    let found = discover(&roots);
    assert_eq!(keys(&found), vec![if case_insensitive { "memory.md" } else { "MEMORY.md" }]);
}

#[cfg(unix)]
#[test]
fn symlinks_are_skipped() {
    let d = ws();
    let outside = ws();
    fs::write(outside.path().join("secret.md"), "secret").unwrap();
    fs::create_dir_all(d.path().join("memory")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), d.path().join("memory/link.md")).unwrap();
    std::os::unix::fs::symlink(outside.path(), d.path().join("memory/linkdir")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.md"), d.path().join("MEMORY.md")).unwrap();
    fs::write(d.path().join("memory/real.md"), "real").unwrap();
    assert_eq!(found_in(d.path()), vec!["memory/real.md"]);
}

#[test]
fn ignored_folders_are_not_walked() {
    let d = ws();
    for dir in IGNORED_DIRS {
        fs::create_dir_all(d.path().join("memory").join(dir)).unwrap();
        fs::write(d.path().join("memory").join(dir).join("x.md"), "x").unwrap();
    }
    fs::write(d.path().join("memory/keep.md"), "k").unwrap();
    assert_eq!(found_in(d.path()), vec!["memory/keep.md"]);
}

#[test]
fn extra_paths_files_and_folders_deduplicated() {
    let d = ws();
    let extra = ws();
    fs::create_dir_all(d.path().join("memory")).unwrap();
    fs::write(d.path().join("memory/a.md"), "a").unwrap();
    fs::create_dir_all(extra.path().join("sub")).unwrap();
    fs::write(extra.path().join("sub/b.md"), "b").unwrap();
    fs::write(extra.path().join("c.txt"), "c").unwrap();
    fs::create_dir_all(d.path().join("docs")).unwrap();
    fs::write(d.path().join("docs/d.md"), "d").unwrap();
    let roots = MemoryRoots::new(d.path(), &[extra.path().display().to_string(), "docs".into(), "memory".into(), "missing-folder".into()]);
    let found = discover(&roots);
    let mut k = keys(&found);
    k.sort();
    // A key joins its components with `/`, on Windows too.
    let b = format!("{}/sub/b.md", extra.path().display()).replace('\\', "/");
    let mut want = vec!["docs/d.md".to_string(), "memory/a.md".to_string(), b];
    want.sort();
    assert_eq!(k, want, "memory/ listed twice is found once");
}

#[test]
fn binary_non_utf8_and_huge_files_are_skipped_with_a_reason() {
    let d = ws();
    let p = d.path().join("x.md");
    fs::write(&p, b"abc\0def").unwrap();
    assert_eq!(read_text(&p, 1000), Err(SkipReason::Binary));
    fs::write(&p, [0x66, 0xff, 0xfe, 0x67]).unwrap();
    assert_eq!(read_text(&p, 1000), Err(SkipReason::NotUtf8));
    fs::write(&p, "x".repeat(2000)).unwrap();
    assert!(matches!(read_text(&p, 1000), Err(SkipReason::TooLarge { .. })));
    fs::write(&p, "\u{feff}# bom").unwrap();
    assert_eq!(read_text(&p, 1000).unwrap(), "# bom");
}

#[test]
fn dates_from_daily_log_names() {
    assert!(date_from_path("memory/2026-11-29.md").is_some());
    assert!(date_from_path("memory/a/b/2026-11-29-standup.md").is_some());
    assert!(date_from_path("memory/2026-11-29x.md").is_none());
    assert!(date_from_path("memory/2026-13-40.md").is_none());
    assert!(date_from_path("memory/notes.md").is_none());
    assert!(is_evergreen("MEMORY.md"));
    assert!(is_evergreen("memory/people.md"));
    assert!(!is_evergreen("memory/2026-11-29.md"));
    assert!(!is_evergreen("docs/x.md"));
}

#[test]
fn dates_in_names_of_every_script_never_panic() {
    // Byte 10 of these names is inside a character: the date slice must not panic (issue 19).
    for name in [
        "memory/会议记录.md",
        "memory/打ち合わせ.md",
        "memory/회의록입니다.md",
        "memory/اجتماع-مهم.md",
        "memory/🎉🎉🎉.md",
        "memory/e\u{301}e\u{301}e\u{301}e\u{301}.md",
    ] {
        assert_eq!(date_from_path(name), None, "{name}");
        assert!(is_evergreen(name), "{name}");
    }
    assert!(date_from_path("memory/2026-11-30-会议.md").is_some());
    assert_eq!(date_from_path("memory/2026-11-30会议.md"), None);
    assert_eq!(date_from_path("memory/2026-11-3é.md"), None);
}

#[test]
fn tilde_alone_is_home() {
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        assert_eq!(expand_home("~"), std::path::PathBuf::from(&home));
        assert_eq!(expand_home("~/notes"), std::path::PathBuf::from(home).join("notes"));
    }
    assert_eq!(expand_home("~user/x"), std::path::PathBuf::from("~user/x"));
}

#[test]
fn keys_are_the_same_on_the_fast_path_and_by_components() {
    let roots = MemoryRoots::new("/ws", &[] as &[String]);
    for (abs, key) in [
        ("/ws/memory/a.md", "memory/a.md"),
        ("/ws/memory/会议/b c.md", "memory/会议/b c.md"),
        ("/ws/memory//x.md", "memory/x.md"),
        ("/ws/memory/./y.md", "memory/y.md"),
        ("/ws/MEMORY.md", "MEMORY.md"),
    ] {
        assert_eq!(roots.key_for(std::path::Path::new(abs)), key, "{abs}");
    }
}

#[test]
fn a_large_folder_is_listed_whole_and_in_order() {
    let dir = ws();
    fs::create_dir_all(dir.path().join("memory")).unwrap();
    for i in 0..1500 {
        fs::write(dir.path().join(format!("memory/n{i:04}.md")), "x").unwrap();
    }
    let files = discover(&MemoryRoots::new(dir.path(), &[] as &[String]));
    assert_eq!(files.len(), 1500);
    assert!(files.windows(2).all(|w| w[0].key < w[1].key));
    assert_eq!(files[0].key, "memory/n0000.md");
}

#[test]
fn the_root_file_is_memory_md_over_lowercase_by_exact_name() {
    let ws = tempfile::tempdir().unwrap();
    assert_eq!(root_file_name(ws.path()), None);
    std::fs::write(ws.path().join("memory.md"), "x").unwrap();
    assert_eq!(root_file_name(ws.path()), Some("memory.md"));
    std::fs::write(ws.path().join("MEMORY.md"), "x").unwrap();
    let names: Vec<String> = std::fs::read_dir(ws.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    // On a case-insensitive file system the second write replaced nothing: the entry is still `memory.md`.
    let expected = if names.iter().any(|n| n == "MEMORY.md") { "MEMORY.md" } else { "memory.md" };
    assert_eq!(root_file_name(ws.path()), Some(expected));
    assert!(is_root_memory_name("MEMORY.md") && is_root_memory_name("memory.md") && is_root_memory_name("USER.md"));
    assert!(!is_root_memory_name("Memory.md") && !is_root_memory_name("notes.md"));
}

#[test]
fn a_change_is_relevant_where_discovery_looks() {
    let roots = MemoryRoots::new("/ws", &["/notes".to_string(), "/one/file.md".into(), "/later/folder".into()]).with_media(true);
    let sessions = Some(Path::new("/state/sessions"));
    let t = |p: &str| roots.is_relevant_change(Path::new(p), sessions);
    assert!(t("/ws/MEMORY.md"));
    assert!(t("/ws/memory.md"));
    assert!(t("/ws/memory"));
    assert!(!t("/ws/README.md"));
    assert!(!t("/ws/src/lib.rs"));
    assert!(t("/ws/memory/2026-11-30.md"));
    assert!(t("/ws/memory/projects"));
    assert!(!t("/ws/memory/.2026-11-30.md.swp"));
    assert!(!t("/ws/memory/node_modules/x.md"));
    assert!(t("/notes/a/b.MD"));
    assert!(t("/one/file.md"));
    assert!(!t("/one/other.md"));
    // Discovery's ignored folders, all of them.
    for d in IGNORED_DIRS {
        assert!(!roots.is_relevant_change(&Path::new("/ws/memory").join(d).join("x.md"), sessions), "{d}");
    }
    // Media under extra paths (multimodal), not under memory/; transcripts; an extra path appearing.
    assert!(t("/notes/photo.png"));
    assert!(!t("/ws/memory/photo.png"));
    assert!(t("/state/sessions/abc.jsonl"));
    assert!(!t("/state/sessions/abc.lock"));
    assert!(t("/later/folder"));
    let plain = roots.clone().with_media(false);
    assert!(!plain.is_relevant_change(Path::new("/notes/photo.png"), sessions));
    // Without the sessions source, transcripts are no memory files.
    assert!(!roots.is_relevant_change(Path::new("/state/sessions/abc.jsonl"), None));
    // An extra path inside memory/ is walked as an extra path too: its media count (discovery indexes them).
    let nested = MemoryRoots::new("/ws", &["/ws/memory/photos".to_string()]).with_media(true);
    assert!(nested.is_relevant_change(Path::new("/ws/memory/photos/cat.jpg"), None));
    assert!(!nested.is_relevant_change(Path::new("/ws/memory/cat.jpg"), None));
    // A path known to be a file: without an extension it is no memory file (a folder of that name could be).
    assert!(roots.is_relevant_change(Path::new("/ws/memory/README"), sessions));
    assert!(!roots.is_relevant_file_change(Path::new("/ws/memory/README"), sessions));
    assert!(!roots.is_relevant_file_change(Path::new("/ws/memory"), sessions));
    assert!(roots.is_relevant_file_change(Path::new("/ws/memory/a.md"), sessions));
}

/// Discovery indexes media under an extra path inside memory/, so the watcher's rule must count them (it asked
/// memory/'s rule only, which has no media, and missed them).
#[test]
fn media_under_an_extra_path_inside_memory_are_found_and_count_as_changes() {
    let dir = ws();
    let w = dir.path();
    fs::create_dir_all(w.join("memory/photos")).unwrap();
    fs::write(w.join("memory/photos/cat.png"), b"\x89PNG").unwrap();
    fs::write(w.join("memory/note.md"), "n\n").unwrap();
    let roots = MemoryRoots::new(w, &[w.join("memory/photos").display().to_string()]).with_media(true);
    assert_eq!(keys(&discover(&roots)), ["memory/note.md", "memory/photos/cat.png"]);
    assert!(roots.is_relevant_change(&w.join("memory/photos/cat.png"), None));
}

/// The walk sorts a folder's names by their first 16 bytes, then in full: the same order as a plain sort of the
/// names, for generated names that share long prefixes, are prefixes of one another, differ past byte 16, or hold
/// bytes of every script.
#[test]
fn the_prefix_sort_orders_names_as_a_plain_sort() {
    use proptest::prelude::*;
    use std::ffi::OsString;
    let part =
        prop_oneof![Just("2026-11-".to_string()), Just("a".to_string()), Just("é".to_string()), Just("日記".to_string()), "[ -~]{0,6}", "\\PC{0,3}"];
    let name = prop::collection::vec(part, 1..6).prop_map(|p| p.concat()).prop_filter("a name", |n| !n.is_empty() && !n.contains('\0'));
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    runner
        .run(&prop::collection::vec(name, 0..60), |names| {
            let mut plain: Vec<OsString> = names.iter().map(OsString::from).collect();
            let mut keyed: Vec<(u128, OsString)> = plain.iter().map(|n| (sort_prefix(n), n.clone())).collect();
            plain.sort();
            keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
            prop_assert_eq!(keyed.into_iter().map(|(_, n)| n).collect::<Vec<_>>(), plain);
            Ok(())
        })
        .unwrap();
}

/// What the freshness check of named files sees at a path is what a full listing holds there: for every path of
/// a workspace with root files of both names, the profile, tool folders, links, media, other files, an extra
/// folder with a pattern, an extra file and an extra folder inside `memory/`, each state of the root files.
#[test]
fn a_named_path_is_listed_exactly_when_a_full_listing_lists_it() {
    let d = ws();
    let outside = ws();
    let w = d.path();
    let put = |p: &Path| {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "x\n").unwrap();
    };
    let extra_dir = outside.path().join("notes");
    let patterned = outside.path().join("docs");
    let extra_file = outside.path().join("single.md");
    let mut paths = vec![
        w.join("USER.md"),
        w.join("notes.md"),
        w.join("memory/2026-12-01.md"),
        w.join("memory/a/b/deep.md"),
        w.join("memory/readme.txt"),
        w.join("memory/photo.png"),
        w.join("memory/node_modules/pkg/x.md"),
        w.join("memory/.git/y.md"),
        w.join("memory/inner/photo.png"),
        w.join("memory/inner/n.md"),
        extra_dir.join("a.md"),
        extra_dir.join("sub/photo.jpg"),
        extra_dir.join("data.csv"),
        patterned.join("keep/a.md"),
        patterned.join("drop/a.md"),
        extra_file.clone(),
    ];
    for p in &paths {
        put(p);
    }
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(w.join("memory/2026-12-01.md"), w.join("memory/link.md")).unwrap();
        paths.push(w.join("memory/link.md"));
    }
    paths.push(w.join("memory/never-written.md"));
    let extras = vec![
        ExtraPath::Path(extra_dir.display().to_string()),
        ExtraPath::Pattern { path: patterned.display().to_string(), pattern: Some("keep/**".into()) },
        ExtraPath::Path(extra_file.display().to_string()),
        ExtraPath::Path(w.join("memory/inner").display().to_string()),
    ];
    let roots = MemoryRoots::new(w, &extras).with_media(true);
    let root_states: [&[&str]; 4] = [&[], &["MEMORY.md"], &["memory.md"], &["MEMORY.md", "memory.md"]];
    for present in root_states {
        for name in ROOT_FILE_NAMES {
            let _ = fs::remove_file(w.join(name));
        }
        for name in present {
            put(&w.join(name));
        }
        let listed: std::collections::BTreeMap<String, PathBuf> = discover(&roots).into_iter().map(|f| (f.key, f.abs_path)).collect();
        let mut asked = paths.clone();
        asked.push(w.join("MEMORY.md"));
        for p in &asked {
            let found = discover_named(&roots, std::slice::from_ref(p)).expect("no hard links here");
            let key = roots.key_for(p);
            let here = found.iter().find(|(k, _)| *k == key).expect("the asked path is answered");
            assert_eq!(here.1.as_ref().map(|f| &f.abs_path), listed.get(&key), "{} with root files {present:?}", p.display());
            for (k, f) in &found {
                assert_eq!(f.as_ref().map(|f| &f.abs_path), listed.get(k), "{k} (brought by {}) with root files {present:?}", p.display());
            }
        }
    }
}

#[cfg(unix)]
#[test]
fn a_named_file_with_another_hard_link_asks_for_a_full_listing() {
    let d = ws();
    fs::create_dir_all(d.path().join("memory")).unwrap();
    fs::write(d.path().join("memory/a.md"), "a\n").unwrap();
    fs::hard_link(d.path().join("memory/a.md"), d.path().join("memory/b.md")).unwrap();
    let roots = MemoryRoots::new(d.path(), &[] as &[String]);
    assert!(discover_named(&roots, &[d.path().join("memory/a.md")]).is_none());
}

#[test]
fn the_classifier_answers_by_place_and_name() {
    let ws = Path::new("/ws");
    let roots = MemoryRoots::new(ws, &[ExtraPath::Pattern { path: "/x".into(), pattern: Some("*.md".into()) }, ExtraPath::Path("/f.md".into())])
        .with_media(true);
    let cases: [(&str, bool, Match); 16] = [
        ("/ws/MEMORY.md", false, Match::File(Place::RootFile)),
        ("/ws/memory.md", false, Match::File(Place::RootFile)),
        ("/ws/USER.md", false, Match::File(Place::Profile)),
        ("/ws/USER.md", true, Match::Outside),
        ("/ws/notes.md", false, Match::Outside),
        ("/ws/memory", true, Match::Folder),
        ("/ws/memory", false, Match::Outside),
        ("/ws/memory/2026-01-01.md", false, Match::File(Place::MemoryDir)),
        ("/ws/memory/photo.png", false, Match::Outside),
        ("/ws/memory/node_modules/a.md", false, Match::Outside),
        ("/ws/memory/node_modules", true, Match::Outside),
        ("/x", true, Match::Folder),
        ("/x/a.md", false, Match::File(Place::Extra(0))),
        ("/x/sub/a.md", false, Match::Outside),
        ("/x/photo.png", false, Match::Outside),
        ("/f.md", false, Match::File(Place::Extra(1))),
    ];
    for (path, is_dir, want) in cases {
        assert_eq!(roots.classify(Path::new(path), is_dir), want, "{path} (folder: {is_dir})");
    }
}

/// A rewrite that keeps a note's size and puts its mtime back (`touch -d`, `rsync -t`, a restore) still changes
/// what discovery says of the file (on Unix its ctime, on Windows its change time), whether the folder was listed
/// or the file was named; and both ways say the same of a file nothing touched, so a check of named files never
/// reads unchanged ones again.
#[test]
fn a_same_size_rewrite_that_puts_the_mtime_back_changes_the_files_identity() {
    let d = ws();
    let p = d.path().join("memory/note.md");
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(&p, "- the gate code is 4711\n").unwrap();
    let roots = MemoryRoots::new(d.path(), &[] as &[String]);
    let listed = |roots: &MemoryRoots| discover(roots).into_iter().find(|f| f.key == "memory/note.md").unwrap();
    let named = |roots: &MemoryRoots| discover_named(roots, std::slice::from_ref(&p)).unwrap().remove(0).1.unwrap();
    let before = listed(&roots);
    assert_eq!(named(&roots).stat, before.stat, "listed and named agree");
    assert_ne!(before.stat, StatId::default(), "the identity is known");
    let mtime = fs::metadata(&p).unwrap().modified().unwrap();
    // The change time moves with the clock: let it move past what the first write left.
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(&p, "- the gate code is 9033\n").unwrap();
    fs::File::options().write(true).open(&p).unwrap().set_modified(mtime).unwrap();
    let after = listed(&roots);
    assert_eq!((after.size, after.mtime_ms), (before.size, before.mtime_ms), "size and mtime as before");
    assert_ne!(after.stat, before.stat, "the rewrite is seen");
    assert_eq!(named(&roots).stat, after.stat, "listed and named agree");
}
