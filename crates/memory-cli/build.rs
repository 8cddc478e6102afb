//! The commit `memory --version` names: a user reporting a problem can say exactly which build they run. Read from
//! git when the build runs in a checkout; a build from a source package (no `.git`) names only the version.

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

fn main() {
    let version = env!("CARGO_PKG_VERSION");
    let long = match (git(&["rev-parse", "--short=10", "HEAD"]), git(&["show", "-s", "--format=%cs", "HEAD"])) {
        (Some(commit), Some(date)) => format!("{version} (commit {commit}, {date})"),
        _ => version.to_string(),
    };
    println!("cargo:rustc-env=MEMORY_LONG_VERSION={long}");
    // The checked-out commit moves with HEAD (a checkout) or with the branch it names (a commit).
    watch("HEAD");
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(&branch);
    }
    watch("packed-refs");
    println!("cargo:rerun-if-changed=build.rs");
}
