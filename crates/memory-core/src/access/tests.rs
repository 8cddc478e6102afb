use super::*;
use std::fs;

fn setup() -> (tempfile::TempDir, MemoryRoots) {
    let d = tempfile::tempdir().unwrap();
    fs::create_dir_all(d.path().join("memory")).unwrap();
    fs::write(d.path().join("MEMORY.md"), "one\ntwo\nthree\n").unwrap();
    fs::write(d.path().join("memory/2026-11-29.md"), "log").unwrap();
    fs::write(d.path().join("secret.md"), "s").unwrap();
    fs::write(d.path().join("memory/data.txt"), "t").unwrap();
    let roots = MemoryRoots::new(d.path(), &[] as &[String]);
    (d, roots)
}

fn get(roots: &MemoryRoots, path: &str) -> Result<GetResponse> {
    read(roots, &GetRequest { path: path.into(), from: None, lines: None, offset: None }, 1 << 20)
}

#[test]
fn reads_memory_files_and_line_ranges() {
    let (_d, roots) = setup();
    let r = get(&roots, "MEMORY.md").unwrap();
    assert_eq!(r.text, "one\ntwo\nthree");
    assert_eq!(r.total_lines, 3);
    let r = read(&roots, &GetRequest { path: "MEMORY.md".into(), from: Some(2), lines: Some(1), offset: None }, 1 << 20).unwrap();
    assert_eq!(r.text, "two");
    assert_eq!((r.from, r.lines), (2, 1));
    assert_eq!(get(&roots, "./memory/2026-11-29.md").unwrap().text, "log");
}

#[test]
fn refusals() {
    let (d, roots) = setup();
    for bad in ["../etc/passwd.md", "memory/../secret.md", "/etc/passwd", "secret.md", "memory/data.txt", "notes/x.md"] {
        let e = get(&roots, bad).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Refused, "{bad}: {e}");
    }
    let abs_outside = std::env::temp_dir().join("x.md");
    assert_eq!(get(&roots, abs_outside.to_str().unwrap()).unwrap_err().kind(), crate::ErrorKind::Refused);
    // An absolute path inside the workspace's memory is fine.
    let abs = d.path().join("MEMORY.md");
    assert_eq!(get(&roots, abs.to_str().unwrap()).unwrap().text, "one\ntwo\nthree");
}

#[cfg(unix)]
#[test]
fn links_are_refused() {
    let (d, roots) = setup();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("o.md"), "outside").unwrap();
    std::os::unix::fs::symlink(outside.path().join("o.md"), d.path().join("memory/link.md")).unwrap();
    std::os::unix::fs::symlink(outside.path(), d.path().join("memory/dir")).unwrap();
    assert_eq!(get(&roots, "memory/link.md").unwrap_err().kind(), crate::ErrorKind::Refused);
    assert_eq!(get(&roots, "memory/dir/o.md").unwrap_err().kind(), crate::ErrorKind::Refused);
}

#[test]
fn missing_daily_log_is_empty_not_an_error() {
    let (_d, roots) = setup();
    let r = get(&roots, "memory/2030-01-01.md").unwrap();
    assert!(r.missing);
    assert_eq!(r.text, "");
}

#[test]
fn extra_paths_are_readable() {
    let (d, _) = setup();
    let extra = tempfile::tempdir().unwrap();
    fs::write(extra.path().join("team.md"), "team notes").unwrap();
    let roots = MemoryRoots::new(d.path(), &[extra.path().display().to_string()]);
    let p = extra.path().join("team.md");
    assert_eq!(get(&roots, p.to_str().unwrap()).unwrap().text, "team notes");
    let sibling = extra.path().parent().unwrap().join("other.md");
    assert_eq!(get(&roots, sibling.to_str().unwrap()).unwrap_err().kind(), crate::ErrorKind::Refused);
}

