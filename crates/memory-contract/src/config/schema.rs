//! The keys of OpenClaw's memory blocks, both schema generations (npm `openclaw@2026.7.1`: `memory.{backend,
//! citations,qmd}` and `agents.{defaults,list[]}.memorySearch`; `openclaw@2026.9.6`: `memory.{citations,search}`
//! and `agents.entries.<id>.memory.search`) plus this project's own keys, with what this project does with each.
//!
//! [`check`] walks a block as the user wrote it: a key it does not know is an error, a key that is accepted but
//! not acted on becomes one warning (and is removed, so the typed model never sees it), a type mismatch is an
//! error; every problem is collected so a file reports all of them at once. An engine's block (`memory.qmd`,
//! `memory.lancedb`, a plugin's `memory.<engine>`) is not listed here: its keys and values are the engine's to
//! check (`BackendFactory::check_config`), and a block no registered engine owns is refused by the registry.

use serde_json::{Map, Value};

/// The JSON type a leaf must have. `null` is always accepted and means "unset".
#[derive(Debug, Clone, Copy)]
pub(super) enum Ty {
    Bool,
    /// A non-negative integer.
    Uint,
    Num,
    Str,
    StrList,
    /// An object whose values are strings (headers).
    StrMap,
    /// A string or an OpenClaw secret reference `{source, provider, id}` (resolved before the walk).
    Secret,
    /// An integer or the given literal (`local.contextSize: "auto"`).
    UintOr(&'static str),
    /// `extraPaths`: strings or `{path, pattern}` objects.
    ExtraPaths,
    /// `qmd.paths` / `qmd.extraCollections`: `{path, name?, pattern?}` objects.
    Collections,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Use {
    Acted,
    /// Accepted, not acted on: a warning with this reason.
    Ignored(&'static str),
    /// A flat key that OpenClaw moved into a sub-object: `(object, key)` inside the same block.
    Moved(&'static str, &'static str),
}

pub(super) enum Node {
    Leaf(Ty),
    Obj(&'static [Field]),
}

pub(super) struct Field {
    name: &'static str,
    node: Node,
    use_: Use,
}

const fn a(name: &'static str, ty: Ty) -> Field {
    Field { name, node: Node::Leaf(ty), use_: Use::Acted }
}
const fn o(name: &'static str, fields: &'static [Field]) -> Field {
    Field { name, node: Node::Obj(fields), use_: Use::Acted }
}
const fn ig(name: &'static str, ty: Ty, why: &'static str) -> Field {
    Field { name, node: Node::Leaf(ty), use_: Use::Ignored(why) }
}
const fn mv(name: &'static str, ty: Ty, object: &'static str, key: &'static str) -> Field {
    Field { name, node: Node::Leaf(ty), use_: Use::Moved(object, key) }
}

/// A search block: `memory.search`, `agents.defaults.memorySearch`, a top-level `memorySearch`, or an agent's.
pub(super) const SEARCH: &[Field] = &[
    a("enabled", Ty::Bool),
    ig("rememberAcrossConversations", Ty::Bool, "memory-rs has no conversation scopes: every search sees the agent's whole memory"),
    a("sources", Ty::StrList),
    a("extraPaths", Ty::ExtraPaths),
    a("sessionsDir", Ty::Str),
    a("maxFileBytes", Ty::Uint),
    o("qmd", &[a("extraCollections", Ty::Collections)]),
    o(
        "multimodal",
        &[
            a("enabled", Ty::Bool),
            ig("modalities", Ty::StrList, "images and audio are both indexed when multimodal is enabled"),
            a("maxFileBytes", Ty::Uint),
            a("dimensions", Ty::Uint),
        ],
    ),
    o("experimental", &[a("sessionMemory", Ty::Bool)]),
    a("provider", Ty::Str),
    o(
        "remote",
        &[
            a("baseUrl", Ty::Str),
            a("apiKey", Ty::Secret),
            a("headers", Ty::StrMap),
            a("nonBatchConcurrency", Ty::Uint),
            o(
                "batch",
                &[
                    a("enabled", Ty::Bool),
                    a("wait", Ty::Bool),
                    a("concurrency", Ty::Uint),
                    a("pollIntervalMs", Ty::Uint),
                    a("timeoutMinutes", Ty::Uint),
                ],
            ),
        ],
    ),
    a("fallback", Ty::Str),
    a("model", Ty::Str),
    a("inputType", Ty::Str),
    a("queryInputType", Ty::Str),
    a("documentInputType", Ty::Str),
    a("outputDimensionality", Ty::Uint),
    o(
        "local",
        &[
            a("modelPath", Ty::Str),
            a("modelCacheDir", Ty::Str),
            // memory-rs's own: literal prompts prepended to queries / documents (E5: "query: " / "passage: ").
            a("queryPrompt", Ty::Str),
            a("documentPrompt", Ty::Str),
            ig("contextSize", Ty::UintOr("auto"), "the local model's own context length is used"),
        ],
    ),
    o(
        "store",
        &[
            a("path", Ty::Str),
            // "sqlite" is the only value OpenClaw accepts, and what the builtin engine is.
            a("driver", Ty::Str),
            o(
                "fts",
                &[ig(
                    "tokenizer",
                    Ty::Str,
                    "keyword analysis is memory-rs's own (stems, CJK words, identifiers; see the README), whatever the FTS5 tokenizer",
                )],
            ),
            o("vector", &[a("enabled", Ty::Bool), ig("extensionPath", Ty::Str, "sqlite-vec is compiled into memory-rs; no extension is loaded")]),
        ],
    ),
    o("chunking", &[a("tokens", Ty::Uint), a("overlap", Ty::Uint)]),
    mv("chunkSize", Ty::Uint, "chunking", "tokens"),
    mv("chunkOverlap", Ty::Uint, "chunking", "overlap"),
    mv("maxResults", Ty::Uint, "query", "maxResults"),
    o(
        "sync",
        &[
            a("onSessionStart", Ty::Bool),
            a("onSearch", Ty::Bool),
            a("watch", Ty::Bool),
            a("watchDebounceMs", Ty::Uint),
            a("intervalMinutes", Ty::Uint),
            a("embeddingBatchTimeoutSeconds", Ty::Uint),
            o(
                "sessions",
                &[
                    a("deltaBytes", Ty::Uint),
                    a("deltaMessages", Ty::Uint),
                    ig(
                        "postCompactionForce",
                        Ty::Bool,
                        "memory-rs does not see the host's compactions; transcripts sync by deltaBytes/deltaMessages",
                    ),
                ],
            ),
        ],
    ),
    o(
        "query",
        &[
            a("maxResults", Ty::Uint),
            a("minScore", Ty::Num),
            a("now", Ty::Str),
            o(
                "hybrid",
                &[
                    a("enabled", Ty::Bool),
                    a("vectorWeight", Ty::Num),
                    a("textWeight", Ty::Num),
                    a("candidateMultiplier", Ty::Uint),
                    o("mmr", &[a("enabled", Ty::Bool), a("lambda", Ty::Num)]),
                    o("temporalDecay", &[a("enabled", Ty::Bool), a("halfLifeDays", Ty::Num)]),
                ],
            ),
            o("rerank", &[a("enabled", Ty::Bool), a("modelPath", Ty::Str), a("candidates", Ty::Uint), a("budgetMs", Ty::Uint), a("weight", Ty::Num)]),
        ],
    ),
    o("cache", &[a("enabled", Ty::Bool), a("maxEntries", Ty::Uint)]),
];

/// The `memory` block without `search` (checked on its own, as a [`SEARCH`] block) and without the engines'
/// blocks (`memory.qmd`, `memory.lancedb`, a plugin's `memory.<engine>`): those are each engine's own.
pub(super) const MEMORY: &[Field] = &[a("backend", Ty::Str), a("citations", Ty::Str)];

/// True for the keys of the `memory` block this crate knows (`search` is checked on its own).
pub(super) fn is_memory_key(name: &str) -> bool {
    name == "search" || MEMORY.iter().any(|f| f.name == name)
}

/// A problem found in the config, named by the key as the user wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The key's dotted path as written in the file (`memory.search.query.minScore`, `agents.list[0].memorySearch`).
    pub key: String,
    /// What is wrong with it, or why it is not acted on.
    pub message: String,
}

/// What [`check`] found: errors fail the load, warnings are logged and listed by `memory status`.
#[derive(Debug, Default)]
pub(super) struct Diagnostics {
    pub errors: Vec<ConfigIssue>,
    pub warnings: Vec<ConfigIssue>,
}

impl Diagnostics {
    pub fn error(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.errors.push(ConfigIssue { key: key.into(), message: message.into() });
    }

    /// Kept once per key by `Config::add_warnings`.
    fn warn(&mut self, key: String, message: String) {
        self.warnings.push(ConfigIssue { key, message });
    }
}

pub(super) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_string()
    } else {
        format!("{prefix}.{key}")
    }
}

/// Check `block` against `fields`, removing ignored keys, nulls and keys with errors, and moving flat keys into
/// their sub-objects (the nested key wins when both are set).
pub(super) fn check(block: &mut Map<String, Value>, fields: &[Field], prefix: &str, d: &mut Diagnostics) {
    let keys: Vec<String> = block.keys().cloned().collect();
    let mut moved: Vec<(&'static str, &'static str, Value)> = Vec::new();
    for key in keys {
        let path = join(prefix, if key.is_empty() { "\"\"" } else { &key });
        let Some(field) = fields.iter().find(|f| f.name == key) else {
            d.error(path, "unknown key");
            block.remove(&key);
            continue;
        };
        if block[&key].is_null() {
            block.remove(&key);
            continue;
        }
        match (&field.node, field.use_) {
            (Node::Obj(inner), use_) => match block.get_mut(&key) {
                Some(Value::Object(m)) => {
                    check(m, inner, &path, d);
                    if let Use::Ignored(why) = use_ {
                        d.warn(path, format!("accepted, not used: {why}"));
                        block.remove(&key);
                    }
                }
                _ => {
                    d.error(path, "expected an object");
                    block.remove(&key);
                }
            },
            (Node::Leaf(ty), use_) => {
                if let Err(message) = check_leaf(&block[&key], *ty, &path, d) {
                    d.error(path, message);
                    block.remove(&key);
                    continue;
                }
                match use_ {
                    Use::Acted => {}
                    Use::Ignored(why) => {
                        d.warn(path, format!("accepted, not used: {why}"));
                        block.remove(&key);
                    }
                    Use::Moved(object, inner) => {
                        let v = block.remove(&key).unwrap_or(Value::Null);
                        moved.push((object, inner, v));
                    }
                }
            }
        }
    }
    for (object, inner, v) in moved {
        let target = block.entry(object.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(m) = target {
            m.entry(inner.to_string()).or_insert(v);
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn check_leaf(v: &Value, ty: Ty, path: &str, d: &mut Diagnostics) -> Result<(), String> {
    let expected = |what: &str| Err(format!("expected {what}, found {}", type_name(v)));
    match ty {
        Ty::Bool if v.is_boolean() => Ok(()),
        Ty::Bool => expected("true or false"),
        Ty::Uint if v.is_u64() => Ok(()),
        Ty::Uint => expected("a whole number >= 0"),
        Ty::UintOr(lit) if v.is_u64() || v.as_str() == Some(lit) => Ok(()),
        Ty::UintOr(lit) => expected(&format!("a whole number or \"{lit}\"")),
        Ty::Num if v.is_number() => Ok(()),
        Ty::Num => expected("a number"),
        Ty::Str | Ty::Secret if v.is_string() => Ok(()),
        Ty::Str | Ty::Secret => expected("a string"),
        Ty::StrList => match v.as_array() {
            Some(items) if items.iter().all(Value::is_string) => Ok(()),
            _ => expected("a list of strings"),
        },
        Ty::StrMap => match v.as_object() {
            Some(m) => {
                for (k, item) in m {
                    if !item.is_string() {
                        d.error(join(path, k), format!("expected a string, found {}", type_name(item)));
                    }
                }
                Ok(())
            }
            None => expected("an object of strings"),
        },
        Ty::ExtraPaths | Ty::Collections => {
            let Some(items) = v.as_array() else { return expected("a list") };
            let allowed: &[&str] = if matches!(ty, Ty::ExtraPaths) { &["path", "pattern"] } else { &["path", "name", "pattern"] };
            for (i, item) in items.iter().enumerate() {
                let at = format!("{path}[{i}]");
                match item {
                    Value::String(_) if matches!(ty, Ty::ExtraPaths) => {}
                    Value::Object(m) => {
                        for (k, x) in m {
                            if !allowed.contains(&k.as_str()) {
                                d.error(join(&at, k), "unknown key");
                            } else if !x.is_string() && !x.is_null() {
                                d.error(join(&at, k), format!("expected a string, found {}", type_name(x)));
                            }
                        }
                        if !m.get("path").is_some_and(Value::is_string) {
                            d.error(join(&at, "path"), "required");
                        }
                    }
                    other => d.error(at, format!("expected a path or {{path, pattern}}, found {}", type_name(other))),
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The dotted paths of the leaves the schema acts on (objects recursed; ignored and moved keys left out).
    fn acted(fields: &[Field], prefix: &str, out: &mut BTreeSet<String>) {
        for f in fields {
            let path = join(prefix, f.name);
            match (&f.node, f.use_) {
                (Node::Obj(inner), Use::Acted) => acted(inner, &path, out),
                (Node::Leaf(_), Use::Acted) => {
                    out.insert(path);
                }
                _ => {}
            }
        }
    }

    /// The dotted paths of the leaves of the typed model, as serde writes it.
    fn leaves(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    leaves(x, &join(prefix, k), out);
                }
            }
            _ => {
                out.insert(prefix.to_string());
            }
        }
    }

    /// A key is declared twice (here, with what is done with it, and in the typed model that code reads): the two
    /// must list the same keys, so a key can neither be accepted as acted on with no field behind it nor be a
    /// field no config can set. Objects of the model whose keys are free (`remote.headers`) are leaves here.
    #[test]
    fn the_schema_and_the_model_declare_the_same_keys() {
        let mut schema = BTreeSet::new();
        acted(SEARCH, "", &mut schema);
        let mut model = BTreeSet::new();
        let search = serde_json::to_value(crate::config::SearchConfig::default()).unwrap();
        leaves(&search, "", &mut model);
        // Free-form maps serialise as objects (empty by default): the schema declares them as leaves.
        {
            let map = "remote.headers";
            model.retain(|k| !k.starts_with(&format!("{map}.")));
            model.insert(map.to_string());
        }
        // Keys rewritten into others before the model is read (config/mod.rs): `qmd.extraCollections` become
        // `extraPaths`, `experimental.sessionMemory` sets `sources`.
        for translated in ["qmd.extraCollections", "experimental.sessionMemory"] {
            assert!(schema.remove(translated), "{translated} is no longer in the schema: update this list");
        }
        let only_schema: Vec<_> = schema.difference(&model).collect();
        let only_model: Vec<_> = model.difference(&schema).collect();
        assert!(
            only_schema.is_empty() && only_model.is_empty(),
            "declared acted on, but no field: {only_schema:?}; a field no key sets: {only_model:?}"
        );

        let mut memory = BTreeSet::new();
        acted(MEMORY, "", &mut memory);
        let mut model = BTreeSet::new();
        let mut block = serde_json::to_value(crate::config::MemoryConfig::default()).unwrap();
        block.as_object_mut().unwrap().remove("search");
        leaves(&block, "", &mut model);
        assert_eq!(memory, model);
    }
}
