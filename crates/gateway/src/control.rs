//! Management over the engine's socket: one request line, one JSON answer line.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use crate::framing::{Line, LineReader};
use crate::hello::{ControlCommand, ControlRequest, SOCKET_PROTOCOL, WireProof};

/// Answers management requests; implemented by the engine.
pub trait ControlHandler: Send + Sync + 'static {
    /// The answer to `command`, with the person's `proof` if the asker sent one, from the
    /// process `peer` (the kernel's word; `None` when it cannot say), as the JSON line the
    /// engine's typed answer serializes to (`postern_engine::answer::ControlOutcome`). May
    /// block (the keychain, argon2): the listener calls it off the async threads.
    fn handle(&self, command: ControlCommand, proof: Option<WireProof>, peer: Option<u32>)
    -> Value;
}

/// Why a management request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No engine listens on the socket.
    #[error("Postern is not running (no engine at {0}): start the app or `postern daemon`")]
    NotRunning(String),
    /// The engine answered something unreadable, or nothing.
    #[error("the engine gave no usable answer: {0}")]
    BadAnswer(String),
}

/// Sends one management request to the engine at `socket` and returns its answer line as
/// JSON; `postern_engine::answer::ask` reads it as a typed answer.
pub async fn request(socket: &Path, command: ControlCommand) -> Result<Value, ControlError> {
    request_with(socket, command, None).await
}

/// [`request`] with the person's proof of presence.
pub async fn request_with(
    socket: &Path,
    command: ControlCommand,
    proof: Option<WireProof>,
) -> Result<Value, ControlError> {
    let not_running = || ControlError::NotRunning(socket.display().to_string());
    // The person answers an OS dialog at their own pace (the engine gives them 120 s).
    let within = Duration::from_secs(match proof {
        Some(WireProof::Os) => 150,
        _ => 30,
    });
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|_| not_running())?;
    let (read, mut write) = stream.into_split();
    let mut line = serde_json::to_vec(&ControlRequest {
        postern: SOCKET_PROTOCOL,
        control: command,
        proof,
    })
    .map_err(|e| ControlError::BadAnswer(e.to_string()))?;
    line.push(b'\n');
    write.write_all(&line).await.map_err(|_| not_running())?;
    let mut reader = LineReader::new(BufReader::new(read));
    match tokio::time::timeout(within, reader.next()).await {
        Ok(Ok(Some(Line::Frame(answer)))) => {
            serde_json::from_slice(&answer).map_err(|e| ControlError::BadAnswer(e.to_string()))
        }
        Ok(Ok(_)) | Ok(Err(_)) => Err(ControlError::BadAnswer("the connection closed".into())),
        Err(_) => Err(ControlError::BadAnswer(format!(
            "no answer within {}s",
            within.as_secs()
        ))),
    }
}