#[test]
fn default_excerpt_is_bounded_with_a_note() {
    let text: String = (1..=300).map(|i| format!("line {i}\n")).collect();
    let r = excerpt("memory/x.md".into(), &text, None, None, None);
    assert_eq!(r.lines, DEFAULT_LINES);
    assert!(r.truncated);
    assert!(r.note.as_deref().unwrap().contains("from=121"));
    let wide = "y".repeat(200);
    let text: String = (0..100).map(|_| format!("{wide}\n")).collect();
    let r = excerpt("memory/x.md".into(), &text, None, None, None);
    assert!(r.text.chars().count() <= DEFAULT_MAX_CHARS);
    assert!(r.truncated);
    let r = excerpt("memory/x.md".into(), "a\nb", Some(5), None, None);
    assert_eq!(r.text, "");
}

#[test]
fn a_line_longer_than_the_limit_is_read_in_parts() {
    // One line of 30,000 characters (multi-byte ones), then a short one.
    let long: String = (0..30_000).map(|i| if i % 2 == 0 { 'é' } else { 'x' }).collect();
    let text = format!("{long}\nafter\n");
    let r = excerpt("memory/x.md".into(), &text, None, None, None);
    assert_eq!((r.lines, r.truncated, r.next_offset), (1, true, Some(DEFAULT_MAX_CHARS)));
    assert!(r.note.as_deref().unwrap().contains("offset=12000"), "{:?}", r.note);
    let mut read: String = r.text.clone();
    let mut next = r.next_offset;
    while let Some(offset) = next {
        let r = excerpt("memory/x.md".into(), &text, Some(1), Some(1), Some(offset));
        read.push_str(&r.text);
        next = r.next_offset;
    }
    assert_eq!(read, long);
    // With room left, the rest of the line comes with the lines after it.
    let r = excerpt("memory/x.md".into(), &text, Some(1), None, Some(29_990));
    assert_eq!(r.text, format!("{}\nafter", &long[long.char_indices().nth(29_990).unwrap().0..]));
    assert!(!r.truncated);
}

#[test]
fn zero_lines_are_no_lines() {
    let r = excerpt("memory/x.md".into(), "a\nb\n", Some(1), Some(0), None);
    assert_eq!((r.text.as_str(), r.lines, r.total_lines), ("", 0, 2));
}

/// `memory_get` and discovery ask one classifier: every Markdown file of a workspace with files in and out of
/// every root (tool folders, a pattern that selects some, an extra file, the profile) is readable exactly when
/// discovery lists it.
#[test]
fn memory_get_reads_exactly_the_markdown_files_discovery_lists() {
    use crate::config::ExtraPath;
    let d = tempfile::tempdir().unwrap();
    let ws = d.path();
    let files = [
        "MEMORY.md",
        "USER.md",
        "notes.md",
        "single.md",
        "memory/a.md",
        "memory/sub/b.md",
        "memory/node_modules/x.md",
        "memory/.git/y.md",
        "memory/venv/deep/z.md",
        "extra/keep/k.md",
        "extra/drop/d.md",
        "extra/keep/node_modules/n.md",
        "other/o.md",
    ];
    for f in files {
        fs::create_dir_all(ws.join(f).parent().unwrap()).unwrap();
        fs::write(ws.join(f), "text").unwrap();
    }
    let extras = [ExtraPath::Pattern { path: "extra".into(), pattern: Some("keep/**/*.md".into()) }, ExtraPath::Path("single.md".into())];
    let roots = MemoryRoots::new(ws, &extras);
    let listed: std::collections::HashSet<String> = crate::discovery::discover(&roots).into_iter().map(|f| f.key).collect();
    for f in files {
        let readable = get(&roots, f);
        assert_eq!(readable.is_ok(), listed.contains(f), "{f}: read {readable:?}, listed {listed:?}");
    }
    // Something is listed and something refused in every root, or the test proves little.
    for (f, listed_too) in [("USER.md", true), ("memory/node_modules/x.md", false), ("extra/keep/k.md", true), ("extra/drop/d.md", false)] {
        assert_eq!(listed.contains(f), listed_too, "{f}");
    }
}
