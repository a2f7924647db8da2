//! Execution epochs, catalog revisions and rebuilds (issue 3), end to end: the real `postern`
//! binary, an agent speaking raw JSON-RPC lines through `postern mcp`, and the rebuildable
//! fixture (tests/fixtures/rebuildable, a Python server on the official MCP SDK) rebuilt between
//! revisions while it runs. Each test is one of the design article's failure tests "developers
//! tend to skip" (or another promise of docs/refresh-contract.md), asserted through what a user
//! sees: the engine's status (the JSON the app shows, and the CLI's lines), the daemon's log,
//! the answers the agent gets, and the side effects the server's handlers leave.
//!
//! The agent is raw on purpose: a real client library would re-list tools on
//! `notifications/tools/list_changed`, and the point of some tests is a client that does not.
//! Nothing here waits a fixed time: every change is awaited by polling status.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use postern_e2e::Gate;
use postern_e2e::raw::{RawAgent, initialize_params, ok_text, tool_error};
use postern_e2e::rebuild::Fixture;
use serde_json::{Value, json};

/// How long one answer may take (a python server starting on a loaded machine is slow).
const ANSWER: Duration = Duration::from_secs(30);
/// How long the engine may take to reach a state the test waits for.
const SETTLE: Duration = Duration::from_secs(30);
/// The label the fixture is configured under.
const LABEL: &str = "rebuildable";
/// A slow call's duration: longer than any test, so only an epoch transition answers it.
const FOREVER_MS: u64 = 600_000;

// ---- an agent speaking raw JSON-RPC lines to `postern mcp <label>` ----

/// Launches `postern mcp <label>`, its stderr in the gate's logs.
fn launch(gate: &Gate, label: &str) -> Result<RawAgent> {
    let (cmd, log) = gate.mcp_command(label)?;
    Ok(RawAgent::spawn(cmd, std::fs::File::create(&log)?)?.answer_within(ANSWER))
}

/// Launches `postern mcp <label>` (its stderr in the gate's logs) and completes the MCP
/// handshake.
async fn connect(gate: &Gate, label: &str) -> Result<RawAgent> {
    let mut agent = launch(gate, label)?;
    let init = start_initialize(&mut agent).await?;
    finish_initialize(&mut agent, &init).await?;
    Ok(agent)
}

/// Sends `initialize` (which launches the server); returns its id.
async fn start_initialize(agent: &mut RawAgent) -> Result<Value> {
    let id = agent.next_id();
    let params = initialize_params("epochs-agent", json!({}));
    agent.start_initialize(id, params).await
}

/// Waits for the answer to `initialize` (the server is up) and sends `initialized`; fails
/// unless `initialize` succeeded.
async fn finish_initialize(agent: &mut RawAgent, id: &Value) -> Result<()> {
    let init = agent.finish_initialize(id).await?;
    if init.get("result").is_none() {
        bail!("initialize failed: {init}");
    }
    Ok(())
}

// ---- the engine's status ----

/// The engine's status, as the app gets it (crates/engine/src/api.rs `Status`).
async fn status(gate: &Gate) -> Result<Value> {
    gate.status().await
}

/// The sessions of `label`, oldest first.
async fn sessions(gate: &Gate, label: &str) -> Result<Vec<Value>> {
    let status = status(gate).await?;
    let all = status["sessions"]
        .as_array()
        .with_context(|| format!("status without sessions: {status}"))?;
    Ok(all
        .iter()
        .filter(|s| s["server"] == label)
        .cloned()
        .collect())
}

/// The one session of `label` once it satisfies `pred`, polling status (file watching is
/// debounced, launches take time). Fails with the last status seen.
async fn wait_session(gate: &Gate, what: &str, pred: impl Fn(&Value) -> bool) -> Result<Value> {
    wait_sessions(gate, what, 1, |s| pred(&s[0]))
        .await
        .map(|mut s| s.remove(0))
}

