//! The CLI's side: ask the state folder's server, within bounds, and say why not when it does not answer (the
//! caller then answers in-process). Blocking std I/O: no runtime is started for a question the server answers.

use std::path::Path;
use std::time::Duration;

use self::conn::Conn;
use super::protocol::{Paths, Reply, Request, ServerInfo};
use crate::engine::Resolved;
use crate::job::{Answer, Job};

/// How long the client waits for the server to take a request (connect, send, `accepted`).
pub const ACCEPT_WAIT: Duration = Duration::from_secs(1);

/// How long it waits for the answer of a read (search, get, status) once taken; `index` and `append` wait as long
/// as the work takes (a killed server closes the socket, which ends the wait at once).
pub const READ_ANSWER_WAIT: Duration = Duration::from_secs(30);

/// Why the server did not answer.
#[derive(Debug)]
pub enum NotAnswered {
    NoServer,
    Io(std::io::Error),
    Refused(String),
    Malformed(String),
}

impl std::fmt::Display for NotAnswered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotAnswered::NoServer => write!(f, "no server socket"),
            NotAnswered::Io(e) => write!(f, "{e}"),
            NotAnswered::Refused(r) => write!(f, "refused: {r}"),
            NotAnswered::Malformed(m) => write!(f, "malformed reply: {m}"),
        }
    }
}

impl From<std::io::Error> for NotAnswered {
    fn from(e: std::io::Error) -> Self {
        NotAnswered::Io(e)
    }
}

/// A socket file is there (a server may answer). Never where the platform has no shared server.
pub fn present(state_dir: &Path) -> bool {
    super::AVAILABLE && std::fs::symlink_metadata(Paths::new(state_dir).socket).is_ok()
}

/// Ask the server to run `job` for this workspace, agent and config.
pub fn ask(state_dir: &Path, resolved: &Resolved, agent: &str, job: &Job) -> Result<Answer, NotAnswered> {
    let request = Request::Run {
        workspace: resolved.workspace.clone(),
        workspace_from: resolved.workspace_from,
        agent: agent.to_string(),
        config_path: resolved.config_path.clone(),
        config_hash: resolved.config_hash.clone(),
        job: job.clone(),
    };
    let mut conn = Conn::open(state_dir, request)?;
    match conn.reply(Some(ACCEPT_WAIT))? {
        Reply::Accepted => {}
        Reply::Refused { reason, version } => return Err(NotAnswered::Refused(format!("{reason} (server {version})"))),
        other => return Err(NotAnswered::Malformed(format!("{other:?}"))),
    }
    let wait = match job {
        Job::Search { .. } | Job::Recall { .. } | Job::Get { .. } | Job::Status { .. } => Some(READ_ANSWER_WAIT),
        Job::Index { .. } | Job::Append { .. } => None,
    };
    match conn.reply(wait)? {
        Reply::Done { answer } => Ok(answer),
        Reply::Refused { reason, version } => Err(NotAnswered::Refused(format!("{reason} (server {version})"))),
        other => Err(NotAnswered::Malformed(format!("{other:?}"))),
    }
}

/// What the server says it is.
pub fn ping(state_dir: &Path) -> Result<ServerInfo, NotAnswered> {
    let mut conn = Conn::open(state_dir, Request::Ping)?;
    match conn.reply(Some(ACCEPT_WAIT))? {
        Reply::Info { info } => Ok(info),
        other => Err(NotAnswered::Malformed(format!("{other:?}"))),
    }
}

/// Ask the server to stop.
#[cfg_attr(not(unix), allow(dead_code, reason = "only `memory server stop` asks, which is Unix's"))]
pub fn stop(state_dir: &Path) -> Result<(), NotAnswered> {
    let mut conn = Conn::open(state_dir, Request::Stop)?;
    match conn.reply(Some(ACCEPT_WAIT))? {
        Reply::Stopping => Ok(()),
        other => Err(NotAnswered::Malformed(format!("{other:?}"))),
    }
}

/// One exchange with the server over its Unix socket.
#[cfg(unix)]
mod conn {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::net::UnixStream;
    use std::path::Path;
    use std::time::Duration;

    use super::{NotAnswered, ACCEPT_WAIT};
    use crate::server::protocol::{build_identity, Envelope, Paths, Reply, Request, MAX_REPLY_BYTES, PROTOCOL};

    pub(super) struct Conn {
        reader: BufReader<UnixStream>,
    }

    impl Conn {
        pub(super) fn open(state_dir: &Path, request: Request) -> Result<Conn, NotAnswered> {
            let socket = Paths::new(state_dir).socket;
            let mut stream = match UnixStream::connect(&socket) {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(NotAnswered::NoServer),
                Err(e) => return Err(e.into()),
            };
            stream.set_read_timeout(Some(ACCEPT_WAIT))?;
            stream.set_write_timeout(Some(ACCEPT_WAIT))?;
            let envelope = Envelope { protocol: PROTOCOL, version: build_identity(), request };
            let mut line = serde_json::to_vec(&envelope).map_err(|e| NotAnswered::Malformed(e.to_string()))?;
            line.push(b'\n');
            stream.write_all(&line)?;
            stream.flush()?;
            Ok(Conn { reader: BufReader::new(stream) })
        }

        pub(super) fn reply(&mut self, wait: Option<Duration>) -> Result<Reply, NotAnswered> {
            self.reader.get_ref().set_read_timeout(wait)?;
            let mut line = Vec::new();
            (&mut self.reader).take(MAX_REPLY_BYTES).read_until(b'\n', &mut line)?;
            if line.last() != Some(&b'\n') {
                return Err(NotAnswered::Io(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the connection")));
            }
            serde_json::from_slice(&line).map_err(|e| NotAnswered::Malformed(e.to_string()))
        }
    }
}

/// No shared server on this platform ([`super::AVAILABLE`]): nothing to connect to, so every question answers
/// [`NotAnswered::NoServer`] and the caller answers in-process.
#[cfg(not(unix))]
mod conn {
    use std::path::Path;
    use std::time::Duration;

    use super::NotAnswered;
    use crate::server::protocol::{Reply, Request};

    pub(super) enum Conn {}

    impl Conn {
        pub(super) fn open(_state_dir: &Path, _request: Request) -> Result<Conn, NotAnswered> {
            Err(NotAnswered::NoServer)
        }

        pub(super) fn reply(&mut self, _wait: Option<Duration>) -> Result<Reply, NotAnswered> {
            match *self {}
        }
    }
}
