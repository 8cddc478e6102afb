//! The shared server of a state folder (`memory server start`): one-shot commands ask it over a Unix socket
//! instead of opening the index (and the model) themselves, and answer in-process when it does not answer.
//!
//! `protocol`: what is said over the socket; `client`: the CLI's side; `daemon`: the server; `control`: the
//! `memory server` subcommands; `lifecycle`: start, stop, status and the files of a state folder's server.
//!
//! Unix only ([`AVAILABLE`]): the server is reached over a Unix socket (mode 0600, the peer's uid checked), which
//! std offers nowhere else. Elsewhere no server is ever present, so every command answers in-process exactly as
//! it does on Unix when no server runs, and `memory server ...` says why it is not there.

pub mod client;
pub mod control;
#[cfg(unix)]
mod daemon;
#[cfg(unix)]
mod lifecycle;
#[cfg_attr(not(unix), allow(dead_code, reason = "most of the wire is the server's, which is Unix's"))]
pub mod protocol;

/// Whether this platform has the shared server: the one place that decides it (the modules above that are
/// `cfg(unix)` follow it).
pub const AVAILABLE: bool = cfg!(unix);