/// The `count` sessions of the fixture once they satisfy `pred`.
async fn wait_sessions(
    gate: &Gate,
    what: &str,
    count: usize,
    pred: impl Fn(&[Value]) -> bool,
) -> Result<Vec<Value>> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let sessions = sessions(gate, LABEL).await?;
        if sessions.len() == count && pred(&sessions) {
            return Ok(sessions);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "status never showed {what} within {SETTLE:?}; last: {}",
                json!(sessions)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running process whose catalog is in (refresh-contract §7, `catalog-ready`).
fn ready(session: &Value) -> bool {
    session["state"] == "catalogReady" && session["serverPid"].is_u64()
}

fn epoch(session: &Value) -> &str {
    session["execution"]["epoch"].as_str().unwrap_or_default()
}

fn identity(session: &Value) -> &str {
    session["execution"]["identity"]
        .as_str()
        .unwrap_or_default()
}

fn revision(session: &Value) -> &str {
    session["catalog"]["revision"].as_str().unwrap_or_default()
}

/// The fixture's first session, launched by an agent that listed tools: ready, and shown the
/// current catalog.
async fn first_session(gate: &Gate, agent: &mut RawAgent) -> Result<Value> {
    agent.list_tools().await?;
    wait_session(gate, "the first launch, its catalog listed", |s| {
        ready(s) && s["catalog"]["presentedRevision"] == s["catalog"]["revision"]
    })
    .await
}

/// A new epoch (not `old`) whose catalog is in.
async fn next_epoch(gate: &Gate, old: &str) -> Result<Value> {
    wait_session(gate, &format!("a new epoch after {old}"), |s| {
        ready(s) && epoch(s) != old
    })
    .await
}

fn path_str(path: &Path) -> String {
    path.display().to_string()
}

async fn gate() -> Result<Gate> {
    Gate::start(&[]).await
}

// ---- the article's failure tests ----

/// "The build succeeds but the old process remains running." refresh-contract §6 (`--restart
/// manual`, the default): the process keeps running and keeps its epoch; the daemon reports the
/// build and that the running server is unchanged; status (JSON and CLI) shows the entry is
/// newer than the running process; and calls are still answered by the old code.
#[tokio::test]
async fn a_build_leaves_the_old_process_running_and_says_so() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    fixture.add(&gate, LABEL, &[], &["-B", "server.py"])?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let before = first_session(&gate, &mut agent).await?;
        assert!(ok_text(&agent.call_next("whoami", json!({})).await?)?.starts_with("revision=A "));
        let (old_epoch, pid) = (
            epoch(&before).to_owned(),
            before["serverPid"].as_u64().unwrap_or_default(),
        );

        fixture.rebuild("b-handler")?;
        let entry = path_str(&fixture.entry());
        let after = wait_session(&gate, "the rebuilt entry as newer than the process", |s| {
            s["artifactsNewer"]
                .as_array()
                .is_some_and(|a| !a.is_empty())
        })
        .await?;
        assert_eq!(after["artifactsNewer"], json!([entry]), "{after}");
        assert_eq!(
            epoch(&after),
            old_epoch,
            "a build alone must not make a new epoch: {after}"
        );
        assert_eq!(after["serverPid"], before["serverPid"], "{after}");
        assert_eq!(
            identity(&after),
            identity(&before),
            "the record is the one captured at launch: {after}"
        );

        let log = gate.daemon_log();
        assert!(
            log.contains(&format!("build complete: {entry} changed")),
            "{log}"
        );
        assert!(
            log.contains(&format!(
                "running server unchanged: pid={pid} epoch={old_epoch}"
            )),
            "{log}"
        );

        // The rebuilt code is on disk, but the old code answers.
        let answer = agent.call_next("whoami", json!({})).await?;
        assert!(ok_text(&answer)?.starts_with("revision=A "), "{answer}");
        agent
            .call_next("publish_preview", json!({"branch": "after-build"}))
            .await?;
        assert_eq!(
            fixture.effects(),
            ["publish_preview revision=A branch=after-build target=preview"]
        );

        // What a developer reads.
        let cli = gate.cli(["server", "status", LABEL])?;
        assert!(
            cli.contains(&format!("running epoch {old_epoch}  pid {pid}")),
            "{cli}"
        );
        assert!(cli.contains("    pinned\n"), "{cli}");
        let newer = cli
            .split_once("FILES NEWER THAN THE RUNNING PROCESS (restart to use them):\n")
            .with_context(|| format!("no 'FILES NEWER' section:\n{cli}"))?
            .1;
        assert!(
            newer.lines().next().is_some_and(|l| l.trim() == entry),
            "{cli}"
        );

        // Restarting is what makes the build take effect: a new epoch, nothing newer any more.
        gate.cli(["server", "restart", LABEL])?;
        let restarted = next_epoch(&gate, &old_epoch).await?;
        assert_eq!(restarted["artifactsNewer"], json!([]), "{restarted}");
        let answer = agent.call_next("whoami", json!({})).await?;
        assert!(ok_text(&answer)?.starts_with("revision=B "), "{answer}");
        Ok(())
    })
    .await
}

