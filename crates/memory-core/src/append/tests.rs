use super::*;

#[test]
fn creates_memory_folder_and_day_heading() {
    let ws = tempfile::tempdir().unwrap();
    let a = append_entry_at(ws.path(), "Deploys go through the canary first", "2026-11-30", "09:15").unwrap();
    assert_eq!(a.path, "memory/2026-11-30.md");
    assert!(a.created);
    let text = std::fs::read_to_string(ws.path().join("memory/2026-11-30.md")).unwrap();
    assert_eq!(text, "# 2026-11-30\n\n- [09:15] Deploys go through the canary first\n");
    assert_eq!((a.start_line, a.end_line), (3, 3));
}

#[test]
fn appends_without_touching_existing_bytes() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("memory")).unwrap();
    let path = ws.path().join("memory/2026-11-30.md");
    // No trailing newline: the entry must start on a line of its own.
    std::fs::write(&path, "# Notes\n\nwritten by hand").unwrap();
    let a = append_entry_at(ws.path(), "line one\nline two\n\nline four", "2026-11-30", "10:00").unwrap();
    assert!(!a.created);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.starts_with("# Notes\n\nwritten by hand\n"), "{text}");
    assert!(text.ends_with("- [10:00] line one\n  line two\n\n  line four\n"), "{text}");
    assert_eq!((a.start_line, a.end_line), (4, 7));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[a.start_line - 1], "- [10:00] line one");
    assert_eq!(lines[a.end_line - 1], "  line four");
}

#[test]
fn refuses_empty_huge_and_links() {
    let ws = tempfile::tempdir().unwrap();
    assert!(matches!(append_entry_at(ws.path(), "  \n ", "2026-11-30", "10:00"), Err(MemoryError::InvalidInput(_))));
    let big = "x".repeat(MAX_ENTRY_BYTES + 1);
    assert!(matches!(append_entry_at(ws.path(), &big, "2026-11-30", "10:00"), Err(MemoryError::InvalidInput(_))));

    // Unix only: making a symbolic link needs a privilege on Windows.
    #[cfg(unix)]
    {
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(ws.path().join("memory")).unwrap();
        let target = outside.path().join("elsewhere.md");
        std::fs::write(&target, "keep me\n").unwrap();
        std::os::unix::fs::symlink(&target, ws.path().join("memory/2026-11-30.md")).unwrap();
        let e = append_entry_at(ws.path(), "hello", "2026-11-30", "10:00").unwrap_err();
        assert!(matches!(e, MemoryError::Refused(_)), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n");

        let ws2 = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws2.path().join("memory")).unwrap();
        assert!(matches!(append_entry_at(ws2.path(), "hello", "2026-11-30", "10:00"), Err(MemoryError::Refused(_))));
    }
}

#[test]
fn concurrent_writers_never_interleave_or_lose_entries() {
    let ws = tempfile::tempdir().unwrap();
    let threads = 8;
    let per = 50;
    std::thread::scope(|s| {
        for t in 0..threads {
            let ws = ws.path().to_path_buf();
            s.spawn(move || {
                for i in 0..per {
                    // Multi-line entries, long enough that a torn write would show.
                    let text = format!("writer {t} entry {i}\n{}", format!("payload-{t}-{i} ").repeat(40));
                    append_entry_at(&ws, &text, "2026-11-30", "11:11").unwrap();
                }
            });
        }
    });
    let text = std::fs::read_to_string(ws.path().join("memory/2026-11-30.md")).unwrap();
    assert_eq!(text.matches("# 2026-11-30\n").count(), 1, "exactly one creator writes the heading");
    assert!(text.starts_with("# 2026-11-30\n\n"));
    // A writer that sees the file mid-growth may start its entry with a blank line (harmless in Markdown);
    // what matters is that no entry is torn, lost or interleaved.
    let body: Vec<&str> = text.lines().skip(2).filter(|l| !l.is_empty()).collect();
    assert_eq!(body.len(), threads * per * 2);
    for pair in body.chunks(2) {
        let head = pair[0].strip_prefix("- [11:11] writer ").expect(pair[0]);
        let mut it = head.split(" entry ");
        let (t, i) = (it.next().unwrap(), it.next().unwrap());
        assert_eq!(pair[1], format!("  {}", format!("payload-{t}-{i} ").repeat(40).trim_end()));
    }
}
