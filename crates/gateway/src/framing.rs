//! Newline-delimited JSON-RPC framing, shared by every hop (agent to shim, shim to
//! engine, engine to server).
//!
//! One message per line. A line longer than [`MAX_FRAME`] bytes is skipped, never
//! buffered whole: the reader reports it and continues with the next line, so one bad
//! peer message costs one message, not the session.
//!
//! In four parts: reading lines under the cap and feeding them to a session (`lines`:
//! [`LineReader`], [`read_lines`]); queues toward a peer and the back-pressure that holds
//! whoever feeds a congested one (`pressure`: [`Pressure`], [`outbound`], [`write_lines`]);
//! the `id` of a line too large or too broken to parse, so its answer still reaches its request
//! (`id`: [`top_level_id`]); and strict JSON, a line parsed into exactly the value Postern
//! forwards and encoded back (`strict`: [`parse_object`], [`encode`]).

mod id;
mod lines;
mod pressure;
mod strict;

pub use id::top_level_id;
pub use lines::{Line, LineReader, read_lines, read_lines_until};
pub use pressure::{HIGH_WATER, Inbound, Outbound, Pressure, READ_AHEAD, outbound, write_lines};
pub use strict::{FrameError, encode, parse_object, scan};

/// The largest message Postern accepts on any hop: 8 MiB.
pub const MAX_FRAME: usize = 8 * 1024 * 1024;