/// "The process restarts but the tool list remains identical." refresh-contract §1 (every
/// launch is a new epoch, even with every digest unchanged) and §3 (the revision is a digest of
/// the catalog, so an identical catalog is the same revision): a restart gives a new epoch and
/// the same revision; the agent is told of each new epoch (`list_changed`, issue 14) and no call
/// is refused as stale. After a handler-only rebuild the identity digest changes although the
/// catalog does not.
#[tokio::test]
async fn a_restart_with_an_identical_tool_list_is_a_new_epoch_with_the_same_revision() -> Result<()>
{
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    fixture.add(&gate, LABEL, &[], &["-B", "server.py"])?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let first = first_session(&gate, &mut agent).await?;

        // Nothing changed on disk: a new epoch all the same, with an equal identity.
        let out = gate.cli(["server", "restart", LABEL])?;
        assert!(out.contains("restarting 1 process(es)"), "{out}");
        let second = next_epoch(&gate, epoch(&first)).await?;
        assert_ne!(
            second["serverPid"], first["serverPid"],
            "a restart is a new process: {second}"
        );
        assert_eq!(identity(&second), identity(&first), "{second}");
        assert_eq!(revision(&second), revision(&first), "{second}");
        let answer = agent
            .call_next("publish_preview", json!({"branch": "one"}))
            .await?;
        assert_eq!(ok_text(&answer)?, "revision=A published one to preview");

        // A handler-only rebuild: other code, the same catalog.
        fixture.rebuild("b-handler")?;
        wait_session(&gate, "the rebuild noticed", |s| {
            s["artifactsNewer"] != json!([])
        })
        .await?;
        gate.cli(["server", "restart", LABEL])?;
        let third = next_epoch(&gate, epoch(&second)).await?;
        assert_ne!(
            identity(&third),
            identity(&second),
            "other code must be another identity: {third}"
        );
        // People read launches by number: the first, second and third of this server.
        let launches = [&first, &second, &third].map(|s| s["execution"]["launch"].clone());
        assert_eq!(launches, [json!(1), json!(2), json!(3)], "{third}");
        assert_ne!(
            third["execution"]["entry"]["digest"], second["execution"]["entry"]["digest"],
            "{third}"
        );
        assert_eq!(
            revision(&third),
            revision(&first),
            "an identical tool list is the same revision: {third}"
        );
        assert_eq!(third["catalog"]["changes"], json!([]), "{third}");

        // The agent's listing still describes the tools: its call goes through, to the new
        // code. The new epoch is announced all the same (issue 14): a rebuild that kept its
        // catalog is news, since the code that runs the calls changed.
        let answer = agent
            .call_next("publish_preview", json!({"branch": "two"}))
            .await?;
        assert_eq!(ok_text(&answer)?, "revision=B published two to preview");
        assert_eq!(
            agent.list_changed_seen(),
            2,
            "each of the two new epochs is announced once: {:?}",
            agent.backlog()
        );
        assert_eq!(
            fixture.effects(),
            [
                "publish_preview revision=A branch=one target=preview",
                "publish_preview revision=B branch=two target=preview"
            ]
        );
        Ok(())
    })
    .await
}

