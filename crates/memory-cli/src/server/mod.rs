//! The shared server of a state folder (`memory server start`): one-shot commands ask it over a Unix socket
//! instead of opening the index (and the model) themselves, and answer in-process when it does not answer.
//!
//! `protocol`: what is said over the socket; `client`: the CLI's side; `daemon`: the server; `control`: start,
//! stop, status and the files of a state folder's server.

pub mod client;
pub mod control;
mod daemon;
pub mod protocol;
