//! The commit and build date `memory --version` names: a user reporting a problem can say exactly which build they
//! run. The commit is read from git when the build runs in a checkout (a build from a source package, no `.git`,
//! names none); the build date is `SOURCE_DATE_EPOCH` when set (reproducible builds), else today (UTC).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Rebuild when `path` (a git file, resolved for worktrees too) changes; a file that does not exist is not
/// named, or cargo would run this script on every build.
fn watch(git_path: &str) {
    if let Some(p) = git(&["rev-parse", "--git-path", git_path]) {
        if Path::new(&p).exists() {
            println!("cargo:rerun-if-changed={p}");
        }
    }
}

/// `YYYY-MM-DD` of a Unix time (UTC), by the civil-from-days algorithm (H. Hinnant), to need no date crate here.
fn date_of(unix_seconds: i64) -> String {
    let z = unix_seconds.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

fn build_date() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let seconds = std::env::var("SOURCE_DATE_EPOCH").ok().and_then(|v| v.trim().parse::<i64>().ok());
    date_of(seconds.unwrap_or(i64::try_from(now).unwrap_or(0)))
}

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let built = build_date();
    let long = match (git(&["rev-parse", "--short=10", "HEAD"]), git(&["show", "-s", "--format=%cs", "HEAD"])) {
        (Some(commit), Some(date)) => format!("{version} (commit {commit}, {date}; built {built})"),
        _ => format!("{version} (built {built})"),
    };
    println!("cargo:rustc-env=MEMORY_LONG_VERSION={long}");
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    // The checked-out commit moves with HEAD (a checkout) or with the branch it names (a commit).
    watch("HEAD");
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(&branch);
    }
    watch("packed-refs");
    println!("cargo:rerun-if-changed=build.rs");
}
