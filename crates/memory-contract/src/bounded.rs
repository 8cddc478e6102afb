//! Bounded parsing of untrusted text (config files, transcripts, MCP messages, a subprocess's output): every
//! recursive parse goes through here, so its size and nesting are checked before a parser recurses or
//! allocates. The JSON5 parser recurses once per level with no limit of its own (10,000 nested objects
//! overflowed the stack and aborted the process) and its memory grows many times the input; serde_json stops at
//! 128 levels itself but would read a file of any size.

use std::io::Read;
use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Deepest `[`/`{` nesting accepted (serde_json's own limit); real documents use a handful.
pub const MAX_DEPTH: usize = 128;

/// Largest config file read (OpenClaw's are a few KB); also bounds the JSON5 parser's memory (~80x its input).
pub const MAX_CONFIG_BYTES: usize = 4 << 20;

/// Why a text was not parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// The text is longer than the limit the caller gave.
    #[error("larger than {} (the limit)", human_bytes(*.limit))]
    TooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// `[`/`{` nest deeper than the given number of levels ([`MAX_DEPTH`]).
    #[error("nested deeper than {0} levels")]
    TooDeep(usize),
    /// The bytes are not UTF-8 text.
    #[error("not valid UTF-8")]
    NotUtf8,
    /// The JSON parser refused the text, with its message.
    #[error("not valid JSON: {0}")]
    Json(String),
    /// The JSON5 parser refused the text, with its message.
    #[error("not valid JSON5: {0}")]
    Json5(String),
}

/// A read of a file with a size limit: the I/O error, or the parse-side refusal.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The file was read but refused: larger than the limit, or not UTF-8.
    #[error(transparent)]
    Parse(#[from] ParseError),
}

fn human_bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n.is_multiple_of(1 << 10) {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} bytes")
    }
}

/// Read at most `limit` bytes of `path` as UTF-8 text, in one read (a pipe such as `<(echo ...)` can be read
/// only once; `/dev/zero` stops at the limit instead of filling memory).
pub fn read_text(path: &Path, limit: usize) -> Result<String, ReadError> {
    let file = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    file.take(limit as u64 + 1).read_to_end(&mut buf)?;
    if buf.len() > limit {
        return Err(ParseError::TooLarge { limit }.into());
    }
    String::from_utf8(buf).map_err(|_| ParseError::NotUtf8.into())
}

/// Refuse a text longer than `limit` bytes or nested deeper than [`MAX_DEPTH`].
pub fn check(text: &str, limit: usize) -> Result<(), ParseError> {
    if text.len() > limit {
        return Err(ParseError::TooLarge { limit });
    }
    if nesting_depth(text) > MAX_DEPTH {
        return Err(ParseError::TooDeep(MAX_DEPTH));
    }
    Ok(())
}

/// Parse JSON text of at most `limit` bytes.
pub fn json(text: &str, limit: usize) -> Result<Value, ParseError> {
    json_as(text, limit)
}

/// Parse JSON text of at most `limit` bytes as `T`.
pub fn json_as<T: DeserializeOwned>(text: &str, limit: usize) -> Result<T, ParseError> {
    check(text, limit)?;
    serde_json::from_str(text).map_err(|e| ParseError::Json(e.to_string()))
}

/// [`json_as`] for bytes that may not be UTF-8.
pub fn json_bytes_as<T: DeserializeOwned>(bytes: &[u8], limit: usize) -> Result<T, ParseError> {
    if bytes.len() > limit {
        return Err(ParseError::TooLarge { limit });
    }
    json_as(std::str::from_utf8(bytes).map_err(|_| ParseError::NotUtf8)?, limit)
}

/// Parse JSON5 text of at most `limit` bytes. Plain JSON (most files) goes through serde_json, which needs a
/// fraction of the JSON5 parser's time and memory; what it refuses is read as JSON5.
pub fn json5(text: &str, limit: usize) -> Result<Value, ParseError> {
    json5_tracked(text, limit).map(|(v, _)| v)
}

/// [`json5()`], also giving where the text has a number JSON cannot hold (`NaN`, `Infinity`, which JSON5 allows):
/// the value has `null` there, and the paths (`a.b[2].c`) let a caller refuse them by name rather than read
/// them as unset.
pub fn json5_tracked(text: &str, limit: usize) -> Result<(Value, Vec<String>), ParseError> {
    use serde::de::DeserializeSeed;
    check(text, limit)?;
    if let Ok(v) = serde_json::from_str(text) {
        return Ok((v, Vec::new()));
    }
    let err = |e: json5::Error| ParseError::Json5(e.to_string());
    let mut de = json5::Deserializer::from_str(text).map_err(err)?;
    let mut non_finite = Vec::new();
    let v = Tracked { path: String::new(), non_finite: &mut non_finite }.deserialize(&mut de).map_err(err)?;
    Ok((v, non_finite))
}

