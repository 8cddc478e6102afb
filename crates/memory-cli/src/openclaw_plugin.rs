//! `memory openclaw install` and `memory openclaw status`: the OpenClaw memory plugin (integrations/openclaw).
//!
//! `install` installs the plugin into an OpenClaw state folder with OpenClaw's own CLI (`openclaw plugins install
//! <plugin> --force --accept-capabilities`, which also points `plugins.slots.memory` at it), lets the plugin's
//! trigger-recall hook see the inbound message (`plugins.entries.memory-rs.hooks.allowConversationAccess`), and
//! keeps the bundled memory-core loaded beside it as OpenClaw's dreaming sidecar (dreaming, session backfill,
//! standing-intent matching) with its tools denied (`tools.deny: ["memory-core"]`: otherwise its memory_search /
//! memory_get win the tool-name conflict). `--disable-memory-core` disables memory-core instead. The plugin's
//! files are carried inside this binary, so no clone is needed.
//! `status` reads the OpenClaw config (`OPENCLAW_CONFIG_PATH`, else `<OPENCLAW_STATE_DIR or ~/.openclaw>/openclaw.json`)
//! and says whether the memory slot is really served by this plugin.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context};
use clap::Subcommand;
use serde_json::{json, Value};

/// The plugin's id (openclaw.plugin.json) and config key.
pub const PLUGIN_ID: &str = "memory-rs";

/// The plugin's files, as shipped in integrations/openclaw. They are read through the symbolic links in
/// `openclaw-plugin/`, inside this crate, so that the crate's source package (crates.io) carries them too.
const FILES: &[(&str, &str)] = &[
    ("package.json", include_str!("../openclaw-plugin/package.json")),
    ("openclaw.plugin.json", include_str!("../openclaw-plugin/openclaw.plugin.json")),
    ("index.js", include_str!("../openclaw-plugin/index.js")),
    ("cli.js", include_str!("../openclaw-plugin/cli.js")),
    ("lib/engine.js", include_str!("../openclaw-plugin/lib/engine.js")),
    ("lib/contract.js", include_str!("../openclaw-plugin/lib/contract.js")),
    ("README.md", include_str!("../openclaw-plugin/README.md")),
];

#[derive(Subcommand, Debug)]
pub enum Action {
    /// Install the memory plugin into OpenClaw (sets plugins.slots.memory); memory-core stays loaded for dreaming
    /// with its tools denied.
    #[command(after_help = "Uses OpenClaw's own CLI; restart the gateway afterwards.\n\nExamples:\n  memory openclaw install\n  \
        memory openclaw install --command ~/.cargo/bin/memory\n  OPENCLAW_STATE_DIR=~/.openclaw-work memory openclaw install")]
    Install {
        /// The `openclaw` CLI: a program on PATH, or its .mjs entry (run with --node).
        #[arg(long, default_value = "openclaw", env = "MEMORY_OPENCLAW_BIN")]
        openclaw: String,
        /// Node to run an .mjs --openclaw with.
        #[arg(long, default_value = "node")]
        node: String,
        /// Install this plugin folder or npm-pack tarball instead of the copy carried by this binary.
        #[arg(long)]
        plugin: Option<PathBuf>,
        /// Link the --plugin folder instead of copying it (`openclaw plugins install --link`): a plugin installed
        /// with npm keeps finding its platform package (memory-rs-openclaw-<platform>) beside it.
        #[arg(long, requires = "plugin")]
        link: bool,
        /// Set the plugin's `command` (the memory binary the gateway runs) to this path.
        #[arg(long)]
        command: Option<PathBuf>,
        /// Disable memory-core instead of keeping it as the dreaming sidecar (loses dreaming, session backfill and
        /// standing intents; saves the memory it takes in the gateway).
        #[arg(long)]
        disable_memory_core: bool,
    },
    /// Whether OpenClaw's memory slot is really served by this plugin (exit status 1 when not).
    Status {
        #[arg(long)]
        json: bool,
    },
}

pub fn run(action: &Action) -> anyhow::Result<()> {
    match action {
        Action::Install { openclaw, node, plugin, link, command, disable_memory_core } => {
            install(openclaw, node, plugin.as_deref(), *link, command.as_deref(), *disable_memory_core)
        }
        Action::Status { json } => {
            let report = status()?;
            if *json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_status(&report);
            }
            if report["served"] != json!(true) {
                bail!("the OpenClaw memory slot is not served by {PLUGIN_ID}");
            }
            Ok(())
        }
    }
}

