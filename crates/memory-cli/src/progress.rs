//! Progress bars on long indexing (files processed, chunks embedded), on stderr, only for people: hidden when
//! stderr is not a terminal or with `--json`.

use memory_core::locks::LockExt;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use memory_core::{ProgressFn, SyncProgress};

/// Syncs touching fewer files than this finish too fast to be worth a bar.
const MIN_FILES_FOR_BAR: usize = 50;

/// Should bars be drawn?
pub fn wanted(json: bool) -> bool {
    !json && std::io::stderr().is_terminal() && std::env::var_os("MEMORY_NO_PROGRESS").is_none()
}

/// A progress callback drawing one bar per sync; the bar is finished and cleared when the sync completes.
pub fn bar() -> ProgressFn {
    let slot: Arc<Mutex<Option<ProgressBar>>> = Arc::new(Mutex::new(None));
    Arc::new(move |p: SyncProgress| {
        let mut guard = slot.locked();
        if p.files_total < MIN_FILES_FOR_BAR {
            return;
        }
        let bar = guard.get_or_insert_with(|| new_bar(p.files_total as u64));
        if bar.length() != Some(p.files_total as u64) {
            // A new sync (or the rebuild after an identity change).
            *bar = new_bar(p.files_total as u64);
        }
        bar.set_position(p.files_done as u64);
        if p.chunks_embedded > 0 {
            bar.set_message(format!("{} chunks embedded", p.chunks_embedded));
        }
        if p.files_done >= p.files_total {
            bar.finish_and_clear();
            *guard = None;
        }
    })
}

fn new_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(10));
    bar.set_style(
        ProgressStyle::with_template("{spinner} indexing [{bar:30}] {pos}/{len} files {per_sec} {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}