/// "The schema changes but a client ignores tools/list_changed." refresh-contract §3: after an
/// `on-change` restart into a changed schema the agent is told to re-list; an agent that does
/// not, and calls the changed tool, gets `catalog_stale` (naming the tool and both revisions)
/// and the call is not forwarded. A tool whose definition did not change still works. After a
/// `tools/list` the call reaches the new code.
#[tokio::test]
async fn a_call_with_a_stale_schema_is_refused_until_the_agent_lists_tools_again() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    fixture.add(
        &gate,
        LABEL,
        &["--restart", "on-change"],
        &["-B", "server.py"],
    )?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let before = first_session(&gate, &mut agent).await?;
        let shown = revision(&before).to_owned();
        agent
            .call_next("publish_preview", json!({"branch": "first"}))
            .await?;

        fixture.rebuild("b-schema")?;
        let after = wait_session(
            &gate,
            "the on-change restart into revision B's catalog",
            |s| ready(s) && epoch(s) != epoch(&before) && revision(s) != shown,
        )
        .await?;
        let current = revision(&after).to_owned();
        assert_eq!(after["catalog"]["presentedRevision"], shown, "{after}");
        // The diff names the change as issue 3 asks: "target: added, enum [...], default ...".
        assert_eq!(
            after["catalog"]["changes"],
            json!([
                "publish_preview: input target: added, enum [preview, production], default preview"
            ]),
            "{after}"
        );
        // The agent is told, and ignores it.
        agent.wait_list_changed().await?;

        let refused = agent
            .call_next("publish_preview", json!({"branch": "stale"}))
            .await?;
        let detail = tool_error(&refused)?;
        assert_eq!(detail["error"], "catalog_stale", "{refused}");
        assert_eq!(detail["tool"], "publish_preview", "{refused}");
        assert_eq!(detail["presentedRevision"], shown, "{refused}");
        assert_eq!(detail["currentRevision"], current, "{refused}");
        assert_eq!(detail["retry"], "refresh tools/list", "{refused}");

        // An unchanged tool is not stale, and proves the new code is running.
        let answer = agent.call_next("whoami", json!({})).await?;
        assert!(ok_text(&answer)?.starts_with("revision=B "), "{answer}");
        // The refused call never reached the server.
        assert_eq!(
            fixture.effects(),
            ["publish_preview revision=A branch=first target=preview"]
        );

        let tools = agent.list_tools().await?;
        let preview = tools
            .iter()
            .find(|t| t["name"] == "publish_preview")
            .context("publish_preview listed")?;
        assert_eq!(
            preview["inputSchema"]["properties"]["target"]["default"], "preview",
            "{preview}"
        );
        let answer = agent
            .call_next("publish_preview", json!({"branch": "fresh"}))
            .await?;
        assert_eq!(ok_text(&answer)?, "revision=B published fresh to preview");
        assert_eq!(
            fixture.effects(),
            [
                "publish_preview revision=A branch=first target=preview",
                "publish_preview revision=B branch=fresh target=preview"
            ]
        );
        let status = wait_session(&gate, "the new revision as shown", |s| {
            s["catalog"]["presentedRevision"] == current
        })
        .await?;
        assert_eq!(epoch(&status), epoch(&after), "{status}");
        Ok(())
    })
    .await
}

/// "A restart occurs while a write call is waiting for a response." refresh-contract §5: the
/// call in flight is answered at once with an `epoch_transition` tool error naming the old
/// epoch, and it is never re-sent to the new process: the write ran exactly once.
#[tokio::test]
async fn a_write_in_flight_during_a_restart_fails_with_epoch_transition_and_is_not_retried()
-> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    // Unconfined: the test compares the pid the server reports with the one the engine shows,
    // and a confined server sees its own PID namespace.
    fixture.add(&gate, LABEL, &["--unconfined"], &["-B", "server.py"])?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let before = first_session(&gate, &mut agent).await?;
        let old_epoch = epoch(&before).to_owned();

        let call = agent
            .start(
                "tools/call",
                json!({"name": "slow_write", "arguments": {"token": "t4", "ms": FOREVER_MS}}),
            )
            .await?;
        let started = "slow_write start revision=A token=t4";
        wait_until("the write to start", || {
            fixture.effects().iter().any(|l| l == started)
        })
        .await?;

        let out = gate.cli(["server", "restart", LABEL])?;
        assert!(out.contains("restarting 1 process(es)"), "{out}");
        let answer = agent.response(&call).await?;
        let detail = tool_error(&answer)?;
        assert_eq!(detail["error"], "epoch_transition", "{answer}");
        assert_eq!(detail["server"], LABEL, "{answer}");
        assert_eq!(detail["oldEpoch"], old_epoch, "{answer}");
        assert_eq!(detail["reason"], "restart requested", "{answer}");
        assert!(
            detail["retry"]
                .as_str()
                .is_some_and(|r| r.starts_with("not retried")),
            "{answer}"
        );

        // A round trip through the new process: had the gate re-sent the write, the new
        // process would have run it before answering this.
        let after = next_epoch(&gate, &old_epoch).await?;
        assert_ne!(after["serverPid"], before["serverPid"], "{after}");
        let answer = agent.call_next("whoami", json!({})).await?;
        let pid = after["serverPid"].as_u64().unwrap_or_default();
        assert_eq!(
            answer["result"]["structuredContent"]["pid"], pid,
            "{answer}"
        );
        assert_eq!(
            fixture.effects(),
            [started],
            "the write ran once, and never finished"
        );
        assert!(
            !agent.backlog().iter().any(|m| m["id"] == call),
            "a second answer to the interrupted call arrived: {:?}",
            agent.backlog()
        );
        Ok(())
    })
    .await
}

