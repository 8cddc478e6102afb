//! QMD output parser: whatever `qmd` prints (arbitrary bytes, read lossily as the engine does) parses to hits or
//! an "unparsable qmd output" error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memory_core::ErrorKind;
use memory_qmd::parse::{parse_hits, parse_update, split_qmd_uri, split_snippet};
use memory_qmd::process::strip_ansi;

fuzz_target!(|data: &[u8]| {
    let out = String::from_utf8_lossy(data);
    let clean = strip_ansi(&out);
    assert!(!clean.contains('\u{1b}') && !clean.contains('\r'), "control codes left: {clean:?}");
    match parse_hits(&out) {
        Ok(hits) => {
            for h in hits {
                assert!(h.score.is_finite());
                let _ = split_qmd_uri(&h.file);
                if h.start_line.is_some() {
                    assert!(h.line_count.is_some());
                }
            }
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::Internal, "{e}");
            assert!(e.to_string().contains("unparsable qmd output"), "{e}");
        }
    }
    let counts = parse_update(&out);
    let _ = counts.files();
    let _ = split_snippet(&out);
    let _ = split_qmd_uri(&out);
});
