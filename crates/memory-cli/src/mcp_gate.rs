//! A thin line-level layer in front of rmcp's stdio transport: every line a client sends is judged here first,
//! so every request gets exactly one answer. rmcp drops a line it cannot parse (invalid JSON, `NaN`, a lone
//! surrogate, a line over its 16 MiB limit) without a word and the client waits forever; a notification before
//! `initialize` ends its handshake and the server with it. This layer answers those itself (JSON-RPC `-32700`
//! with the request's id when it can be read from the text, else `null`; `-32600`/`-32602` for a request rmcp
//! would not understand; a clear error before `initialize`) and passes every other line through unchanged.
//! A lone surrogate escape (`"\ud800"`, which JavaScript's `JSON.stringify` writes for a cut emoji) is read as
//! U+FFFD, as a lossy UTF-16 decoder would, so the request is answered rather than refused.

use std::borrow::Cow;

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::{json, Value};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tracing::{debug, warn};

/// The longest line read (rmcp's own limit): a longer one is answered, not buffered.
pub const MAX_LINE_BYTES: usize = 16 << 20;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;
/// LSP's "server not initialized"; JSON-RPC leaves -32000..-32099 to servers.
const NOT_INITIALIZED: i64 = -32002;

/// What to do with one line.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// Pass the line (possibly repaired) to rmcp.
    Forward(String),
    /// Answer it here with this JSON-RPC error response.
    Reply(Value),
    /// Nothing to answer (an empty line, a notification or response that cannot be delivered).
    Drop(&'static str),
}

/// What the layer remembers between lines.
#[derive(Debug, Default)]
pub struct Gate {
    /// An `initialize` request was passed to rmcp: its handshake is under way or done.
    initialized: bool,
}

fn error(id: Value, code: i64, message: impl Into<String>) -> Verdict {
    Verdict::Reply(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message.into() } }))
}