/// "The server path remains fixed while the resolved dependency tree changes."
/// refresh-contract §2 (`extraPaths`, a directory hashed as a tree) and §6 (identity paths are
/// watched): the entry file is byte-for-byte the same, but a module it loads changed, so the
/// next epoch has another identity digest, and the new dependency is what runs.
#[tokio::test]
async fn a_changed_dependency_tree_under_a_fixed_entry_is_a_new_identity() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    fixture.add(&gate, LABEL, &["--identity", "lib"], &["-B", "server.py"])?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let before = first_session(&gate, &mut agent).await?;
        let lib = path_str(&fixture.lib());
        assert_eq!(
            before["execution"]["extraPaths"][0]["path"], lib,
            "{before}"
        );
        assert_eq!(
            before["execution"]["lockfiles"][0]["path"],
            path_str(&fixture.lockfile()),
            "{before}"
        );
        let answer = agent.call_next("whoami", json!({})).await?;
        assert_eq!(
            answer["result"]["structuredContent"]["dependency"], "1",
            "{answer}"
        );

        let replaced = fixture.rebuild("dependency-2")?;
        assert_eq!(replaced, [fixture.lib().join("dependency.py")]);
        let noticed = wait_session(&gate, "the dependency tree as newer", |s| {
            s["artifactsNewer"] != json!([])
        })
        .await?;
        assert_eq!(noticed["artifactsNewer"], json!([lib]), "{noticed}");

        gate.cli(["server", "restart", LABEL])?;
        let after = next_epoch(&gate, epoch(&before)).await?;
        assert_eq!(
            after["execution"]["entry"], before["execution"]["entry"],
            "the entry did not change: {after}"
        );
        assert_eq!(
            after["execution"]["executable"], before["execution"]["executable"],
            "{after}"
        );
        assert_eq!(
            after["execution"]["lockfiles"], before["execution"]["lockfiles"],
            "{after}"
        );
        assert_ne!(
            after["execution"]["extraPaths"][0]["digest"],
            before["execution"]["extraPaths"][0]["digest"],
            "{after}"
        );
        assert_ne!(
            identity(&after),
            identity(&before),
            "same path, other code: {after}"
        );
        assert_eq!(revision(&after), revision(&before), "{after}");
        let answer = agent.call_next("whoami", json!({})).await?;
        assert_eq!(
            answer["result"]["structuredContent"]["dependency"], "2",
            "{answer}"
        );

        let cli = gate.cli(["server", "status", LABEL])?;
        let digest = after["execution"]["extraPaths"][0]["digest"]
            .as_str()
            .unwrap_or_default();
        assert!(
            cli.contains(&format!("identity   {digest}  {lib}")),
            "{cli}"
        );
        assert!(
            cli.contains(&format!("identity {}", identity(&after))),
            "{cli}"
        );
        Ok(())
    })
    .await
}

/// A build while the server is still starting (issue 16, "hashed is what runs"): a developer
/// saves a file after the supervisor captured the execution record (refresh-contract §1) and
/// after the process loaded its code, but before the server answered `initialize`. The process
/// runs revision A while the disk holds revision B, so what runs is not what was hashed: the
/// start is stopped before any agent request reaches it, and the server is launched again from
/// what is on disk now. The agent's call is answered by revision B, under B's identity, with
/// nothing reported newer (refresh-contract §2).
#[tokio::test]
async fn a_build_while_the_server_starts_stops_that_start_and_runs_what_was_hashed() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    fixture.add(
        &gate,
        LABEL,
        &["--env", "FIXTURE_STARTUP_DELAY_MS=3000"],
        &["-B", "server.py"],
    )?;
    gate.scenario(async {
        let mut agent = launch(&gate, LABEL)?;
        let init = start_initialize(&mut agent).await?;
        // The process has loaded revision A and is slow to answer `initialize`.
        wait_until("the server to load its code", || {
            fixture
                .effects()
                .iter()
                .any(|l| l.starts_with("loaded revision=A"))
        })
        .await?;
        fixture.rebuild("b-handler")?;
        finish_initialize(&mut agent, &init).await?;
        first_session(&gate, &mut agent).await?;
        let answer = agent.call_next("whoami", json!({})).await?;
        assert!(ok_text(&answer)?.starts_with("revision=B "), "{answer}");
        let session = wait_session(&gate, "a running launch of revision B", |s| {
            s["state"] == "catalogReady"
        })
        .await?;
        assert_eq!(session["artifactsNewer"], json!([]), "{session}");
        Ok(())
    })
    .await
}

