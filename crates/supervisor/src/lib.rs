//! Launching and supervising stdio MCP server processes. Only this crate touches
//! processes.
//!
//! Each server runs in its own process group, so stopping it also stops what it
//! spawned (`npx` starts `node`, `uv run` starts `python`): a wrapper can never leave
//! its real server behind.

mod process;

pub use process::{ExitReport, ExitWaiter, ProcessHandle, SpawnError, Spawned, spawn};
