//! The one-shot commands (`search`, `get`, `status`, `index`, `append`, `recall`) as jobs: data that this process
//! runs, or that a shared server runs and answers with the bytes this process would print.

use std::io::Write;
use std::process::ExitCode;

use anyhow::{bail, Context};
use memory_core::{GetRequest, RecallRequest, SearchRequest, SyncOptions};

use crate::cli::{Cli, Command};
use crate::engine::{default_state_dir, get_without_index, open, resolve, Opened};
use crate::{backlog, one_line, output, progress, server, status};

/// What `search`, `get`, `status`, `index` and `append` do, as data: run here or by a shared server
/// (`server/`), which answers with the bytes this process would print.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "cmd", rename_all = "camelCase", rename_all_fields = "camelCase", deny_unknown_fields)]
pub(crate) enum Job {
    Index {
        force: bool,
        json: bool,
    },
    Search {
        request: SearchRequest,
        json: bool,
    },
    Recall {
        request: RecallRequest,
        json: bool,
    },
    Get {
        request: GetRequest,
        json: bool,
    },
    Status {
        deep: bool,
        json: bool,
    },
    /// `written`: the entry is already in the file (written by the client before it handed the indexing to a
    /// server); only indexing and the answer remain, so a retry never writes it twice.
    Append {
        text: String,
        written: Option<memory_core::append::Appended>,
        json: bool,
    },
}

impl Job {
    pub(crate) fn is_status(&self) -> bool {
        matches!(self, Job::Status { .. })
    }

    /// A search or an append leaves the files waiting for vectors to a sync nobody waits for
    /// ([`backlog::start_if_waiting`]).
    pub(crate) fn may_leave_vectors_waiting(&self) -> bool {
        matches!(self, Job::Search { .. } | Job::Append { .. })
    }
}

pub(crate) fn job_of(command: &Command) -> anyhow::Result<Option<Job>> {
    Ok(Some(match command {
        Command::Index { force, json } => Job::Index { force: *force, json: *json },
        Command::Search { search, json } => Job::Search { request: search.request(), json: *json },
        Command::Explain { search, path, json } => {
            Job::Search { request: SearchRequest { explain: true, explain_path: path.clone(), ..search.request() }, json: *json }
        }
        Command::Recall { message, projects, project_entries, json } => {
            let request = RecallRequest {
                message: message.clone().unwrap_or_default(),
                active_project_keys: projects.clone(),
                project_entries: *project_entries,
            };
            Job::Recall { request, json: *json }
        }
        Command::Get { path, from, lines, offset, json } => {
            Job::Get { request: GetRequest { path: path.clone(), from: *from, lines: *lines, offset: *offset }, json: *json }
        }
        Command::Status { deep, json } => Job::Status { deep: *deep, json: *json },
        Command::Append { text, json } => {
            let text = if text.len() == 1 && text[0] == "-" { read_entry_from_stdin()? } else { text.join(" ") };
            Job::Append { text, written: None, json: *json }
        }
        _ => return Ok(None),
    }))
}

/// What a job printed, and its exit code.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Answer {
    stdout: String,
    stderr: String,
    exit: u8,
}

impl Answer {
    pub(crate) fn failed(&mut self, e: &anyhow::Error) {
        self.stderr.push_str(&format!("error: {}\n", one_line(e)));
        self.exit = 1;
    }

    pub(crate) fn print(self) -> ExitCode {
        let mut out = std::io::stdout().lock();
        match out.write_all(self.stdout.as_bytes()).and_then(|()| out.flush()) {
            Ok(()) => {}
            // The reader went away (`memory search x | head -1`): nothing more to say, as `grep` says nothing.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: cannot write the answer: {e}");
                return ExitCode::FAILURE;
            }
        }
        let _ = std::io::stderr().write_all(self.stderr.as_bytes());
        ExitCode::from(self.exit)
    }
}