// ---- catalog changes ----

/// An added tool: refresh-contract §3 (the engine fetches the catalog after each launch; the
/// diff says what changed) and issue 3's "Catalog diff". The new tool is listed as added, it is
/// not an escalation, and an agent that did not re-list cannot call it yet.
#[tokio::test]
async fn an_added_tool_shows_in_the_catalog_changes() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    fixture.add(
        &gate,
        LABEL,
        &["--restart", "on-change"],
        &["-B", "server.py"],
    )?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let before = first_session(&gate, &mut agent).await?;
        fixture.rebuild("b-added-tool")?;
        let after = wait_session(&gate, "revision B's catalog", |s| {
            ready(s)
                && s["catalog"]["tools"]
                    .as_array()
                    .is_some_and(|t| t.contains(&json!("publish_release")))
        })
        .await?;
        assert_ne!(epoch(&after), epoch(&before), "{after}");
        assert_eq!(
            after["catalog"]["changes"],
            json!(["added tool publish_release"]),
            "{after}"
        );
        assert_eq!(after["catalog"]["escalation"], false, "{after}");
        assert_eq!(
            after["catalog"]["tools"],
            json!(["publish_preview", "publish_release", "slow_write", "whoami"]),
            "{after}"
        );
        agent.wait_list_changed().await?;

        let refused = agent
            .call_next("publish_release", json!({"branch": "main"}))
            .await?;
        assert_eq!(tool_error(&refused)?["error"], "catalog_stale", "{refused}");
        assert!(fixture.effects().is_empty(), "{:?}", fixture.effects());

        let tools = agent.list_tools().await?;
        assert!(
            tools.iter().any(|t| t["name"] == "publish_release"),
            "{tools:?}"
        );
        let answer = agent
            .call_next("publish_release", json!({"branch": "main"}))
            .await?;
        assert_eq!(ok_text(&answer)?, "revision=B published main to production");
        Ok(())
    })
    .await
}

/// An annotation flip: refresh-contract §3 (annotations are part of the revision) and issue
/// 3's "Catalog diff" (a `readOnlyHint` false -> true makes a writing tool look safer: an
/// escalation, flagged). Status JSON and the CLI both flag it, and the agent's next call to the
/// flipped tool is stale until it re-lists.
#[tokio::test]
async fn a_read_only_hint_flip_is_flagged_as_an_escalation() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    fixture.add(
        &gate,
        LABEL,
        &["--restart", "on-change"],
        &["-B", "server.py"],
    )?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let before = first_session(&gate, &mut agent).await?;
        fixture.rebuild("b-annotation-flip")?;
        let after = wait_session(&gate, "revision B's catalog", |s| {
            ready(s) && revision(s) != revision(&before)
        })
        .await?;
        assert_eq!(after["catalog"]["escalation"], true, "{after}");
        let changes = after["catalog"]["changes"].as_array().context("changes")?;
        assert_eq!(changes.len(), 1, "only the hint changed: {after}");
        let change = changes[0].as_str().unwrap_or_default();
        assert!(
            change.starts_with("publish_preview: annotation readOnlyHint"),
            "{change}"
        );
        assert!(change.contains("false -> true"), "{change}");
        assert!(change.ends_with("[escalation]"), "{change}");

        let cli = gate.cli(["server", "status", LABEL])?;
        assert!(cli.contains(&format!("changed: {change}")), "{cli}");

        agent.wait_list_changed().await?;
        let refused = agent
            .call_next("publish_preview", json!({"branch": "x"}))
            .await?;
        assert_eq!(tool_error(&refused)?["error"], "catalog_stale", "{refused}");
        assert!(fixture.effects().is_empty(), "{:?}", fixture.effects());
        Ok(())
    })
    .await
}

// ---- epochs without a new process, and per launch ----

