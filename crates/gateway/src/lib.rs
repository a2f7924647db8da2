//! The MCP data path. Agents' shims connect to the engine's local socket; each
//! connection becomes a session that owns one server process and carries the
//! conversation both ways, forwarding original bytes and answering only what the gate
//! must answer itself (`initialize`, `ping`, `server/discover`, and errors).
//! Only this crate touches sockets.

pub mod audit;
pub mod authorize;
pub mod control;
pub mod framing;
#[cfg(target_os = "linux")]
mod handoff;
mod handshake;
pub mod hello;
#[cfg(target_os = "linux")]
mod ledger;
mod listener;
pub mod message;
pub mod method;
mod registry;
mod session;
pub mod shim;
mod upstream;

pub use framing::MAX_FRAME;
pub use handshake::negotiate;
pub use listener::{Gateway, bind, serve};
pub use registry::{Credentials, Phase, SessionInfo, Sessions};
pub use session::Command;
pub use upstream::ServerDirectory;
