//! `memory serve`: the agent tools over the Model Context Protocol (stdio, the `rmcp` crate).
//!
//! Tools: `memory_search {query, maxResults?, minScore?, activeProjectKeys?, sources?}`, `memory_recall {message,
//! activeProjectKeys?}` (trigger recall) and `memory_get {path, from?, lines?}` answer with the
//! wire shapes of `memory_core::types` (as JSON text and as structured content); refusals and other engine errors are
//! tool errors (`isError: true`, `{"error": {kind, message}}`), so the agent sees why. `memory_append {text}` is
//! listed only when appending is allowed (`--allow-append`); arguments that do not fit a tool's schema are tool
//! errors of kind `invalid_input` too. Lines the client sends pass [`crate::mcp_gate`] first, which answers what
//! rmcp would drop. The watcher keeps the index fresh meanwhile.

use std::path::PathBuf;
use std::sync::Arc;

use memory_core::{GetRequest, MemoryBackend, MemoryError, RecallRequest, SearchRequest, SyncOptions};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{tool, tool_handler, tool_router, ErrorData, ServerHandler};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tracing::{info, warn};

// The tools' arguments are memory_core's request types (their schemas and field docs are the tools' schemas);
// only appending, which no engine call takes as such, has arguments of its own.

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppendArgs {
    /// The note to remember, in Markdown. Appended with a timestamp to today's memory/YYYY-MM-DD.md.
    pub text: String,
}

/// A tool's arguments, or why they do not fit its schema: a mismatch is answered as a tool error in the
/// documented `{"error": {"kind": "invalid_input", ...}}` shape (rmcp's own answer is a bare JSON-RPC error
/// whose text the agent may never see). The schema offered is `T`'s.
#[derive(Debug)]
pub struct Checked<T>(Result<T, String>);

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Checked<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        Ok(Checked(serde_json::from_value(v).map_err(|e| e.to_string())))
    }
}

impl<T: JsonSchema> JsonSchema for Checked<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        T::schema_name()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        T::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        T::json_schema(generator)
    }
    fn inline_schema() -> bool {
        T::inline_schema()
    }
}

impl<T> Checked<T> {
    /// The arguments, or the tool error that answers the call.
    #[allow(clippy::result_large_err, reason = "the error is the tool's answer, returned once per call")]
    fn get(self) -> Result<T, CallToolResult> {
        self.0.map_err(|e| tool_error(&MemoryError::InvalidInput(format!("arguments do not fit the tool's schema: {e}"))))
    }
}

#[derive(Clone)]
pub struct MemoryServer {
    engine: Arc<dyn MemoryBackend>,
    workspace: PathBuf,
    tool_router: ToolRouter<Self>,
}

fn tool_error(e: &MemoryError) -> CallToolResult {
    CallToolResult::structured_error(json!({ "error": { "kind": e.kind(), "message": e.to_string() } }))
}

fn tool_ok(v: &impl serde::Serialize) -> Result<CallToolResult, ErrorData> {
    let value = serde_json::to_value(v).map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(CallToolResult::structured(value))
}

/// A tool's answer to what the engine returned: the result as structured content, an error as a tool error
/// (the agent sees why).
fn answer(result: memory_core::Result<impl serde::Serialize>) -> Result<CallToolResult, ErrorData> {
    match result {
        Ok(r) => tool_ok(&r),
        Err(e) => Ok(tool_error(&e)),
    }
}

#[tool_router]
impl MemoryServer {
    pub fn new(engine: Arc<dyn MemoryBackend>, workspace: PathBuf, allow_append: bool) -> MemoryServer {
        let mut tool_router = Self::tool_router();
        if !allow_append {
            tool_router.remove_route("memory_append");
        }
        MemoryServer { engine, workspace, tool_router }
    }