/// A self-reloading server. refresh-contract §6 (artifacts changing under a server configured
/// `--self-reloading` end the epoch at once) and §5: the same process, now running other code,
/// gets a new epoch; the call in flight to the old code is answered with `epoch_transition`
/// naming both epochs; the catalog is fetched again (the reloaded code's), and the agent told.
#[tokio::test]
async fn a_self_reloading_server_gets_a_new_epoch_in_the_same_process() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    // `--live`: the fixture reloads its entry when it changes, like nodemon without the restart.
    // Unconfined: the test compares the pid the server reports with the one the engine shows,
    // and a confined server sees its own PID namespace.
    fixture.add(
        &gate,
        LABEL,
        &["--self-reloading", "--unconfined"],
        &["-B", "server.py", "--live"],
    )?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let before = first_session(&gate, &mut agent).await?;
        let (old_epoch, pid) = (epoch(&before).to_owned(), before["serverPid"].clone());
        let call = agent
            .start(
                "tools/call",
                json!({"name": "slow_write", "arguments": {"token": "t7", "ms": FOREVER_MS}}),
            )
            .await?;
        let started = "slow_write start revision=A token=t7";
        wait_until("the write to start", || {
            fixture.effects().iter().any(|l| l == started)
        })
        .await?;

        fixture.rebuild("b-schema")?;
        let answer = agent.response(&call).await?;
        let detail = tool_error(&answer)?;
        assert_eq!(detail["error"], "epoch_transition", "{answer}");
        assert_eq!(detail["oldEpoch"], old_epoch, "{answer}");
        let new_epoch = detail["newEpoch"]
            .as_str()
            .with_context(|| format!("no new epoch named: {answer}"))?;
        assert_ne!(new_epoch, old_epoch);
        assert!(
            detail["reason"]
                .as_str()
                .is_some_and(|r| r.contains("self-reloading")),
            "{answer}"
        );

        let after = wait_session(&gate, "the reloaded catalog", |s| {
            ready(s) && revision(s) != revision(&before)
        })
        .await?;
        assert_eq!(epoch(&after), new_epoch, "{after}");
        assert_eq!(after["serverPid"], pid, "the same process: {after}");
        assert_eq!(after["execution"]["pid"], pid, "{after}");
        assert_ne!(
            after["execution"]["entry"]["digest"], before["execution"]["entry"]["digest"],
            "re-captured: {after}"
        );
        assert_ne!(identity(&after), identity(&before), "{after}");
        assert_eq!(
            after["artifactsNewer"],
            json!([]),
            "the running code is the code on disk: {after}"
        );
        agent.wait_list_changed().await?;

        let tools = agent.list_tools().await?;
        let preview = tools
            .iter()
            .find(|t| t["name"] == "publish_preview")
            .context("publish_preview listed")?;
        assert!(
            preview["inputSchema"]["properties"]["target"].is_object(),
            "{preview}"
        );
        let answer = agent.call_next("whoami", json!({})).await?;
        assert!(ok_text(&answer)?.starts_with("revision=B "), "{answer}");
        assert_eq!(
            answer["result"]["structuredContent"]["pid"], pid,
            "{answer}"
        );
        assert_eq!(
            fixture.effects(),
            [started],
            "the interrupted write was not re-sent"
        );
        Ok(())
    })
    .await
}

/// refresh-contract §1 and §2: "Two epochs with equal identity digests ran the same code, as
/// far as the host can tell; they are still two epochs." Each agent session launches its own
/// process, each launch its own epoch.
#[tokio::test]
async fn two_sessions_of_one_server_get_two_epochs_with_equal_identities() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate().await?;
    // Unconfined: the test compares the pid the server reports with the one the engine shows,
    // and a confined server sees its own PID namespace.
    fixture.add(&gate, LABEL, &["--unconfined"], &["-B", "server.py"])?;
    gate.scenario(async {
        let mut first = connect(&gate, LABEL).await?;
        let mut second = connect(&gate, LABEL).await?;
        first.list_tools().await?;
        second.list_tools().await?;
        let sessions =
            wait_sessions(&gate, "two ready sessions", 2, |s| s.iter().all(ready)).await?;
        let (a, b) = (&sessions[0], &sessions[1]);
        assert_ne!(epoch(a), epoch(b), "{a}\n{b}");
        assert_eq!(epoch(a).len(), 26, "a ULID: {a}");
        assert_ne!(a["serverPid"], b["serverPid"], "{a}\n{b}");
        assert_eq!(identity(a), identity(b), "{a}\n{b}");
        assert_eq!(revision(a), revision(b), "{a}\n{b}");

        // Each agent reaches its own process.
        let pids: Vec<Value> = vec![
            first.call_next("whoami", json!({})).await?["result"]["structuredContent"]["pid"]
                .clone(),
            second.call_next("whoami", json!({})).await?["result"]["structuredContent"]["pid"]
                .clone(),
        ];
        let mut shown = vec![a["serverPid"].clone(), b["serverPid"].clone()];
        let mut seen = pids.clone();
        shown.sort_by_key(|p| p.as_u64());
        seen.sort_by_key(|p| p.as_u64());
        assert_eq!(seen, shown);
        Ok(())
    })
    .await
}

