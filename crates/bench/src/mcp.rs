//! A minimal MCP client over a `memory serve` child's stdio (JSON-RPC lines), for timing `memory_search` the
//! way an agent's client calls it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::bail;
use serde_json::{json, Value};

pub struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    id: u64,
}

impl Session {
    /// Spawn `cmd` (a `memory ... serve` command) and complete the MCP handshake.
    pub fn start(cmd: &mut Command) -> anyhow::Result<Session> {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut s = Session { child, stdin, stdout, id: 0 };
        s.call("initialize", json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}))?;
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(s)
    }

    fn send(&mut self, v: Value) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().expect("open until drop");
        writeln!(stdin, "{v}")?;
        stdin.flush()?;
        Ok(())
    }

    pub fn call(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.id += 1;
        let id = self.id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("memory serve closed its output");
            }
            let v: Value = serde_json::from_str(&line)?;
            if v["id"] == id {
                return Ok(v);
            }
        }
    }

    /// `memory_search`; the text of its answer (the results as JSON).
    pub fn search(&mut self, query: &str) -> anyhow::Result<String> {
        let r = self.call("tools/call", json!({"name": "memory_search", "arguments": {"query": query}}))?;
        Ok(r["result"]["content"][0]["text"].as_str().unwrap_or_default().to_string())
    }

    /// The server's resident memory now and at its peak, in MB (Linux `/proc`; `None` elsewhere).
    pub fn resident_mb(&self) -> Option<(f64, f64)> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb =
            |key: &str| status.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok());
        Some((kb("VmRSS:")? / 1024.0, kb("VmHWM:")? / 1024.0))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // Closing stdin ends the session; the server exits.
        drop(self.stdin.take());
        let _ = self.child.wait();
    }
}