impl Gate {
    /// Judge one line (without its newline). `too_long`: the line went over [`MAX_LINE_BYTES`] and `line` is only
    /// its beginning (enough to read the id from, when the id comes first).
    pub fn judge(&mut self, line: &[u8], too_long: bool) -> Verdict {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if too_long {
            let id = scan_id(&String::from_utf8_lossy(line)).unwrap_or(Value::Null);
            return error(id, PARSE_ERROR, format!("Parse error: the message is longer than {} MiB", MAX_LINE_BYTES >> 20));
        }
        let Ok(text) = std::str::from_utf8(line) else {
            let id = scan_id(&String::from_utf8_lossy(line)).unwrap_or(Value::Null);
            return error(id, PARSE_ERROR, "Parse error: the message is not valid UTF-8");
        };
        // JSON's whitespace only: a line of another space character (`\u{b}`, U+00A0) is a parse error, answered.
        let text = text.trim_matches([' ', '\t', '\r', '\n']);
        if text.is_empty() {
            return Verdict::Drop("empty line");
        }
        let (text, value) = match memory_core::bounded::json(text, MAX_LINE_BYTES) {
            Ok(v) => (Cow::Borrowed(text), v),
            Err(e) => {
                let repaired = replace_lone_surrogates(text);
                match repaired.as_deref().map(|t| memory_core::bounded::json(t, MAX_LINE_BYTES)) {
                    Some(Ok(v)) => (Cow::Owned(repaired.unwrap_or_default()), v),
                    _ => {
                        let id = scan_id(text).unwrap_or(Value::Null);
                        return error(id, PARSE_ERROR, format!("Parse error: {e}"));
                    }
                }
            }
        };
        let Value::Object(obj) = &value else {
            return error(Value::Null, INVALID_REQUEST, "Invalid Request: a message is one JSON-RPC object (batches are not supported)");
        };
        let id = obj.get("id").cloned();
        let method = obj.get("method").and_then(Value::as_str).map(str::to_string);
        let Some(method) = method else {
            if obj.contains_key("result") || obj.contains_key("error") {
                // A response to a request of ours: rmcp's (the handshake refuses one before `initialize`), and
                // never answered (rmcp would answer one it cannot read with an error of no id).
                if !self.initialized {
                    return Verdict::Drop("response before initialize");
                }
                return match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                    Ok(_) => Verdict::Forward(text.into_owned()),
                    Err(_) => Verdict::Drop("malformed response"),
                };
            }
            let id = id.filter(|i| i.is_string() || i.is_number()).unwrap_or(Value::Null);
            return error(id, INVALID_REQUEST, "Invalid Request: no `method`");
        };
        let Some(id) = id else {
            // A notification: never answered. Before `initialize`, rmcp's handshake would end on it.
            if !self.initialized {
                return Verdict::Drop("notification before initialize");
            }
            return match serde_json::from_value::<ClientJsonRpcMessage>(value) {
                Ok(_) => Verdict::Forward(text.into_owned()),
                Err(_) => Verdict::Drop("malformed notification"),
            };
        };
        if !(id.is_string() || id.is_number()) {
            return error(Value::Null, INVALID_REQUEST, "Invalid Request: `id` must be a string or a number");
        }
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return error(id, INVALID_REQUEST, "Invalid Request: `jsonrpc` must be \"2.0\"");
        }
        if method == "tools/call" {
            // rmcp reads a tools/call it cannot parse as an unknown method (-32601), which misleads the client.
            let params = obj.get("params").and_then(Value::as_object);
            let fits = params
                .is_some_and(|p| p.get("name").is_some_and(Value::is_string) && p.get("arguments").is_none_or(|a| a.is_null() || a.is_object()));
            if !fits {
                return error(id, INVALID_PARAMS, "Invalid params: tools/call needs params {\"name\": <tool name>, \"arguments\": {...}}");
            }
        }
        let has_meta = obj.get("params").and_then(|p| p.get("_meta")).is_some_and(Value::is_object);
        let message = match serde_json::from_value::<ClientJsonRpcMessage>(value) {
            Ok(m) => m,
            Err(e) => return error(id, INVALID_PARAMS, format!("Invalid params for `{method}`: {e}")),
        };
        let is_initialize = matches!(&message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::InitializeRequest(_)));
        let is_ping = matches!(&message, JsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::PingRequest(_)));
        if !self.initialized && !is_initialize && !is_ping && !has_meta {
            return error(id, NOT_INITIALIZED, format!("Server not initialized: send `initialize` before `{method}`"));
        }
        if is_initialize {
            self.initialized = true;
        }
        Verdict::Forward(text.into_owned())
    }
}

/// `text` with every lone UTF-16 surrogate escape inside its strings replaced by `\ufffd`; `None` when it has
/// none. Paired escapes (`\ud83d\ude00`) and escaped backslashes (`\\ud800`) are kept.
fn replace_lone_surrogates(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let hex =
        |at: usize| -> Option<u32> { b.get(at..at + 4).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u32::from_str_radix(h, 16).ok()) };
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied, mut in_string, mut changed) = (0, 0, false, false);
    while i < b.len() {
        match b[i] {
            b'"' => {
                in_string = !in_string;
                i += 1;
            }
            b'\\' if in_string => {
                if b.get(i + 1) == Some(&b'u') {
                    if let Some(unit) = hex(i + 2) {
                        let paired = (0xD800..=0xDBFF).contains(&unit)
                            && b.get(i + 6) == Some(&b'\\')
                            && b.get(i + 7) == Some(&b'u')
                            && hex(i + 8).is_some_and(|lo| (0xDC00..=0xDFFF).contains(&lo));
                        if paired {
                            i += 12;
                            continue;
                        }
                        if (0xD800..=0xDFFF).contains(&unit) {
                            out.push_str(&text[copied..i]);
                            out.push_str("\\ufffd");
                            changed = true;
                            i += 6;
                            copied = i;
                            continue;
                        }
                    }
                }
                i += 2;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[copied.min(text.len())..]);
    changed.then_some(out)
}

/// The `id` of a JSON-RPC message whose text does not parse: a string or number under the top-level key "id",
/// read lexically (the text may be cut short, or broken after the id).
fn scan_id(text: &str) -> Option<Value> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    // The end of the string token starting at `at` (a `"`), one past its closing quote.
    let string_end = |at: usize| -> Option<usize> {
        let mut j = at + 1;
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                b'"' => return Some(j + 1),
                _ => j += 1,
            }
        }
        None
    };
    let skip_ws = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        j
    };
    while i < b.len() {
        match b[i] {
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'"' => {
                let end = string_end(i)?;
                let is_id_key = depth == 1 && &text[i..end] == "\"id\"" && b.get(skip_ws(end)) == Some(&b':');
                if !is_id_key {
                    i = end;
                    continue;
                }
                let v = skip_ws(skip_ws(end) + 1);
                let (token_end, value) = match b.get(v)? {
                    b'"' => {
                        let e = string_end(v)?;
                        (e, serde_json::from_str::<String>(&text[v..e]).ok().map(Value::from)?)
                    }
                    c if c.is_ascii_digit() || *c == b'-' => {
                        let mut e = v + 1;
                        while e < b.len() && (b[e].is_ascii_digit() || matches!(b[e], b'.' | b'e' | b'E' | b'+' | b'-')) {
                            e += 1;
                        }
                        (e, Value::Number(serde_json::from_str::<serde_json::Number>(&text[v..e]).ok()?))
                    }
                    _ => return None,
                };
                let after = skip_ws(token_end);
                return match b.get(after) {
                    None | Some(b',') | Some(b'}') => Some(value),
                    _ => None,
                };
            }
            _ => i += 1,
        }
    }
    None
}