/// refresh-contract §2 and issue 16: an interpreter's entry is found as the runtime resolves
/// it: `python -m server` runs `server.py` from the working directory, which is hashed like an
/// entry named as a file (a module the working directory does not hold stays unpinned, with the
/// reason: the supervisor's unit tests). The entry, the code beside it and the test venv's
/// packages are hashed, so the server is pinned without a lockfile; the same server run by the
/// interpreter itself, its packages found through PYTHONPATH (no environment to hash), is partly
/// pinned, and status says what is covered and what is not. Each is its server's launch 1.
#[tokio::test]
async fn a_module_entry_is_resolved_to_its_file_and_pinning_says_what_it_covers() -> Result<()> {
    let unlocked = Fixture::new()?;
    unlocked.remove_lockfile()?;
    let pinned = Fixture::new()?;
    let gate = gate().await?;
    unlocked.add(&gate, LABEL, &[], &["-m", "server"])?;
    let python = std::fs::canonicalize(postern_e2e::rebuild::python()?)?;
    let packages = postern_e2e::rebuild::site_packages()?;
    let path = format!("PYTHONPATH={}", packages.display());
    unlocked.add_with(
        &gate,
        "partly",
        &["--env", &path],
        &python,
        &["-B", "server.py"],
    )?;
    pinned.add(&gate, "pinned", &[], &["-B", "server.py"])?;
    gate.scenario(async {
        let mut agent = connect(&gate, LABEL).await?;
        let session = first_session(&gate, &mut agent).await?;
        assert!(ok_text(&agent.call_next("whoami", json!({})).await?)?.starts_with("revision=A "));
        let execution = &session["execution"];
        assert_eq!(
            execution["entry"]["path"],
            path_str(&unlocked.entry()),
            "`-m server` runs server.py: {session}"
        );
        assert_eq!(execution["lockfiles"], json!([]), "{session}");
        assert_eq!(
            execution["pinning"],
            json!({"state": "pinned"}),
            "the entry, the code beside it and the venv: {session}"
        );

        let mut partly = connect(&gate, "partly").await?;
        partly.list_tools().await?;
        let session = session_of(&gate, "partly").await?;
        assert_eq!(
            session["execution"]["pinning"],
            json!({
                "state": "partly",
                "covered": "the entry file server.py and the code beside it",
                "uncovered": "the packages it loads: there is no lockfile in the working \
                              directory (add one, or name the dependency tree with --identity)",
            }),
            "{session}"
        );
        let cli = gate.cli(["server", "status", "partly"])?;
        assert!(
            cli.contains(
                "    partly pinned: covers the entry file server.py and the code beside it, \
                 not the packages it loads"
            ) && !cli.contains("UNPINNED"),
            "{cli}"
        );

        let mut control = connect(&gate, "pinned").await?;
        control.list_tools().await?;
        let session = session_of(&gate, "pinned").await?;
        assert_eq!(
            session["execution"]["pinning"],
            json!({"state": "pinned"}),
            "{session}"
        );
        assert_eq!(session["execution"]["launch"], 1, "{session}");
        assert_eq!(
            session["execution"]["entry"]["path"],
            path_str(&pinned.entry()),
            "{session}"
        );
        let cli = gate.cli(["server", "status", "pinned"])?;
        assert!(
            cli.contains("    pinned\n") && !cli.contains("UNPINNED"),
            "{cli}"
        );
        Ok(())
    })
    .await
}

/// The first session of `label` in status.
async fn session_of(gate: &Gate, label: &str) -> Result<Value> {
    let status = status(gate).await?;
    status["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["server"] == label))
        .cloned()
        .with_context(|| format!("no session of '{label}': {status}"))
}

/// Polls `done` (a file the server writes) until it holds.
async fn wait_until(what: &str, done: impl Fn() -> bool) -> Result<()> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while !done() {
        if tokio::time::Instant::now() >= deadline {
            bail!("waited {SETTLE:?} for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}
