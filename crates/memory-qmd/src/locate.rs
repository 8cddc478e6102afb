//! Finding `qmd` and the Node 22 that runs it.
//!
//! Order: `memory.qmd.command`, then `qmd` on PATH, then the project's cache (`$MEMORY_QMD_DIR`, else
//! `$MEMORY_RS_CACHE/qmd`, else `~/.cache/memory-rs/qmd`, as installed by `scripts/setup.sh`). An npm install's
//! `bin/qmd` launcher is never run: it spawns a second process and does not forward signals, so QMD's JS entry
//! (`dist/cli/qmd.js`) is run with Node 22 directly. Any other executable (a wrapper script) runs as is.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use memory_core::error::{MemoryError, Result};
use memory_core::paths::expand_home;
use tracing::debug;

use crate::process::Invocation;

const JS_ENTRY: &str = "node_modules/@tobilu/qmd/dist/cli/qmd.js";

fn cache_root() -> Option<PathBuf> {
    if let Some(c) = std::env::var_os("MEMORY_RS_CACHE") {
        return Some(PathBuf::from(c));
    }
    memory_core::paths::home_dir().map(|h| h.join(".cache/memory-rs"))
}

/// The QMD JS entry installed by the setup script, if present.
pub fn cached_js_entry() -> Option<PathBuf> {
    let dir = std::env::var_os("MEMORY_QMD_DIR").map(PathBuf::from).or_else(|| cache_root().map(|c| c.join("qmd")))?;
    let entry = dir.join(JS_ENTRY);
    entry.is_file().then_some(entry)
}

fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Windows has no execute bit: a file is a program by its name (`qmd.cmd`, `qmd.exe`), which the caller gives.
#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// For an npm-installed `qmd` launcher (`.../@tobilu/qmd/bin/qmd`, possibly through `.bin/qmd` links), the JS
/// entry beside it.
fn js_entry_of_launcher(p: &Path) -> Option<PathBuf> {
    let real = std::fs::canonicalize(p).ok()?;
    let pkg = real.parent()?.parent()?;
    let entry = pkg.join("dist/cli/qmd.js");
    (real.parent()?.file_name()? == "bin" && entry.is_file()).then_some(entry)
}

fn is_js(p: &Path) -> bool {
    matches!(p.extension().and_then(|e| e.to_str()), Some("js" | "mjs" | "cjs"))
}

/// Major version of a `node` binary, or None when it does not run.
fn node_major(node: &Path) -> Option<u32> {
    let mut child = std::process::Command::new(node)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // Bounded: a broken node must not hang the engine's start.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout);
    v.trim().strip_prefix('v')?.split('.').next()?.parse().ok()
}

/// Node 22 or newer: `$MEMORY_NODE22`, the setup script's cache, then `node` on PATH.
pub fn find_node22() -> Result<PathBuf> {
    let mut tried = Vec::new();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(n) = std::env::var_os("MEMORY_NODE22") {
        candidates.push(PathBuf::from(n));
    }
    if let Some(c) = cache_root() {
        candidates.push(c.join("node22/bin/node"));
    }
    if let Some(n) = which("node") {
        candidates.push(n);
    }
    for c in candidates {
        match node_major(&c) {
            Some(m) if m >= 22 => {
                debug!(node = %c.display(), major = m, "using node");
                return Ok(c);
            }
            Some(m) => tried.push(format!("{} (v{m})", c.display())),
            None => tried.push(format!("{} (missing)", c.display())),
        }
    }
    Err(MemoryError::Unavailable(format!(
        "qmd needs Node 22 or newer (QMD crashes on older Node); tried: {}. Run scripts/setup.sh or set MEMORY_NODE22",
        tried.join(", ")
    )))
}

/// How to run qmd, given `memory.qmd.command`.
pub fn resolve(command: Option<&str>) -> Result<Invocation> {
    let js = |entry: PathBuf| -> Result<Invocation> { Ok(Invocation { program: find_node22()?, pre_args: vec![OsString::from(entry)] }) };
    if let Some(cmd) = command.map(str::trim).filter(|c| !c.is_empty()) {
        let path = if cmd.contains('/') || cmd.starts_with('~') {
            expand_home(cmd)
        } else {
            which(cmd).ok_or_else(|| MemoryError::Unavailable(format!("memory.qmd.command `{cmd}` was not found on PATH")))?
        };
        if !path.exists() {
            return Err(MemoryError::Unavailable(format!("memory.qmd.command `{}` does not exist", path.display())));
        }
        if is_js(&path) {
            return js(path);
        }
        if path.is_dir() {
            // An install folder (like the setup script's): use its JS entry.
            let entry = path.join(JS_ENTRY);
            if entry.is_file() {
                return js(entry);
            }
            return Err(MemoryError::Unavailable(format!("no QMD install in {}", path.display())));
        }
        if let Some(entry) = js_entry_of_launcher(&path) {
            return js(entry);
        }
        return Ok(Invocation { program: path, pre_args: vec![] });
    }
    if let Some(p) = which("qmd") {
        if let Some(entry) = js_entry_of_launcher(&p) {
            return js(entry);
        }
        return Ok(Invocation { program: p, pre_args: vec![] });
    }
    if let Some(entry) = cached_js_entry() {
        return js(entry);
    }
    Err(MemoryError::Unavailable("qmd not found: set memory.qmd.command, put qmd on PATH, or run scripts/setup.sh".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_executables_run_as_is() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("fake-qmd");
        std::fs::write(&script, "#!/bin/sh\necho '[]'\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        let inv = resolve(Some(script.to_str().unwrap())).unwrap();
        assert_eq!(inv, Invocation { program: script, pre_args: vec![] });
    }

    #[test]
    fn missing_commands_are_unavailable() {
        let e = resolve(Some("/nonexistent/qmd")).unwrap_err();
        assert_eq!(e.kind(), memory_core::ErrorKind::Unavailable);
        let e = resolve(Some("definitely-not-a-command-xyz")).unwrap_err();
        assert!(e.to_string().contains("not found on PATH"), "{e}");
    }

    #[test]
    fn npm_launchers_are_bypassed() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("node_modules/@tobilu/qmd");
        std::fs::create_dir_all(pkg.join("bin")).unwrap();
        std::fs::create_dir_all(pkg.join("dist/cli")).unwrap();
        std::fs::write(pkg.join("bin/qmd"), "#!/usr/bin/env node\n").unwrap();
        std::fs::write(pkg.join("dist/cli/qmd.js"), "").unwrap();
        std::fs::create_dir_all(dir.path().join("node_modules/.bin")).unwrap();
        std::os::unix::fs::symlink("../@tobilu/qmd/bin/qmd", dir.path().join("node_modules/.bin/qmd")).unwrap();
        let entry = js_entry_of_launcher(&dir.path().join("node_modules/.bin/qmd")).unwrap();
        assert_eq!(entry, std::fs::canonicalize(pkg.join("dist/cli/qmd.js")).unwrap());
    }
}
