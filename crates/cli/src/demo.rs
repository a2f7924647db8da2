//! `postern demo`: the rebuild story in one command, against the running engine (the app or
//! `postern daemon`). It configures a small bundled server (`demo`, this very executable in
//! its hidden `demo-server` mode), then plays an agent that calls its write tool (a human
//! approves in the app), rebuilds the server (a new execution epoch with a changed schema),
//! sends the old prepared call again (refused: `authorization_stale`), refreshes and calls
//! again (a fresh approval, with the new field's default marked). The timeline, the approval
//! window and the audit log then have something to show.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::Args;
use postern_domain::{RestartPolicy, ServerConfig, ServerLabel};
use postern_engine::answer::{ControlAnswer, ControlCommand};
use postern_engine::{Home, SessionState};
use postern_store::Store;
use serde_json::{Value, json};

use crate::mcp_server::{Tools, text_result};
use crate::runtime;

/// The label the demo server is configured under.
const LABEL: &str = "demo";
/// How long the demo waits for one answer (a human may be reading an approval card).
const ANSWER: Duration = Duration::from_secs(150);

/// `postern demo-server` (hidden): the bundled demo server.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// The file holding the revision this "build" is (its identity).
    #[arg(long, value_name = "FILE")]
    revision_file: PathBuf,
}

/// Runs the bundled demo server on stdio.
pub fn server(args: ServerArgs) -> Result<()> {
    let revision = std::fs::read_to_string(&args.revision_file)
        .map(|r| r.trim().parse().unwrap_or(1))
        .unwrap_or(1);
    crate::mcp_server::serve(DemoServer { revision })
}

struct DemoServer {
    revision: u32,
}

impl Tools for DemoServer {
    fn info(&self) -> (&str, &str) {
        ("postern-demo", "1")
    }

    fn list(&self) -> Vec<Value> {
        let mut deploy = json!({
            "name": "deploy",
            "description": "Deploy a branch of the demo app.",
            "inputSchema": {
                "type": "object",
                "required": ["branch"],
                "properties": {"branch": {"type": "string"}},
                "additionalProperties": false,
            },
            "annotations": {"readOnlyHint": false, "destructiveHint": false},
        });
        if self.revision >= 2 {
            // The article's example: an optional field whose default the reviewer must see.
            deploy["inputSchema"]["properties"]["target"] = json!({
                "type": "string", "enum": ["preview", "production"], "default": "preview",
            });
        }
        vec![
            json!({
                "name": "status",
                "description": "Which revision of the demo server answers.",
                "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": true},
            }),
            deploy,
        ]
    }

    fn call(&self, name: &str, params: Value) -> Value {
        let args = &params["arguments"];
        match name {
            "status" => text_result(&format!("revision {}", self.revision), None, false),
            "deploy" => {
                let branch = args["branch"].as_str().unwrap_or("?");
                let target = args["target"].as_str().unwrap_or("preview");
                text_result(
                    &format!("revision {} deployed {branch} to {target}", self.revision),
                    None,
                    false,
                )
            }
            other => text_result(&format!("no tool named {other}"), None, true),
        }
    }
}

/// Runs `postern demo`.
pub fn run(home: &Home) -> Result<()> {
    let rt = runtime()?;
    if rt
        .block_on(postern_engine::answer::ask(
            &home.socket_path(),
            ControlCommand::Status,
            None,
        ))
        .is_err()
    {
        bail!(
            "the demo needs a running Postern: start the app (./scripts/run-app.sh) or `postern daemon`, then run `postern demo` again"
        );
    }
    let exe = std::env::current_exe().context("finding this executable")?;
    let dir = demo_dir(home);
    std::fs::create_dir_all(&dir)?;
    let revision = dir.join("revision.txt");
    std::fs::write(&revision, "1\n")?;
    configure(home, &exe, &revision)?;
    say("configured server 'demo' (revision 1); this terminal now plays an agent");

    let mut agent = Agent::launch(&exe, home)?;
    agent.request(
        "initialize",
        json!({"protocolVersion": postern_domain::PROTOCOL_VERSION, "capabilities": {},
               "clientInfo": {"name": "postern-demo-agent", "version": "1"}}),
    )?;
    agent.notify("notifications/initialized")?;
    agent.request("tools/list", json!({}))?;
    let prepared = json!({"name": "deploy", "arguments": {"branch": "main"}});

    say(
        "calling deploy(branch=main): approve it in the Postern window or the tray (`postern approve` works from another terminal)",
    );
    show(&agent.request("tools/call", prepared.clone())?);
    let first = epoch(&rt, home, None)?;
    line(&format!("   the call ran under execution epoch {first}"));

    say(
        "rebuilding the server: revision 2 adds an optional `target` (default preview); it restarts with a new execution epoch",
    );
    std::fs::write(&revision, "2\n")?;
    let second = epoch(&rt, home, Some(&first))?;
    line(&format!("   now running: epoch {second}"));
    say(
        "sending the old prepared call again, unchanged, to the new code (a grant for the old epoch is stale: authorization_stale; without one, the changed schema is: catalog_stale)",
    );
    show(&agent.request("tools/call", prepared.clone())?);

    say(
        "refreshing tools/list and calling again: a new approval, the card marks target=preview as a default",
    );
    agent.request("tools/list", json!({}))?;
    show(&agent.request("tools/call", prepared)?);
    say(
        "done: the Sessions timeline shows this run's lane with both epochs; `postern activity --server demo` lists the calls; `postern server remove demo` removes its server",
    );
    Ok(())
}

