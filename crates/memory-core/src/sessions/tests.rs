use super::*;

const TRANSCRIPT: &str = r#"{"type":"session","id":"abc","cwd":"/tmp"}
{"type":"message","message":{"role":"user","content":"Where   does the\n gateway run?"}}
{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"On the Mac Studio."},{"type":"toolCall","name":"exec","arguments":{"cmd":"ls"}}]}}
{"type":"message","message":{"role":"toolResult","content":[{"type":"text","text":"file listing"}]}}
{"type":"message","message":{"role":"user","content":[{"type":"image","data":"iVBORw0KGgo="},{"type":"text","text":"and this picture?"}]}}
{"type":"message","message":{"role":"system","content":"You are a helpful agent"}}
not json at all
{"type":"message","message":{"role":"assistant","content":[]}}
{"type":"message","message":{"role":"assistant","content":"half a line"#;

#[test]
fn only_user_and_assistant_text_is_kept_with_jsonl_line_numbers() {
    let f = flatten(TRANSCRIPT, 1);
    assert_eq!(f.lines, vec!["User: Where does the gateway run?", "Assistant: On the Mac Studio.", "User: and this picture?"]);
    assert_eq!(f.jsonl_lines, vec![2, 3, 5]);
    assert_eq!(f.records, 8, "the unterminated last line is left for later");
    let tail = flatten("{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"later\"}}\n", 42);
    assert_eq!(tail.jsonl_lines, vec![42]);
}

#[test]
fn secrets_are_redacted() {
    let cases = [
        ("my key is sk-proj-abcdefghijklmnopqrstuvwx ok", "sk-proj-"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc.def", "eyJhbGci"),
        ("clone https://bob:hunter2secret@example.com/repo.git", "hunter2secret"),
        ("aws AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdef"),
        ("password=correcthorse", "correcthorse"),
        ("GEMINI AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA123"),
    ];
    for (input, secret) in cases {
        let out = redact(input);
        assert!(!out.contains(secret), "{input} -> {out}");
        assert!(out.contains("[REDACTED]"), "{out}");
    }
    assert_eq!(redact("nothing secret here, see https://example.com/a"), "nothing secret here, see https://example.com/a");
    let line = r#"{"type":"message","message":{"role":"user","content":"use sk-ant-api03-abcdefghijklmnop please"}}"#;
    assert_eq!(message_text(line).unwrap(), "User: use [REDACTED] please");
}

#[test]
fn state_round_trips() {
    let s = SessionState { bytes: 1234, records: 10, messages: 7, prefix_hash: "ab:cd".into() };
    assert_eq!(SessionState::decode(&s.encode()), Some(s));
    assert_eq!(SessionState::decode("0123abcd"), None);
}

#[test]
fn discovery_lists_jsonl_only() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("a.jsonl"), "{}\n").unwrap();
    std::fs::write(d.path().join("b.txt"), "x").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(d.path().join("a.jsonl"), d.path().join("c.jsonl")).unwrap();
    let found = discover(d.path());
    assert_eq!(found.iter().map(|f| f.key.as_str()).collect::<Vec<_>>(), vec!["sessions/a.jsonl"]);
    assert_eq!(found[0].source, Source::Sessions);
}

#[test]
fn each_message_is_of_the_day_its_record_was_written() {
    let day = |s: &str| crate::discovery::day_millis(chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap());
    let local =
        |rfc: &str| crate::discovery::day_millis(chrono::DateTime::parse_from_rfc3339(rfc).unwrap().with_timezone(&chrono::Local).date_naive());
    let text = concat!(
        r#"{"type":"message","timestamp":"2026-03-04T10:00:00.000Z","message":{"role":"user","content":"a"}}"#,
        "\n",
        r#"{"type":"message","message":{"role":"assistant","content":"b","timestamp":1772877600000}}"#,
        "\n",
        r#"{"type":"message","message":{"role":"user","content":"c"}}"#,
        "\n",
        r#"{"type":"message","timestamp":"not a time","message":{"role":"user","content":"d"}}"#,
        "\n",
    );
    let f = flatten(text, 1);
    assert_eq!(f.days.len(), f.lines.len());
    assert_eq!(f.days[0], local("2026-03-04T10:00:00Z"));
    assert!(f.days[0] == day("2026-03-04") || f.days[0] == day("2026-03-05") || f.days[0] == day("2026-03-03"));
    assert_eq!(f.days[1], local("2026-03-07T10:00:00Z"));
    assert_eq!(f.days[2], None);
    assert_eq!(f.days[3], None);
}
