use super::*;

#[test]
fn short_text_is_one_chunk_with_line_numbers() {
    let c = chunk_text("# Title\n\nline two\nline three\n", 400, 80);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].start_line, c[0].end_line), (1, 4));
    assert_eq!(c[0].hash, crate::sha256_hex(c[0].text.as_bytes()));
}

#[test]
fn chunks_respect_budget_and_overlap() {
    let text: String = (1..=200).map(|i| format!("line {i:03} {}\n", "word ".repeat(10))).collect();
    let chunks = chunk_text(&text, 400, 80);
    assert!(chunks.len() > 1);
    for c in &chunks {
        assert!(c.text.chars().count() <= 1600, "chunk of {} chars", c.text.chars().count());
    }
    // Consecutive chunks overlap by trailing lines, and every line is covered.
    for w in chunks.windows(2) {
        assert!(
            w[1].start_line <= w[0].end_line,
            "overlap expected: {:?} then {:?}",
            (w[0].start_line, w[0].end_line),
            (w[1].start_line, w[1].end_line)
        );
        assert!(w[1].start_line > w[0].start_line, "progress");
    }
    assert_eq!(chunks.first().unwrap().start_line, 1);
    assert_eq!(chunks.last().unwrap().end_line, 200);
}

#[test]
fn cjk_characters_weigh_a_token_each() {
    let text = "咖".repeat(2000);
    let chunks = chunk_text(&text, 200, 40);
    assert!(chunks.len() >= 8, "{} chunks", chunks.len());
    for c in &chunks {
        assert!(c.text.chars().count() <= 200);
    }
    let no_overlap = chunk_text(&text, 200, 0);
    assert_eq!(no_overlap.iter().map(|c| c.text.chars().count()).sum::<usize>(), 2000);
}

#[test]
fn astral_characters_are_never_split() {
    let text = "𝄞😀".repeat(1000);
    let chunks = chunk_text(&text, 100, 0);
    assert!(chunks.len() > 1);
    let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(joined, text);
    for c in &chunks {
        assert_eq!(c.start_line, 1);
        assert!(c.text.chars().count() <= 400);
    }
}

#[test]
fn blank_chunks_are_dropped() {
    assert!(chunk_text("\n\n   \n\t\n", 400, 80).is_empty());
    assert!(chunk_text("", 400, 80).is_empty());
}

#[test]
fn a_long_line_among_short_ones() {
    let text = format!("short\n{}\nafter\n", "x".repeat(5000));
    let chunks = chunk_text(&text, 400, 80);
    assert!(chunks.iter().all(|c| c.text.chars().count() <= 1600));
    assert!(chunks.iter().any(|c| c.text.contains("after")));
    assert!(chunks.iter().any(|c| c.start_line == 2));
}

#[test]
fn importance_annotation() {
    assert_eq!(importance("x <!-- importance: 7 --> y"), Some(7));
    assert_eq!(importance("<!--importance:10-->"), Some(10));
    assert_eq!(importance("<!-- importance: 11 -->"), None);
    assert_eq!(importance("<!-- note --> <!-- importance: 2 -->"), Some(2));
    assert_eq!(importance("no annotation"), None);
}

#[test]
fn chunk_ids_depend_on_model_and_lines() {
    let a = chunk_id("memory", "MEMORY.md", 1, 2, "h", "m1");
    assert_ne!(a, chunk_id("memory", "MEMORY.md", 1, 2, "h", "m2"));
    assert_ne!(a, chunk_id("memory", "MEMORY.md", 1, 3, "h", "m1"));
    assert_eq!(a, chunk_id("memory", "MEMORY.md", 1, 2, "h", "m1"));
}

#[test]
fn huge_chunk_sizes_do_not_overflow() {
    // A crash of the fuzz/config target: `chunking.tokens: 4611686018427387904` is a valid config and overflowed the budget.
    let c = chunk_text("# t\nsome text\n", usize::MAX / 2, usize::MAX - 1);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].start_line, c[0].end_line), (1, 2));
}

/// A Markdown paragraph is often one long line: it is cut between sentences, never inside a word.
#[test]
fn a_long_paragraph_is_cut_between_sentences() {
    let sentence = "The gateway host is the Mac Studio in the office and it restarts at night. ";
    let paragraph = sentence.repeat(60); // ~4,500 characters on one line
    let text = format!("# Gateway notes\n\n{}\n", paragraph.trim_end());
    let chunks = chunk_text(&text, 400, 80);
    assert!(chunks.len() >= 3, "{} chunks", chunks.len());
    for c in &chunks {
        assert!(c.text.chars().count() <= 1600, "chunk of {} chars", c.text.chars().count());
        let body = c.text.rsplit('\n').next().unwrap();
        if body.starts_with("# ") || body.is_empty() {
            continue;
        }
        assert!(body.starts_with("The gateway"), "starts mid-sentence: {:?}", &body[..20]);
        assert!(body.trim_end().ends_with('.'), "ends mid-sentence: {:?}", &body[body.len() - 20..]);
    }
    // Without overlap, the pieces of the paragraph concatenate back to it.
    let plain = chunk_text(&paragraph, 400, 0);
    assert_eq!(plain.iter().map(|c| c.text.as_str()).collect::<String>(), paragraph.trim_end_matches('\n'));
}

#[test]
fn a_long_line_without_sentences_is_cut_between_words() {
    let line = (0..900).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ");
    let chunks = chunk_text(&line, 400, 0);
    assert!(chunks.len() > 1);
    for c in &chunks {
        assert!(c.text.chars().count() <= 1600);
        assert!(!c.text.starts_with(' ') && c.text.split(' ').all(|w| w.starts_with('w') || w.is_empty()), "a word was cut: {:?}", &c.text[..30]);
    }
    assert_eq!(chunks.iter().map(|c| c.text.as_str()).collect::<String>(), line);
}