/// A job of a one-shot command: the shared server for this state folder answers when it runs, is this version
/// and answers in time; otherwise (or with `--no-server`) this process opens the engine. Same bytes either way.
pub(crate) fn one_shot(cli: &Cli, mut job: Job) -> anyhow::Result<Answer> {
    let resolved = resolve(cli)?;
    let state_dir = cli.state_dir.clone().unwrap_or_else(default_state_dir);
    if let Job::Get { request, json } = &job {
        if let Some(response) = get_without_index(&resolved, request) {
            // A read of a file: no engine, no server.
            let mut answer = Answer::default();
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let result = response.map_err(anyhow::Error::from).and_then(|r| output::get(&mut out, &mut err, &r, *json));
            answer.stdout = String::from_utf8_lossy(&out).into_owned();
            answer.stderr = String::from_utf8_lossy(&err).into_owned();
            if let Err(e) = result {
                answer.failed(&e);
            }
            return Ok(answer);
        }
    }
    let progress = match &job {
        Job::Index { json, .. } | Job::Search { json, .. } => progress::wanted(*json),
        _ => false,
    };
    // A long `index` someone watches keeps its progress bars: it runs here.
    let ask_server = !cli.no_server && (!progress || !matches!(job, Job::Index { .. }));
    if ask_server && server::client::present(&state_dir) {
        if let Job::Append { text, written: written @ None, .. } = &mut job {
            // Written here, once; the server (or this process, if the server fails) only indexes it.
            *written = Some(memory_core::append::append_entry(&resolved.workspace, text)?);
        }
        match server::client::ask(&state_dir, &resolved, &cli.agent, &job) {
            Ok(answer) => {
                tracing::debug!("answered by the shared server");
                return Ok(answer);
            }
            Err(why) => tracing::debug!(%why, "the shared server did not answer; answering in-process"),
        }
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the runtime")?;
    rt.block_on(async {
        let opened = open(resolved, state_dir.clone(), &cli.agent, job.is_status(), progress).await?;
        let mut answer = run_job(&job, &opened).await;
        if job.may_leave_vectors_waiting() {
            let target = backlog::Target {
                workspace: opened.space.workspace(),
                config_path: opened.config_path.as_deref(),
                state_dir: &state_dir,
                agent: &cli.agent,
            };
            backlog::start_if_waiting(&opened, &target).await;
        }
        if let Err(e) = opened.engine.close().await {
            answer.failed(&e.into());
        }
        Ok(answer)
    })
}

/// Run a job on an open engine: what it prints and its exit code (an error is printed as `error: ...`).
pub(crate) async fn run_job(job: &Job, opened: &Opened) -> Answer {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let result = run_job_into(job, opened, &mut out, &mut err).await;
    let mut answer = Answer { stdout: String::from_utf8_lossy(&out).into_owned(), stderr: String::from_utf8_lossy(&err).into_owned(), exit: 0 };
    if let Err(e) = result {
        answer.failed(&e);
    }
    answer
}

pub(crate) async fn run_job_into(job: &Job, opened: &Opened, out: &mut Vec<u8>, err: &mut Vec<u8>) -> anyhow::Result<()> {
    let engine = opened.engine.as_ref();
    match job {
        Job::Index { force, json } => {
            let started = std::time::Instant::now();
            let report = engine.sync(SyncOptions { force: *force, ..SyncOptions::default() }).await?;
            output::sync_report(out, &report, started.elapsed(), *json)
        }
        Job::Search { request, json } => {
            let response = engine.search(request).await?;
            if request.explains() && !*json {
                return output::explanation(out, err, &response);
            }
            output::search(out, err, &response, *json)
        }
        Job::Recall { request, json } => {
            let response = engine.recall(request).await?;
            output::recall(out, err, &response, *json)
        }
        Job::Get { request, json } => {
            let response = engine.get(request).await?;
            output::get(out, err, &response, *json)
        }
        Job::Status { deep, json } => {
            let host = status::HostInfo {
                config: &opened.config,
                config_path: opened.config_path.as_deref(),
                workspace_from: opened.workspace_from,
                provider_note: opened.provider_note.as_deref(),
                reranker: opened.reranker.as_deref(),
            };
            let (s, v) = status::collect(engine, &host, *deep).await?;
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
                Ok(())
            } else {
                output::status(out, &s, false)?;
                status::print_host(out, &v)
            }
        }
        Job::Append { text, written, json } => {
            let r = match written {
                Some(appended) => memory_host::append::index_appended(engine, appended.clone()).await,
                None => memory_host::append::append_and_index(engine, opened.space.workspace(), text).await?,
            };
            if *json {
                writeln!(out, "{}", serde_json::to_string_pretty(&r)?)?;
            } else {
                writeln!(
                    out,
                    "Appended to {} (lines {}-{}){}",
                    r.appended.path,
                    r.appended.start_line,
                    r.appended.end_line,
                    if r.indexed { "" } else { "; not indexed yet" }
                )?;
                if let Some(w) = &r.warning {
                    writeln!(err, "warning: {w}")?;
                }
            }
            Ok(())
        }
    }
}

/// The text of `memory append -`: at most what one entry can hold (with room for surrounding whitespace), so
/// `append - </dev/zero` stops at once instead of reading without end.
pub(crate) fn read_entry_from_stdin() -> anyhow::Result<String> {
    use std::io::Read;
    let limit = memory_core::append::MAX_ENTRY_BYTES * 4;
    let mut buf = Vec::new();
    std::io::stdin().lock().take(limit as u64 + 1).read_to_end(&mut buf).context("cannot read stdin")?;
    if buf.len() > limit {
        bail!("stdin holds more than {limit} bytes; one entry holds at most {} bytes of text", memory_core::append::MAX_ENTRY_BYTES);
    }
    String::from_utf8(buf).context("the text on stdin is not UTF-8")
}
