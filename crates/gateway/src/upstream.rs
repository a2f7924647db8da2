//! Starting one server for one session: launch it and complete the `initialize`
//! handshake on the agent's behalf.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use postern_domain::{ExecutionRecord, ServerConfig, ServerLabel};
use postern_supervisor::{ArtifactWatch, DigestCache, Given, ProcessHandle, launch_with};

use crate::authorize::{Authorizer, Release};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use crate::framing::{Line, LineReader};
use crate::handshake::upstream_initialize_params;
use crate::message::{self, Kind, Message};

/// How long a server gets to answer `initialize` (a first `npx` run may download).
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(60);

/// The id of the `initialize` request Postern sends upstream. No agent request can be
/// in flight to the server before its handshake, so it cannot collide.
const INIT_ID: &str = "postern-initialize";

/// Where the engine finds server configurations.
pub trait ServerDirectory: Send + Sync + 'static {
    /// The configuration for `label`, `None` when no such server is configured.
    fn lookup(&self, label: &ServerLabel) -> Result<Option<ServerConfig>, String>;
}

/// A server that launched and completed `initialize`.
#[derive(Debug)]
pub(crate) struct Started {
    pub stdin: ChildStdin,
    pub stdout: LineReader<BufReader<ChildStdout>>,
    pub handle: ProcessHandle,
    /// The server's `initialize` result.
    pub init: Map<String, Value>,
    /// What was launched: the new epoch.
    pub record: ExecutionRecord,
    /// The configuration it was launched from.
    pub config: ServerConfig,
    /// Which bound credentials this launch got and which it did not (values dropped).
    pub credentials: Release,
    /// The watch on its hashed files, begun before the launch was checked (the epoch's
    /// artifact watcher takes it over).
    pub watch: Option<ArtifactWatch>,
}

/// Why a server did not start.
#[derive(Debug)]
pub(crate) enum StartError {
    /// Nothing to launch: not configured, or the configuration cannot be launched.
    Config(String),
    /// It launched, then failed or refused its handshake: counts toward crash back-off.
    Crashed(String),
}

impl StartError {
    pub(crate) fn reason(&self) -> &str {
        match self {
            Self::Config(reason) | Self::Crashed(reason) => reason,
        }
    }
}

/// Launches the server for `label` and initializes it with `agent_params`.
/// Who the launch is for, so the engine can decide which credentials it gets.
pub(crate) struct For {
    pub session: u64,
    pub agent: Option<postern_domain::AgentIdentity>,
    pub authorizer: Arc<dyn Authorizer>,
}

pub(crate) async fn start(
    directory: &dyn ServerDirectory,
    cache: &Arc<DigestCache>,
    label: &ServerLabel,
    agent_params: &Value,
    whom: For,
) -> Result<Started, StartError> {
    let config = directory
        .lookup(label)
        .map_err(StartError::Config)?
        .ok_or_else(|| StartError::Config(format!("no server is configured as '{label}': add it with `postern server add {label} -- <command>`")))?;
    // Hashing is blocking file I/O; a first hash of a large binary takes a moment.
    let (launched, mut credentials) = {
        let (config, cache) = (config.clone(), Arc::clone(cache));
        tokio::task::spawn_blocking(move || {
            let mut release = Release::default();
            let launched = launch_with(&config, &cache, |identity| {
                release =
                    whom.authorizer
                        .release(whom.session, whom.agent.as_ref(), &config, identity);
                Given {
                    env: release
                        .env
                        .iter()
                        .map(|(k, v)| (k.clone(), v.expose().clone()))
                        .collect(),
                    way_out: release.egress.as_ref().and_then(|e| e.way_out()),
                }
            });
            (launched, release)
        })
        .await
        .map_err(|e| StartError::Config(format!("launch task failed: {e}")))?
    };
    // The values went to the process; nothing else keeps them.
    credentials.env.clear();
    let launched = launched.map_err(|e| StartError::Config(e.to_string()))?;
    let (spawned, record, mut watch) = (launched.spawned, launched.record, launched.watch);
    tracing::info!(
        server = %label, epoch = %record.epoch, pid = record.pid, identity = %record.identity_digest(),
        pinning = ?record.pinning, "server_started"
    );
    let mut stdin = spawned.stdin;
    let mut stdout = LineReader::new(BufReader::new(spawned.stdout));
    let mut handle = spawned.handle;

    let request = message::request(
        &json!(INIT_ID),
        "initialize",
        upstream_initialize_params(agent_params),
    );
    let handshake = async {
        write_line(&mut stdin, &request)
            .await
            .map_err(|e| format!("cannot write to the server: {e}"))?;
        loop {
            match stdout.next().await {
                Ok(Some(Line::Frame(raw))) => match Message::parse(raw) {
                    Ok(msg) if is_init_response(&msg) => return init_result(msg),
                    Ok(msg) => {
                        tracing::debug!(server = %label, kind = ?msg.kind, "message before initialize answered; dropped")
                    }
                    Err(rej) => {
                        tracing::warn!(server = %label, reason = %rej.reason, "server wrote a line that is not JSON-RPC; dropped")
                    }
                },
                Ok(Some(Line::Oversize { len, .. })) => {
                    tracing::warn!(server = %label, len, "server wrote an oversized line; dropped");
                }
                Ok(None) | Err(_) => return Err(None),
            }
        }
    };
    let outcome = tokio::time::timeout(INITIALIZE_TIMEOUT, handshake).await;
    // A hashed file changed while the process started (issue 16): what runs may not be what
    // was hashed. It is stopped before any call of the agent reaches it; the next launch
    // captures the new identity. (A write that left every digest as it was, a cache the
    // server keeps in its own tree, is let be.)
    if watch.as_mut().is_some_and(ArtifactWatch::touched)
        && identity_moved(&config, cache, &record).await
    {
        handle.stop();
        tracing::warn!(server = %label, epoch = %record.epoch, "a file of its identity changed while it started; stopped");
        return Err(StartError::Crashed(format!(
            "a file of the identity of '{label}' changed while it started, so what runs may not be what was hashed; it was stopped, and the next launch is a new identity"
        )));
    }
    match outcome {
        Ok(Ok(init)) => Ok(Started {
            stdin,
            stdout,
            handle,
            init,
            record,
            config,
            credentials,
            watch,
        }),
        Ok(Err(Some(reason))) => Err(StartError::Crashed(reason)),
        Ok(Err(None)) => {
            let report = handle.exited().await;
            // A server that fails in its sandbox is told what the sandbox denies it.
            let confined = record
                .sandbox
                .as_ref()
                .map(|sandbox| format!("; {}", postern_supervisor::denied(sandbox)))
                .unwrap_or_default();
            Err(StartError::Crashed(with_stderr(
                format!("server '{label}' exited during initialize ({report}){confined}"),
                &handle,
            )))
        }
        Err(_) => {
            handle.stop();
            Err(StartError::Crashed(with_stderr(
                format!(
                    "server '{label}' did not answer initialize within {}s",
                    INITIALIZE_TIMEOUT.as_secs()
                ),
                &handle,
            )))
        }
    }
}

