//! How a download shows its progress: a bar on standard error when it is a terminal, plain log lines (every
//! tenth of the file, at most one each 30 s otherwise) when it is not, so a service's log says how far it got.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tracing::{info, warn};

/// How often a log line may say how far the download got.
const LOG_EVERY: Duration = Duration::from_secs(30);

pub(super) struct Progress {
    bar: Option<ProgressBar>,
    name: String,
    total: Option<u64>,
    logged_tenth: u64,
    logged_at: Instant,
}

impl Progress {
    pub(super) fn start(name: &str, url: &str, total: Option<u64>, done: u64) -> Progress {
        // Said at the default log level: a download of hundreds of megabytes must not look like a hang.
        warn!(file = name, url, bytes = total, resumed_at = done, "downloading the local embedding model (once; progress with -v or on a terminal)");
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
            let template =
                if total.is_some() { "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}" } else { "{msg} {bytes} {bytes_per_sec}" };
            if let Ok(style) = ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(format!("downloading {name}"));
            bar.set_position(done);
            bar
        });
        let tenth = |d: u64| total.filter(|t| *t > 0).map_or(0, |t| d * 10 / t);
        Progress { bar, name: name.into(), total, logged_tenth: tenth(done), logged_at: Instant::now() }
    }

    pub(super) fn update(&mut self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
            return;
        }
        let since = self.logged_at.elapsed();
        let tenth = self.total.filter(|t| *t > 0).map_or(0, |t| done * 10 / t);
        // A tenth more, said at most once a second (a fast transfer says less); without a size, every 30 s.
        let due = if self.total.is_some() { tenth > self.logged_tenth && since >= Duration::from_secs(1) } else { since >= LOG_EVERY };
        if due {
            self.logged_tenth = tenth;
            self.logged_at = Instant::now();
            info!(file = %self.name, bytes = done, of = self.total, "model download progress");
        }
    }

    /// The transfer stopped before the end (it is tried again or reported by the caller).
    pub(super) fn abandon(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.abandon();
        }
    }

    pub(super) fn finish(&mut self, done: u64) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        info!(file = %self.name, bytes = done, "model downloaded and checked");
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.abandon();
    }
}
