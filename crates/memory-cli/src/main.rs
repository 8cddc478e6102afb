//! `memory`: index and search an agent's Markdown memory from the command line.

// A panic in a long-lived server fails the requests in flight: production code says what went wrong instead
// (`memory_core::locks` for lock poisoning); tests unwrap freely.
#![cfg_attr(not(test), deny(clippy::unwrap_used))]

mod backlog;
mod cli;
mod doctor;
mod engine;
mod http;
mod job;
mod long_running;
mod man;
mod mcp_gate;
mod openclaw;
mod openclaw_plugin;
mod output;
mod progress;
mod serve;
mod server;
mod status;
mod unopened;
mod watch;

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use cli::{Cli, Command};
use engine::default_state_dir;

fn main() -> ExitCode {
    // An empty variable (`MEMORY_WORKSPACE=`) means unset, as for the shell's own; clap would take it as a
    // missing value. Removed before any thread starts.
    for name in ["MEMORY_WORKSPACE", "MEMORY_CONFIG", "MEMORY_STATE_DIR", "MEMORY_AGENT", "MEMORY_ALLOW_APPEND", "MEMORY_NO_SERVER"] {
        if std::env::var_os(name).is_some_and(|v| v.is_empty()) {
            std::env::remove_var(name);
        }
    }
    let cli = Cli::parse();
    if let Command::Completions { shell } = &cli.command {
        clap_complete::generate(*shell, &mut Cli::command(), "memory", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    if let Command::Man { out_dir } = &cli.command {
        return report(man::run(out_dir.as_deref()));
    }
    // A server's log file says when each line happened; a command's stderr does not need to.
    let timed = matches!(&cli.command, Command::Server { action: server::control::Action::Run { .. } });
    // The doctor says what the engines' warnings would: its lines stay alone unless logs are asked for.
    let quiet = matches!(&cli.command, Command::Doctor { .. });
    init_logging(cli.verbose, timed, quiet);
    if let Command::Openclaw { action } = &cli.command {
        // Reads and edits OpenClaw's config only: no engine to open.
        return match openclaw_plugin::run(action) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Doctor { deep, json } = &cli.command {
        // Opens what it checks itself, never through a shared server: the server is one of the checks.
        let state_dir = cli.state_dir.clone().unwrap_or_else(default_state_dir);
        let args = doctor::Args { config: cli.config.as_deref(), workspace: cli.workspace.as_deref(), state_dir, agent: &cli.agent, deep: *deep };
        return match doctor::run(&args, *json) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => report(Err(e)),
        };
    }
    if let Command::Server { action } = &cli.command {
        let state_dir = cli.state_dir.clone().unwrap_or_else(default_state_dir);
        return report(server::control::run(action, &state_dir));
    }
    // search, get, status, index, append: one job, answered by a shared server when one answers, else here.
    match job::job_of(&cli.command) {
        Ok(Some(job)) => {
            return match job::one_shot(&cli, job) {
                Ok(answer) => answer.print(),
                Err(e) => report(Err(e)),
            }
        }
        Ok(None) => {}
        Err(e) => return report(Err(e)),
    }
    // Watch and serve sync on a blocking thread while other tasks answer: they need a multi-thread runtime.
    let long_running = matches!(cli.command, Command::Watch { .. } | Command::Serve { .. });
    let rt = if long_running {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    report(rt.block_on(long_running::run(cli)))
}

/// The exit of a command that printed its own output.
fn report(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`memory search x | head -1`): nothing more to say, as `grep` says nothing.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// The error and its causes on one line.
pub(crate) fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}

fn init_logging(verbose: u8, timed: bool, quiet: bool) {
    let default = match verbose {
        0 if quiet => "error",
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    use std::io::IsTerminal;
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .compact();
    if timed {
        fmt.init();
    } else {
        fmt.without_time().init();
    }
}