/// Read one line of at most `max` bytes into `buf` (without its newline). `Ok(None)` at the end of input;
/// `Ok(Some(true))` when the line was longer: `buf` holds its first `max` bytes and the rest was skipped.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Option<bool>> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() && !too_long { None } else { Some(too_long) });
        }
        let (chunk, used, done) = match available.iter().position(|&c| c == b'\n') {
            Some(n) => (&available[..n], n + 1, true),
            None => (available, available.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        if chunk.len() > room {
            too_long = true;
        }
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        r.consume(used);
        if done {
            return Ok(Some(too_long));
        }
    }
}

/// Serve `server` over `input`/`output` (stdin/stdout) through the gate. Returns when the client closes its
/// side (or rmcp ends the session); what was answered is flushed first.
pub async fn serve<S, R, W>(server: S, input: R, output: W) -> anyhow::Result<()>
where
    S: rmcp::ServerHandler,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    use rmcp::ServiceExt;
    // rmcp talks to one end of an in-process pipe; this layer holds the other.
    let (ours, theirs) = tokio::io::duplex(1 << 16);
    let (from_rmcp, mut to_rmcp) = tokio::io::split(ours);
    let (lines_tx, mut lines_rx) = mpsc::channel::<Vec<u8>>(64);

    // One writer owns the output, so answers from rmcp and from the gate never interleave inside a line.
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(line) = lines_rx.recv().await {
            if let Err(e) = async {
                output.write_all(&line).await?;
                output.flush().await
            }
            .await
            {
                warn!(error = %e, "cannot write to the MCP client; closing");
                break;
            }
        }
    });

    let rmcp_tx = lines_tx.clone();
    let relay = tokio::spawn(async move {
        let mut r = BufReader::new(from_rmcp);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line).await {
                Ok(0) => break,
                Ok(_) => {
                    if rmcp_tx.send(std::mem::take(&mut line)).await.is_err() {
                        break;
                    }
                }
                Err(e) => {
                    warn!(error = %e, "reading the MCP server's answers failed");
                    break;
                }
            }
        }
    });

    let reader = tokio::spawn(async move {
        let mut input = BufReader::with_capacity(1 << 16, input);
        let mut gate = Gate::default();
        let mut buf = Vec::new();
        loop {
            let too_long = match read_line(&mut input, &mut buf, MAX_LINE_BYTES).await {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(e) => {
                    warn!(error = %e, "reading from the MCP client failed");
                    break;
                }
            };
            match gate.judge(&buf, too_long) {
                Verdict::Forward(mut text) => {
                    text.push('\n');
                    if to_rmcp.write_all(text.as_bytes()).await.is_err() {
                        break;
                    }
                }
                Verdict::Reply(v) => {
                    debug!(reply = %v, "answered a message rmcp would not");
                    let mut line = v.to_string().into_bytes();
                    line.push(b'\n');
                    if lines_tx.send(line).await.is_err() {
                        break;
                    }
                }
                Verdict::Drop(why) => debug!(why, "message dropped"),
            }
        }
        // End of input: rmcp sees its end too and closes the session.
        let _ = to_rmcp.shutdown().await;
    });

    let service = server.serve(theirs).await.map_err(|e| anyhow::anyhow!("MCP handshake failed: {e}"))?;
    let reason = service.waiting().await;
    tracing::info!(?reason, "MCP client disconnected");
    reader.abort();
    let _ = relay.await;
    let _ = writer.await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(v: Verdict) -> Value {
        match v {
            Verdict::Reply(v) => v,
            other => panic!("expected a reply, got {other:?}"),
        }
    }

    fn initialized() -> Gate {
        let mut g = Gate::default();
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
        assert!(matches!(g.judge(init.as_bytes(), false), Verdict::Forward(_)));
        g
    }

    #[test]
    fn unparsable_lines_are_answered_with_the_id_when_it_can_be_read() {
        let mut g = initialized();
        let v = reply(g.judge(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"maxResults":NaN}}}"#, false));
        assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (json!(7), json!(-32700)), "{v}");
        let v = reply(g.judge(br#"{"jsonrpc":"2.0","id":"a\"b","method":"x","params":{"q":Infinity}}"#, false));
        assert_eq!(v["id"], "a\"b");
        let v = reply(g.judge(b"{not json", false));
        assert_eq!(v["id"], Value::Null);
        // A nested "id" is not the request's.
        let v = reply(g.judge(br#"{"params":{"id":3},"method":"x","id":}"#, false));
        assert_eq!(v["id"], Value::Null);
        // Cut short: the id comes first.
        let v = reply(g.judge(br#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"arguments":{"query":"xxxx"#, true));
        assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (json!(12), json!(-32700)), "{v}");
        let v = reply(g.judge(b"\xff\xfe{\"id\":5}", false));
        assert_eq!(v["id"], 5);
    }

    #[test]
    fn lone_surrogates_are_read_as_replacement_characters() {
        assert_eq!(replace_lone_surrogates(r#"{"q":"a\ud800b"}"#).as_deref(), Some(r#"{"q":"a\ufffdb"}"#));
        assert_eq!(replace_lone_surrogates(r#"{"q":"\udc00\ud83d\ude00\\ud800"}"#).as_deref(), Some(r#"{"q":"\ufffd\ud83d\ude00\\ud800"}"#));
        assert_eq!(replace_lone_surrogates(r#"{"q":"\ud83d\ude00"}"#), None);
        let mut g = initialized();
        let line = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_search","arguments":{"query":"x\ud800"}}}"#;
        match g.judge(line.as_bytes(), false) {
            Verdict::Forward(t) => assert!(t.contains(r"x\ufffd"), "{t}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn requests_rmcp_would_drop_or_misread_are_answered_here() {
        let mut g = Gate::default();
        let v = reply(g.judge(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#, false));
        assert_eq!(v["error"]["code"], NOT_INITIALIZED);
        assert!(v["error"]["message"].as_str().unwrap().contains("initialize"), "{v}");
        assert_eq!(g.judge(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#, false), Verdict::Drop("notification before initialize"));
        assert!(matches!(g.judge(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#, false), Verdict::Forward(_)));
        let mut g = initialized();
        let v = reply(g.judge(br#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#, false));
        assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (json!(3), json!(INVALID_PARAMS)));
        let v = reply(g.judge(br#"[{"jsonrpc":"2.0","id":4,"method":"ping"}]"#, false));
        assert_eq!(v["error"]["code"], INVALID_REQUEST);
        let v = reply(g.judge(br#"{"jsonrpc":"2.0","id":5}"#, false));
        assert_eq!(v["id"], 5);
        let v = reply(g.judge(br#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"memory_search","arguments":5}}"#, false));
        assert_eq!((v["id"].clone(), v["error"]["code"].clone()), (json!(6), json!(INVALID_PARAMS)));
        assert_eq!(g.judge(b"  \r", false), Verdict::Drop("empty line"));
        assert_eq!(reply(g.judge(b"\x0b", false))["error"]["code"], PARSE_ERROR);
    }
}