fn openclaw_command(openclaw: &str, node: &str) -> Command {
    if openclaw.ends_with(".mjs") || openclaw.ends_with(".js") {
        let mut c = Command::new(node);
        c.arg(openclaw);
        c
    } else {
        Command::new(openclaw)
    }
}

fn run_openclaw(openclaw: &str, node: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut cmd = openclaw_command(openclaw, node);
    cmd.args(args);
    let out = cmd.output().with_context(|| format!("cannot run `{openclaw}` (install OpenClaw or pass --openclaw <path>)"))?;
    if !out.status.success() {
        bail!(
            "`openclaw {}` failed ({}):\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Write the carried plugin files into a fresh folder.
fn write_plugin(dir: &Path) -> anyhow::Result<()> {
    for (rel, text) in FILES {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn install(openclaw: &str, node: &str, plugin: Option<&Path>, link: bool, command: Option<&Path>, disable_memory_core: bool) -> anyhow::Result<()> {
    let staged = match plugin {
        Some(_) => None,
        None => {
            let dir = std::env::temp_dir().join(format!("memory-rs-openclaw-plugin-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            write_plugin(&dir)?;
            Some(dir)
        }
    };
    let source = plugin.map(Path::to_path_buf).or_else(|| staged.clone()).expect("a plugin source");
    let source_arg = match source.extension().and_then(|e| e.to_str()) {
        Some("tgz") if !source.to_string_lossy().starts_with("npm-pack:") => format!("npm-pack:{}", source.display()),
        _ => source.display().to_string(),
    };
    let mut args = vec!["plugins", "install", &source_arg, "--force", "--accept-capabilities"];
    if link {
        args.push("--link");
    }
    eprintln!("Installing the {PLUGIN_ID} memory plugin with `openclaw {}`", args.join(" "));
    let installed = run_openclaw(openclaw, node, &args);
    if let Some(dir) = &staged {
        let _ = std::fs::remove_dir_all(dir);
    }
    installed?;
    eprintln!("Letting the trigger-recall hook read inbound messages (plugins.entries.{PLUGIN_ID}.hooks.allowConversationAccess)");
    run_openclaw(openclaw, node, &["config", "set", &format!("plugins.entries.{PLUGIN_ID}.hooks.allowConversationAccess"), "true", "--strict-json"])?;
    let cfg = current_config()?;
    if disable_memory_core {
        eprintln!("Disabling the bundled memory-core (`openclaw plugins disable memory-core`)");
        run_openclaw(openclaw, node, &["plugins", "disable", "memory-core"])?;
    } else {
        // memory-core stays (or becomes again) enabled: OpenClaw loads it as the dreaming sidecar of this slot.
        if cfg["plugins"]["entries"]["memory-core"]["enabled"] == json!(false) {
            eprintln!("Re-enabling memory-core as the dreaming sidecar (plugins.entries.memory-core.enabled)");
            run_openclaw(openclaw, node, &["config", "set", "plugins.entries.memory-core.enabled", "true", "--strict-json"])?;
        }
        if !memory_core_tools_denied(&cfg) {
            let mut deny: Vec<Value> = cfg["tools"]["deny"].as_array().cloned().unwrap_or_default();
            deny.push(json!(MEMORY_CORE));
            eprintln!("Denying memory-core's tools (tools.deny += \"memory-core\"): memory_search / memory_get are this plugin's");
            run_openclaw(openclaw, node, &["config", "set", "tools.deny", &serde_json::to_string(&deny)?, "--strict-json"])?;
        }
    }
    if let Some(c) = command {
        let c = std::fs::canonicalize(c).with_context(|| format!("--command {}", c.display()))?;
        let value = serde_json::to_string(&c.to_string_lossy())?;
        run_openclaw(openclaw, node, &["config", "set", &format!("plugins.entries.{PLUGIN_ID}.config.command"), &value, "--strict-json"])?;
    }
    let report = status()?;
    print_status(&report);
    if report["served"] != json!(true) {
        bail!("installed, but the memory slot is still not served by {PLUGIN_ID} (see above)");
    }
    println!("Restart the gateway (`openclaw gateway restart`) for the change to take effect.");
    Ok(())
}

const MEMORY_CORE: &str = "memory-core";

/// The OpenClaw config `status` reads (null when there is none).
fn current_config() -> anyhow::Result<Value> {
    match crate::openclaw::config_path()? {
        Some(p) => crate::openclaw::read_json(&p).with_context(|| format!("cannot read the OpenClaw config {}", p.display())),
        None => Ok(Value::Null),
    }
}

/// Whether `tools.deny` names memory-core (OpenClaw then skips every tool of that plugin, before the name check).
fn memory_core_tools_denied(cfg: &Value) -> bool {
    cfg["tools"]["deny"].as_array().is_some_and(|d| d.iter().any(|v| v.as_str().is_some_and(|s| s.trim().eq_ignore_ascii_case(MEMORY_CORE))))
}

fn plugin_enabled(plugins: &Value, id: &str) -> bool {
    if plugins["enabled"] == json!(false) {
        return false;
    }
    if plugins["deny"].as_array().is_some_and(|d| d.iter().any(|v| v == id)) {
        return false;
    }
    if let Some(allow) = plugins["allow"].as_array() {
        if !allow.is_empty() && !allow.iter().any(|v| v == id) {
            return false;
        }
    }
    plugins["entries"][id]["enabled"] != json!(false)
}

fn manifest_id(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("openclaw.plugin.json")).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v["id"].as_str().map(str::to_string)
}

/// Packages under `<state>/npm/projects/<project>/node_modules/` (where OpenClaw installs `npm-pack:` and npm
/// specs), scoped ones included.
fn npm_installed(state: &Path) -> Vec<PathBuf> {
    let read = |d: &Path| std::fs::read_dir(d).map(|r| r.flatten().map(|e| e.path()).collect::<Vec<_>>()).unwrap_or_default();
    let mut out = Vec::new();
    for project in read(&state.join("npm").join("projects")) {
        for pkg in read(&project.join("node_modules")) {
            if pkg.file_name().is_some_and(|n| n.to_string_lossy().starts_with('@')) {
                out.extend(read(&pkg));
            } else {
                out.push(pkg);
            }
        }
    }
    out
}

/// Where the plugin is installed: `<state>/extensions/memory-rs` (a folder install), an npm install under
/// `<state>/npm/projects/`, or a `plugins.load.paths` folder with its id.
fn installed_at(state: Option<&Path>, plugins: &Value) -> Option<PathBuf> {
    if let Some(state) = state {
        let dir = state.join("extensions").join(PLUGIN_ID);
        if manifest_id(&dir).as_deref() == Some(PLUGIN_ID) {
            return Some(dir);
        }
        if let Some(dir) = npm_installed(state).into_iter().find(|d| manifest_id(d).as_deref() == Some(PLUGIN_ID)) {
            return Some(dir);
        }
    }
    plugins["load"]["paths"]
        .as_array()?
        .iter()
        .filter_map(|p| p.as_str())
        .map(memory_core::paths::expand_home)
        .find(|d| manifest_id(d).as_deref() == Some(PLUGIN_ID))
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// This platform as Node names it (`process.platform`-`process.arch`), which names the plugin's binaries.
fn node_platform() -> String {
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        "windows" => "win32",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{os}-{arch}")
}

/// The binary the plugin would run, in its order (integrations/openclaw/lib/engine.js `resolveCommand`):
/// configured, packed with it, its platform package (found as Node finds it: in `node_modules` of the plugin's
/// folder or of a folder above), or `memory` on PATH.
fn engine_command(plugins: &Value, installed: Option<&Path>) -> (Option<PathBuf>, &'static str) {
    if let Some(c) = plugins["entries"][PLUGIN_ID]["config"]["command"].as_str().filter(|c| !c.trim().is_empty()) {
        let p = memory_core::paths::expand_home(c);
        let found = if p.components().count() > 1 { p.is_file().then_some(p) } else { on_path(c) };
        return (found, "config");
    }
    let platform = node_platform();
    let exe = if cfg!(windows) { "memory.exe" } else { "memory" };
    if let Some(p) = installed.map(|d| d.join("bin").join(&platform).join(exe)).filter(|p| p.is_file()) {
        return (Some(p), "packed");
    }
    let package = format!("memory-rs-openclaw-{platform}");
    let from_package = installed.into_iter().flat_map(Path::ancestors).find_map(|dir| {
        let bin = dir.join("node_modules").join(&package).join("bin").join(exe);
        bin.is_file().then_some(bin)
    });
    if let Some(p) = from_package {
        return (Some(p), "platform-package");
    }
    (on_path("memory"), "path")
}

/// Everything `memory openclaw status` reports, as JSON.
pub fn status() -> anyhow::Result<Value> {
    let state = crate::openclaw::state_dir();
    let config_path = crate::openclaw::config_path()?;
    let config = match &config_path {
        Some(p) => Some(crate::openclaw::read_json(p).with_context(|| format!("cannot read the OpenClaw config {}", p.display()))?),
        None => None,
    };
    let cfg = config.unwrap_or(Value::Null);
    let plugins = &cfg["plugins"];
    let slot = plugins["slots"]["memory"].as_str().map(str::to_string);
    let installed = installed_at(state.as_deref(), plugins);
    let enabled = plugin_enabled(plugins, PLUGIN_ID);
    let memory_core = plugin_enabled(plugins, MEMORY_CORE);
    let memory_core_tools_denied = memory_core_tools_denied(&cfg);
    let trigger_recall = plugins["entries"][PLUGIN_ID]["hooks"]["allowConversationAccess"] == json!(true);
    let (command, command_from) = engine_command(plugins, installed.as_deref());
    let mut warnings = Vec::new();
    if !trigger_recall {
        warnings.push(format!(
            "trigger recall is off: OpenClaw blocks the plugin's before_prompt_build hook unless plugins.entries.{PLUGIN_ID}.hooks.allowConversationAccess is true (run `memory openclaw install`)"
        ));
    }

    let mut problems = Vec::new();
    if config_path.is_none() {
        problems.push("no OpenClaw config found (OPENCLAW_CONFIG_PATH, or openclaw.json in the state folder)".to_string());
    }
    if slot.as_deref() != Some(PLUGIN_ID) {
        problems.push(format!(
            "plugins.slots.memory is {} (run `memory openclaw install`)",
            slot.as_deref().map_or("unset (memory-core)".to_string(), |s| format!("\"{s}\""))
        ));
    }
    if installed.is_none() {
        problems.push(format!(
            "the {PLUGIN_ID} plugin is not installed in {}",
            state.as_deref().map_or("the OpenClaw state folder".into(), |s| s.join("extensions").display().to_string())
        ));
    }
    if !enabled {
        problems.push(format!("the {PLUGIN_ID} plugin is disabled (plugins.entries.{PLUGIN_ID}.enabled, plugins.allow/deny or plugins.enabled)"));
    }
    if memory_core && !memory_core_tools_denied {
        problems.push("memory-core is still enabled with its tools: its memory_search/memory_get win the tool-name conflict (run `memory openclaw install`: it adds \"memory-core\" to tools.deny, keeping memory-core for dreaming)".to_string());
    }
    if command.is_none() {
        problems.push(match command_from {
            "config" => format!("the configured engine command plugins.entries.{PLUGIN_ID}.config.command does not exist"),
            _ => format!(
                "no `memory` binary for the plugin to run: none packed with it, no memory-rs-openclaw-{} package beside it, none on PATH (set plugins.entries.{PLUGIN_ID}.config.command)",
                node_platform()
            ),
        });
    }
    Ok(json!({
        "served": problems.is_empty(),
        "configPath": config_path,
        "stateDir": state,
        "slot": slot,
        "installed": installed,
        "enabled": enabled,
        "memoryCoreEnabled": memory_core,
        "memoryCoreToolsDenied": memory_core_tools_denied,
        "triggerRecall": trigger_recall,
        "command": command,
        "commandFrom": command_from,
        "problems": problems,
        "warnings": warnings,
    }))
}

fn print_status(r: &Value) {
    let show = |v: &Value| v.as_str().map_or_else(|| "-".to_string(), str::to_string);
    println!("OpenClaw config:    {}", show(&r["configPath"]));
    println!("memory slot:        {}", show(&r["slot"]));
    println!("plugin installed:   {}", show(&r["installed"]));
    println!("plugin enabled:     {}", r["enabled"]);
    let core = match (r["memoryCoreEnabled"] == json!(true), r["memoryCoreToolsDenied"] == json!(true)) {
        (true, true) => "enabled, tools denied (dreaming sidecar)",
        (true, false) => "ENABLED with its tools (shadows this plugin)",
        (false, _) => "disabled",
    };
    println!("memory-core:        {core}");
    println!("trigger recall:     {}", if r["triggerRecall"] == json!(true) { "on" } else { "OFF" });
    println!("engine command:     {} ({})", show(&r["command"]), show(&r["commandFrom"]));
    for w in r["warnings"].as_array().into_iter().flatten() {
        println!("warning: {}", show(w));
    }
    if r["served"] == json!(true) {
        println!("Served by {PLUGIN_ID}: yes");
    } else {
        println!("Served by {PLUGIN_ID}: NO");
        for p in r["problems"].as_array().into_iter().flatten() {
            println!("  - {}", show(p));
        }
    }
}