    #[tool(
        name = "memory_search",
        description = tool_text::search()
    )]
    async fn memory_search(&self, Parameters(args): Parameters<Checked<SearchRequest>>) -> Result<CallToolResult, ErrorData> {
        let request = match args.get() {
            Ok(a) => a,
            Err(refusal) => return Ok(refusal),
        };
        answer(self.engine.search(&request).await.inspect_err(|e| warn!(error = %e, "memory_search failed")))
    }

    #[tool(
        name = "memory_recall",
        description = "Trigger recall: the entries of MEMORY.md / USER.md whose <!-- trigger: ... --> phrases match a message strongly (score >= 0.72, at most 3), with path, line, text and score; a host injects them as context before replying. Daily notes never qualify."
    )]
    async fn memory_recall(&self, Parameters(args): Parameters<Checked<RecallRequest>>) -> Result<CallToolResult, ErrorData> {
        let request = match args.get() {
            Ok(a) => a,
            Err(refusal) => return Ok(refusal),
        };
        answer(self.engine.recall(&request).await.inspect_err(|e| warn!(error = %e, "memory_recall failed")))
    }

    #[tool(
        name = "memory_get",
        description = tool_text::get()
    )]
    async fn memory_get(&self, Parameters(args): Parameters<Checked<GetRequest>>) -> Result<CallToolResult, ErrorData> {
        let request = match args.get() {
            Ok(a) => a,
            Err(refusal) => return Ok(refusal),
        };
        answer(self.engine.get(&request).await)
    }

    #[tool(
        name = "memory_append",
        description = "Remember something: append a timestamped entry to today's daily log memory/YYYY-MM-DD.md (never rewrites existing text). The entry is searchable immediately."
    )]
    async fn memory_append(&self, Parameters(args): Parameters<Checked<AppendArgs>>) -> Result<CallToolResult, ErrorData> {
        let args = match args.get() {
            Ok(a) => a,
            Err(refusal) => return Ok(refusal),
        };
        answer(memory_host::append::append_and_index(self.engine.as_ref(), &self.workspace, &args.text).await)
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("memory", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Long-term memory of this agent, kept as Markdown files. Call memory_search before answering anything \
                 about prior work, decisions, dates, people or preferences; then memory_get to read the lines you need.",
            )
    }
}

/// Serve MCP on stdin/stdout until the client closes the connection.
pub async fn run(
    engine: Arc<dyn MemoryBackend>,
    workspace: PathBuf,
    allow_append: bool,
    watch: Option<crate::watch::WatchHandle>,
    session_start_sync: bool,
) -> anyhow::Result<()> {
    if watch.is_none() && session_start_sync {
        // No watcher: start the index on its way (a rebuild for new settings, say) without holding up the
        // handshake; every search checks the files itself before answering.
        let engine = engine.clone();
        tokio::spawn(async move {
            if let Err(e) = engine.sync(SyncOptions::beside_searches()).await {
                warn!(error = %e, "initial sync failed; answering from the current index");
            }
        });
    }
    let server = MemoryServer::new(engine, workspace, allow_append);
    info!(allow_append, "MCP server on stdio");
    // Through the gate: every line the client sends gets an answer, even one rmcp cannot parse.
    crate::mcp_gate::serve(server, tokio::io::stdin(), tokio::io::stdout()).await?;
    if let Some(w) = watch {
        w.stop().await;
    }
    Ok(())
}

/// The tools' texts that name the memory files: discovery's words ([`memory_core::discovery::MEMORY_FILES`]), so
/// what an agent is told matches what is searched and what `memory_get` reads.
mod tool_text {
    use memory_core::discovery::MEMORY_FILES;

    pub fn search() -> String {
        format!(
            "Search the agent's long-term memory ({MEMORY_FILES}: daily logs memory/YYYY-MM-DD.md and notes). Returns ranked snippets with path, startLine, endLine, score and snippet; read more of a file with memory_get. Use before answering questions about prior work, decisions, people, preferences or dates."
        )
    }

    pub fn get() -> String {
        format!(
            "Read a memory file ({MEMORY_FILES}) or a line range of it, e.g. around a memory_search hit. Other paths are refused. A daily log that does not exist yet reads as empty text."
        )
    }
}