/// Whether `config`'s identity, captured again now, differs from `record`'s.
async fn identity_moved(
    config: &ServerConfig,
    cache: &Arc<DigestCache>,
    record: &ExecutionRecord,
) -> bool {
    let (config, cache, was) = (config.clone(), Arc::clone(cache), record.identity_digest());
    tokio::task::spawn_blocking(move || {
        cache
            .observe(&config)
            .map(|seen| postern_supervisor::record(&config, seen, 0, 0).identity_digest() != was)
            .unwrap_or(true)
    })
    .await
    .unwrap_or(true)
}

/// Writes one message and its newline, in one write: a server woken by the message alone
/// would read a line without its end and sleep again until the newline came.
pub(crate) async fn write_line(stdin: &mut ChildStdin, line: &Bytes) -> std::io::Result<()> {
    let mut framed = Vec::with_capacity(line.len() + 1);
    framed.extend_from_slice(line);
    framed.push(b'\n');
    stdin.write_all(&framed).await?;
    stdin.flush().await
}

fn is_init_response(msg: &Message) -> bool {
    matches!(&msg.kind, Kind::Response { id } if id.value().as_str() == Some(INIT_ID))
}

/// The server's `initialize` result. A server answering with a protocol version Postern does
/// not speak is refused, as the spec has a client do ("the client SHOULD disconnect"): the gate
/// could not read its messages faithfully.
fn init_result(mut msg: Message) -> Result<Map<String, Value>, Option<String>> {
    match msg.body.remove("result") {
        Some(Value::Object(result)) => {
            let version = result.get("protocolVersion").and_then(Value::as_str);
            match version {
                Some(v) if postern_domain::SUPPORTED_PROTOCOL_VERSIONS.contains(&v) => Ok(result),
                Some(v) => Err(Some(format!(
                    "the server speaks MCP protocol version {v}, which Postern does not (it speaks {})",
                    postern_domain::SUPPORTED_PROTOCOL_VERSIONS.join(", ")
                ))),
                None => Err(Some(
                    "the server's initialize result names no protocol version".to_owned(),
                )),
            }
        }
        Some(_) => Err(Some(
            "the server's initialize result is not an object".to_owned(),
        )),
        None => {
            let err = msg
                .body
                .get("error")
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("no message");
            Err(Some(format!("the server refused initialize: {err}")))
        }
    }
}

/// The stderr tail goes to the log, not to the agent: a server may print a secret.
fn with_stderr(reason: String, handle: &ProcessHandle) -> String {
    let tail = handle.stderr_tail();
    if !tail.is_empty() {
        tracing::warn!(stderr = %tail.join("\n"), "{reason}");
    }
    format!("{reason}; see the Postern log for its stderr")
}
