//! Values resolved at load time, as OpenClaw does: `"${VAR}"` inside any string (`$${VAR}` for a literal), and
//! secret references `{source: "env" | "file" | "exec", provider, id}` where a key is a secret (`apiKey`).
//! Resolved values are never part of an error message: errors name the key and the variable or reference.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::schema::{join, Diagnostics};

/// Where `${VAR}` and `{source: "env"}` look: the process environment, then the config's own `env` section.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

pub(super) struct Resolver<'a> {
    pub env: EnvLookup<'a>,
    /// The config's `secrets.providers`, for file and exec references.
    pub providers: Option<&'a Map<String, Value>>,
}

fn is_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_uppercase() || c == '_') && chars.all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

impl Resolver<'_> {
    /// Resolve every string and secret reference under `v` in place; `path` is the key as the user wrote it.
    pub fn resolve(&self, v: &mut Value, path: &str, d: &mut Diagnostics) {
        match v {
            Value::String(s) if s.contains("${") => {
                if let Some(out) = self.substitute(s, path, d) {
                    *s = out;
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    self.resolve(item, &format!("{path}[{i}]"), d);
                }
            }
            Value::Object(m) => {
                for (k, item) in m.iter_mut() {
                    let at = join(path, k);
                    if k == "apiKey" && item.get("source").is_some() {
                        if let Some(secret) = self.secret_ref(item, &at, d) {
                            *item = Value::String(secret);
                        }
                        continue;
                    }
                    self.resolve(item, &at, d);
                }
            }
            _ => {}
        }
    }

    fn substitute(&self, s: &str, path: &str, d: &mut Diagnostics) -> Option<String> {
        let mut out = String::with_capacity(s.len());
        let mut rest = s;
        let mut ok = true;
        while let Some(at) = rest.find("${") {
            // `$${VAR}` stays `${VAR}`, unresolved.
            if at > 0 && rest.as_bytes()[at - 1] == b'$' {
                out.push_str(&rest[..at - 1]);
                let end = rest[at..].find('}').map_or(rest.len(), |e| at + e + 1);
                out.push_str(&rest[at..end]);
                rest = &rest[end..];
                continue;
            }
            out.push_str(&rest[..at]);
            let Some(end) = rest[at + 2..].find('}') else {
                out.push_str(&rest[at..]);
                rest = "";
                break;
            };
            let name = &rest[at + 2..at + 2 + end];
            if is_var_name(name) {
                match (self.env)(name).filter(|v| !v.is_empty()) {
                    Some(value) => out.push_str(&value),
                    None => {
                        d.error(path, format!("environment variable {name} (named as ${{{name}}}) is not set"));
                        ok = false;
                    }
                }
            } else {
                out.push_str(&rest[at..at + 3 + end]);
            }
            rest = &rest[at + 3 + end..];
        }
        out.push_str(rest);
        ok.then_some(out)
    }

    fn secret_ref(&self, r: &Value, path: &str, d: &mut Diagnostics) -> Option<String> {
        let field = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
        let (source, provider, id) = (field("source"), field("provider"), field("id"));
        if let Some(extra) = r.as_object().and_then(|m| m.keys().find(|k| !matches!(k.as_str(), "source" | "provider" | "id"))) {
            d.error(join(path, extra), "unknown key in a secret reference (source, provider, id)");
            return None;
        }
        if id.is_empty() {
            d.error(join(path, "id"), "a secret reference needs an id");
            return None;
        }
        let mut provider_config = || {
            let name = if provider.is_empty() { "default" } else { provider };
            let found = self.providers.and_then(|p| p.get(name)).filter(|c| c.get("source").and_then(Value::as_str) == Some(source));
            if found.is_none() {
                d.error(path, format!("secret reference names provider `{name}`, which is not a {source} provider in secrets.providers"));
            }
            found
        };
        let result = match source {
            "env" => (self.env)(id).filter(|v| !v.is_empty()).ok_or_else(|| format!("environment variable {id} (secret reference) is not set")),
            "file" => {
                let cfg = provider_config()?;
                read_file_secret(cfg, id)
            }
            "exec" => {
                let cfg = provider_config()?;
                run_exec_secret(cfg, provider, id, self.env)
            }
            other => Err(format!("unknown secret source `{other}` (env, file or exec)")),
        };
        match result {
            Ok(v) => Some(v),
            Err(message) => {
                d.error(path, message);
                None
            }
        }
    }
}

fn read_file_secret(cfg: &Value, id: &str) -> Result<String, String> {
    let path = cfg.get("path").and_then(Value::as_str).unwrap_or("");
    let path = crate::paths::expand_home(path);
    let text = crate::bounded::read_text(&path, crate::bounded::MAX_CONFIG_BYTES)
        .map_err(|e| format!("cannot read secrets file {}: {e}", path.display()))?;
    if cfg.get("mode").and_then(Value::as_str) == Some("singleValue") {
        return Ok(text.strip_suffix('\n').map(|t| t.strip_suffix('\r').unwrap_or(t)).unwrap_or(&text).to_string());
    }
    let doc: Value = crate::bounded::json(&text, crate::bounded::MAX_CONFIG_BYTES).map_err(|e| format!("secrets file {}: {e}", path.display()))?;
    match doc.pointer(id) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("secret `{id}` in {} is not a string", path.display())),
        None => Err(format!("secret `{id}` not found in {}", path.display())),
    }
}

/// OpenClaw's exec protocol: `{protocolVersion: 1, provider, ids}` on stdin, `{protocolVersion: 1, values}` on
/// stdout (or, with `jsonOnly: false`, the bare value).
fn run_exec_secret(cfg: &Value, provider: &str, id: &str, env: EnvLookup<'_>) -> Result<String, String> {
    let command = cfg.get("command").and_then(Value::as_str).unwrap_or("");
    let args: Vec<&str> = cfg.get("args").and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
    let mut cmd = Command::new(command);
    cmd.args(&args).env_clear().stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    for name in cfg.get("passEnv").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if let Some(v) = env(name) {
            cmd.env(name, v);
        }
    }
    for (k, v) in cfg.get("env").and_then(Value::as_object).into_iter().flatten() {
        if let Some(v) = v.as_str() {
            cmd.env(k, v);
        }
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot run secrets command {command}: {e}"))?;
    let request = serde_json::json!({ "protocolVersion": 1, "provider": provider, "ids": [id] }).to_string();
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(request.as_bytes());
    }
    let timeout = Duration::from_millis(cfg.get("timeoutMs").and_then(Value::as_u64).unwrap_or(5_000));
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("secrets command {command} did not answer within {} ms", timeout.as_millis()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(format!("secrets command {command}: {e}")),
        }
    }
    let out = child.wait_with_output().map_err(|e| format!("secrets command {command}: {e}"))?;
    if !out.status.success() {
        return Err(format!("secrets command {command} failed ({})", out.status));
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let json_only = cfg.get("jsonOnly").and_then(Value::as_bool).unwrap_or(true);
    match crate::bounded::json(&text, crate::bounded::MAX_CONFIG_BYTES) {
        Ok(v) if v.get("protocolVersion").and_then(Value::as_u64) == Some(1) => match v.get("values").and_then(|x| x.get(id)) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(format!("secrets command {command} returned no value for `{id}`")),
        },
        Ok(Value::String(s)) if !json_only => Ok(s),
        Err(_) if !json_only && !text.is_empty() => Ok(text),
        _ => Err(format!("secrets command {command} did not answer with {{protocolVersion: 1, values}}")),
    }
}