/// The demo session's current epoch once its catalog is in (and, with `other`, once it is
/// another one), from the engine's status.
fn epoch(rt: &tokio::runtime::Runtime, home: &Home, other: Option<&str>) -> Result<String> {
    for _ in 0..300 {
        let answer = rt.block_on(postern_engine::answer::ask(
            &home.socket_path(),
            ControlCommand::Status,
            None,
        ))?;
        let status = match answer {
            ControlAnswer::Status(status) => status,
            other => return Err(crate::gate::mismatch(&other)),
        };
        let found = status.sessions.iter().find_map(|s| {
            let epoch = &s.execution.as_ref()?.epoch;
            (s.server == LABEL
                && s.state == SessionState::CatalogReady
                && Some(epoch.as_str()) != other)
                .then(|| epoch.clone())
        });
        if let Some(epoch) = found {
            return Ok(epoch);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("the demo server did not reach a new epoch within 30 s")
}

/// Where the demo server's "build" lives: outside the Postern home, which a confined server
/// cannot see. The user's cache (one directory per Postern home), else the temp directory
/// (a confined launch sees the files its record names there, read-only).
fn demo_dir(home: &Home) -> PathBuf {
    let tag = postern_domain::Digest::of(home.path().as_os_str().as_encoded_bytes()).to_string();
    let name = format!("demo-{}", &tag.trim_start_matches("sha256:")[..12]);
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map_or_else(
            || std::env::temp_dir().join(format!("postern-{name}")),
            |cache| cache.join("postern").join(&name),
        )
}

fn configure(home: &Home, exe: &Path, revision: &Path) -> Result<()> {
    let label: ServerLabel = LABEL.parse()?;
    let mut config = ServerConfig::new(
        label,
        vec![
            exe.display().to_string(),
            "demo-server".into(),
            "--revision-file".into(),
            revision.display().to_string(),
        ],
        None,
        Vec::new(),
    )?;
    config.identity_paths = vec![revision.to_owned()];
    config.restart = RestartPolicy::OnChange;
    let store = Store::open(home.path())?;
    // A server of the user's own under this label is theirs: never replace it.
    if let Some(existing) = store.server(&config.label)?
        && existing.command.get(1).map(String::as_str) != Some("demo-server")
    {
        bail!(
            "a server named '{LABEL}' is already configured ({}); the demo would replace it: remove or rename it first",
            existing.command.join(" ")
        );
    }
    store.add_server(&config)?;
    crate::tell_engine_config_changed(home);
    Ok(())
}

/// The demo's agent: `postern mcp demo` on pipes, answers read on a thread.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<Value>,
    next: i64,
}

impl Agent {
    fn launch(exe: &Path, home: &Home) -> Result<Agent> {
        let mut child = Command::new(exe)
            .arg("--home")
            .arg(home.path())
            .args(["mcp", LABEL])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting `postern mcp demo`")?;
        let stdin = child.stdin.take().context("shim stdin")?;
        let stdout = child.stdout.take().context("shim stdout")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(msg) = serde_json::from_str::<Value>(&line)
                    && tx.send(msg).is_err()
                {
                    return;
                }
            }
        });
        Ok(Agent {
            child,
            stdin,
            lines,
            next: 1,
        })
    }

    fn notify(&mut self, method: &str) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method}))
    }

    fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        loop {
            let msg = self
                .lines
                .recv_timeout(ANSWER)
                .with_context(|| format!("no answer to {method} within {ANSWER:?}"))?;
            if msg["id"] == id && msg.get("method").is_none() {
                return Ok(msg);
            }
        }
    }

    fn send(&mut self, msg: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(msg)?;
        line.push(b'\n');
        self.stdin.write_all(&line)?;
        self.stdin.flush()?;
        Ok(())
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn say(text: &str) {
    line(&format!("\n== {text}"));
}

/// One line for the person watching (through [`crate::terminal`]: the server's answers are
/// its words, not the terminal's commands).
fn line(text: &str) {
    use std::io::Write as _;
    let _ = writeln!(crate::terminal::out(), "{text}");
}

/// Prints what the agent got back: the tool's text, or the refusal's code and reason.
fn show(answer: &Value) {
    let result = &answer["result"];
    if result["isError"] == true {
        let detail = &result["structuredContent"];
        line(&format!(
            "   refused: {} ({})",
            detail["error"].as_str().unwrap_or("error"),
            detail["reason"]
                .as_str()
                .or(result["content"][0]["text"].as_str())
                .unwrap_or_default()
        ));
    } else if let Some(text) = result["content"][0]["text"].as_str() {
        line(&format!("   {text}"));
    } else {
        line(&format!("   {answer}"));
    }
}