/// Builds a JSON value as serde_json's own visitor does, noting the path of each non-finite number.
struct Tracked<'a> {
    path: String,
    non_finite: &'a mut Vec<String>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Tracked<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Tracked<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON5 value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(v.into())
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(match serde_json::Number::from_f64(v) {
            Some(n) => Value::Number(n),
            None => {
                self.non_finite.push(self.path);
                Value::Null
            }
        })
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, out.len());
            match seq.next_element_seed(Tracked { path, non_finite: &mut *self.non_finite })? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() { key.clone() } else { format!("{}.{key}", self.path) };
            let v = map.next_value_seed(Tracked { path, non_finite: &mut *self.non_finite })?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

/// The deepest bracket nesting of a JSON or JSON5 text, brackets inside strings and comments not counted.
/// Lexical only: a malformed text gets some number and the parser reports the real error.
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut chars = text.bytes().peekable();
    while let Some(c) = chars.next() {
        match c {
            b'"' | b'\'' => {
                while let Some(s) = chars.next() {
                    if s == b'\\' {
                        chars.next();
                    } else if s == c {
                        break;
                    }
                }
            }
            b'/' if chars.peek() == Some(&b'/') => {
                for s in chars.by_ref() {
                    if s == b'\n' {
                        break;
                    }
                }
            }
            b'/' if chars.peek() == Some(&b'*') => {
                chars.next();
                let mut star = false;
                for s in chars.by_ref() {
                    if star && s == b'/' {
                        break;
                    }
                    star = s == b'*';
                }
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_refused_before_any_parser_recurses() {
        // Deep enough to overflow the JSON5 parser's stack (it aborted the process) if it were reached.
        let deep = format!("{{a: {}1{}}}", "{a: ".repeat(100_000), "}".repeat(100_000));
        assert_eq!(json5(&deep, usize::MAX), Err(ParseError::TooDeep(MAX_DEPTH)));
        let deep_json = format!("{}1{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(json(&deep_json, usize::MAX), Err(ParseError::TooDeep(MAX_DEPTH)));
        // Brackets in strings and comments do not count.
        let quoted = format!("{{a: '{}', /* {} */ b: \"{}\"}}", "[".repeat(500), "{".repeat(500), "{".repeat(500));
        assert!(json5(&quoted, usize::MAX).is_ok());
        let ok = format!("{}1{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(json5(&ok, usize::MAX).is_ok());
    }

    #[test]
    fn size_is_refused_before_parsing_and_reading_stops_at_the_limit() {
        assert_eq!(json("[1, 2, 3]", 4), Err(ParseError::TooLarge { limit: 4 }));
        assert_eq!(json5("{a: 1}", 3), Err(ParseError::TooLarge { limit: 3 }));
        // /dev/zero never ends: the read stops one byte past the limit.
        match read_text(Path::new("/dev/zero"), 1 << 20) {
            Err(ReadError::Parse(ParseError::TooLarge { limit })) => assert_eq!(limit, 1 << 20),
            other => panic!("{other:?}"),
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json5");
        std::fs::write(&p, "{a: 1, // c\n}").unwrap();
        let text = read_text(&p, 100).unwrap();
        assert_eq!(json5(&text, 100).unwrap(), serde_json::json!({"a": 1}));
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(matches!(read_text(&p, 100), Err(ReadError::Parse(ParseError::NotUtf8))));
    }

    #[test]
    fn json5_reads_what_json_does_not() {
        assert_eq!(json5("{\"a\": [1, 2]}", 100).unwrap(), serde_json::json!({"a": [1, 2]}));
        assert_eq!(json5("{a: 'x', b: [true],}", 100).unwrap(), serde_json::json!({"a": "x", "b": [true]}));
        assert!(matches!(json5("{a: ", 100), Err(ParseError::Json5(_))));
        assert!(matches!(json("NaN", 100), Err(ParseError::Json(_))));
    }

    #[test]
    fn non_finite_numbers_are_null_and_named() {
        let (v, paths) = json5_tracked("{a: {b: NaN, c: [1, Infinity]}, d: -Infinity, e: 1.5}", 1000).unwrap();
        assert_eq!(v, serde_json::json!({"a": {"b": null, "c": [1, null]}, "d": null, "e": 1.5}));
        assert_eq!(paths, vec!["a.b", "a.c[1]", "d"]);
    }
}
