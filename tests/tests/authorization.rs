//! Authorization follows the execution epoch (issue 5), end to end: the real `postern` daemon
//! with its defaults (every new agent run and call needs a human), the rebuildable fixture (a
//! Python server on the official MCP SDK), an agent speaking raw JSON-RPC through `postern
//! mcp`, and a human answering with the CLI (`postern approvals`, `approve`, `deny`, `lock`).
//!
//! The agent is a shell (`sh`) that runs the shim, so the test process, which plays the human,
//! is outside the agent's process tree; one test makes the test process the agent itself to
//! show that an approval from inside the tree is refused.

use std::time::Duration;

use anyhow::{Result, bail};
use postern_e2e::Gate;
use postern_e2e::human::{
    SETTLE, card_id, epoch, open_approvals, ready, wait_approvals, wait_session,
};
use postern_e2e::raw::{self, RawAgent, ok_text, tool_error};
use postern_e2e::rebuild::Fixture;
use serde_json::{Value, json};

/// How long one answer may take (a python server starting on a loaded machine is slow).
const ANSWER: Duration = Duration::from_secs(30);
/// The label the fixture is configured under.
const LABEL: &str = "rebuildable";

/// A gate with the fixture configured to restart when its files change.
async fn gate(fixture: &Fixture) -> Result<Gate> {
    fixture.gate(LABEL, "on-change").await
}

/// An agent (a shell running the shim) that initialized and listed tools.
async fn agent(gate: &Gate) -> Result<RawAgent> {
    let (cmd, log) = gate.agent_command(LABEL)?;
    connect(cmd, log).await
}

async fn connect(cmd: tokio::process::Command, log: std::path::PathBuf) -> Result<RawAgent> {
    let mut agent = raw::connect(cmd, &log, "authorization-agent", ANSWER).await?;
    agent.list_tools().await?;
    Ok(agent)
}

/// The article's rebuild test: a grant for revision A's epoch does not carry over to the
/// rebuilt revision B, even though the tool's name and schema are the same; the old prepared
/// call is refused with `authorization_stale` before anything reaches the server, and B needs a
/// fresh approval that names the changed code.
#[tokio::test]
async fn the_articles_rebuild_test() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate(&fixture).await?;
    gate.scenario(async {
        // 1. Revision A runs; its execution record is captured; the agent listed tools.
        let mut agent = agent(&gate).await?;
        let a = wait_session(&gate, LABEL, "revision A ready", ready).await?;
        let epoch_a = epoch(&a);
        assert!(!epoch_a.is_empty(), "{a}");

        // A call waits for a human; pings keep flowing meanwhile.
        let prepared = json!({"name": "publish_preview", "arguments": {"branch": "main"}});
        let call = agent.start("tools/call", prepared.clone()).await?;
        let cards = wait_approvals(&gate)?;
        assert_eq!(cards.len(), 1, "{cards:?}");
        let card = &cards[0];
        assert_eq!(card["what"], "sessionAndCall", "{card}");
        assert_eq!(card["tool"]["name"], "publish_preview");
        assert_eq!(card["server"], LABEL);
        assert_eq!(card["epoch"]["epoch"], epoch_a.as_str());
        assert_eq!(card["epoch"]["since"]["kind"], "firstApproval");
        assert_eq!(
            card["agent"]["chain"].as_array().and_then(|c| c.last()),
            Some(&json!("postern"))
        );
        assert!(
            card["annotations"]["note"]
                .as_str()
                .unwrap_or_default()
                .contains("untrusted"),
            "{card}"
        );
        let ping = agent.request_next("ping", json!({})).await?;
        assert_eq!(
            ping["result"],
            json!({}),
            "a ping is answered while a call waits: {ping}"
        );
        // One reusing the waiting call's id is refused: an answer would read as the call's.
        let reused = agent.request(call.clone(), "ping", json!({})).await?;
        assert_eq!(reused["error"]["code"], -32600, "{reused}");
        assert_eq!(
            reused["error"]["message"],
            format!("request id {call} is already in use by a request in flight"),
            "{reused}"
        );
        assert!(
            fixture.effects().is_empty(),
            "nothing ran before the approval"
        );

        // The human approves the write tool for this agent run.
        gate.cli(["approve", &card_id(card), "--run"])?;
        let answer = agent.response(&call).await?;
        assert!(ok_text(&answer)?.contains("revision=A"), "{answer}");

        // 2. The audit shows the call under epoch A and the grant for epoch A.
        let grants: Vec<Value> = serde_json::from_str(&gate.cli(["grants", "--json"])?)?;
        assert_eq!(grants.len(), 1, "{grants:?}");
        assert_eq!(grants[0]["executionEpoch"], epoch_a.as_str());
        assert_eq!(grants[0]["end"]["kind"], "untilRunEnds");
        let grant_a = grants[0]["id"].as_str().unwrap_or_default().to_owned();
        // A second call under the same grant needs nobody.
        let again = agent.request_next("tools/call", prepared.clone()).await?;
        assert!(ok_text(&again)?.contains("revision=A"), "{again}");
        assert_eq!(fixture.effects().len(), 2, "{:?}", fixture.effects());

        // 3-4. Rebuild revision B (same name and schema, another handler); on-change restarts it.
        fixture.rebuild("b-handler")?;
        let b = wait_session(&gate, LABEL, "revision B's new epoch", |s| {
            ready(s) && epoch(s) != epoch_a
        })
        .await?;
        let epoch_b = epoch(&b);

        // 5. The old prepared call is refused before anything is forwarded, with both epochs.
        let stale = agent.request_next("tools/call", prepared.clone()).await?;
        assert_eq!(
            tool_error(&stale)?,
            &json!({
                "error": "authorization_stale",
                "reason": "server execution epoch changed",
                "approvedEpoch": epoch_a,
                "currentEpoch": epoch_b,
                "retry": "refresh tool metadata and request authorization",
            })
        );
        let text = stale["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains("epoch"), "a readable sentence too: {text}");
        assert_eq!(
            fixture.effects().len(),
            2,
            "the stale call reached no server"
        );
        assert!(
            open_approvals(&gate)?.is_empty(),
            "a stale call asks nobody"
        );

        // 6. The agent refreshes its catalog; the next call asks a human about the new code.
        agent.list_tools().await?;
        let call = agent.start("tools/call", prepared.clone()).await?;
        let cards = wait_approvals(&gate)?;
        let card = &cards[0];
        assert_eq!(card["epoch"]["epoch"], epoch_b.as_str());
        assert_eq!(card["epoch"]["since"]["kind"], "changed", "{card}");
        assert_eq!(card["epoch"]["since"]["approvedEpoch"], epoch_a.as_str());
        let changed = card["epoch"]["since"]["changedArtifacts"].to_string();
        assert!(
            changed.contains("server.py"),
            "the card names the changed code: {changed}"
        );
        assert_eq!(
            card["what"], "call",
            "the agent run is already admitted: {card}"
        );
        gate.cli(["approve", &card_id(card), "--run"])?;
        let answer = agent.response(&call).await?;
        assert!(ok_text(&answer)?.contains("revision=B"), "{answer}");

        let grants: Vec<Value> = serde_json::from_str(&gate.cli(["grants", "--json"])?)?;
        let fresh: Vec<&Value> = grants
            .iter()
            .filter(|g| g["executionEpoch"] == epoch_b.as_str())
            .collect();
        assert_eq!(fresh.len(), 1, "a new grant for epoch B: {grants:?}");
        assert_ne!(fresh[0]["id"], grant_a.as_str());

        // The Activity journal shows each call with its epoch and decision.
        let activity = gate.cli(["activity", "--json", "--server", LABEL])?;
        let rows: Vec<Value> = activity
            .lines()
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()?;
        let summary: Vec<(String, String)> = rows
            .iter()
            .rev()
            .map(|r| {
                (
                    r["decision"].as_str().unwrap_or_default().to_owned(),
                    r["epoch"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("allowed".to_owned(), epoch_a.clone()),
                ("allowed".to_owned(), epoch_a.clone()),
                ("authorization_stale".to_owned(), epoch_b.clone()),
                ("allowed".to_owned(), epoch_b.clone()),
            ]
        );
        // The newest call was approved with `postern approve`: on a terminal, says the log.
        assert_eq!(rows[0]["asked"]["answer"], "granted", "{}", rows[0]);
        assert_eq!(rows[0]["asked"]["by"], "terminal", "{}", rows[0]);
        // The Sessions journal shows the human's admission and both grants.
        let sessions = gate.cli(["sessions", "--json", "--server", LABEL])?;
        let session: Value = serde_json::from_str(sessions.lines().next().unwrap_or("{}"))?;
        assert_eq!(session["approved"], "human", "{session}");
        let epochs: Vec<&Value> = session["grants"]
            .as_array()
            .map(|g| g.iter().map(|g| &g["epoch"]).collect())
            .unwrap_or_default();
        assert_eq!(epochs, [&json!(epoch_a), &json!(epoch_b)], "{session}");
        // The number `server status` shows for the running session finds the same calls as
        // the journal's ID.
        let status = gate.cli(["server", "status", LABEL])?;
        let live = status
            .split("session #")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_default();
        let by_live = gate.cli(["activity", "--json", "--session", &format!("#{live}")])?;
        let by_id = gate.cli([
            "activity",
            "--json",
            "--session",
            &session["id"].to_string(),
        ])?;
        assert_eq!(by_live.lines().count(), 4, "{status}\n{by_live}");
        assert_eq!(by_live, by_id);
        agent.kill().await?;
        Ok(())
    })
    .await
}

/// A locked vault refuses every call with `vault_locked`, before anything else is looked at,
/// and says nothing about the server; grants end with the lock. Unlocking needs a human, and a
/// call then asks again.
#[tokio::test]
async fn a_locked_vault_refuses_every_call_until_a_human_unlocks_it() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate(&fixture).await?;
    gate.scenario(async {
        let mut agent = agent(&gate).await?;
        let call = agent
            .start("tools/call", json!({"name": "whoami", "arguments": {}}))
            .await?;
        let cards = wait_approvals(&gate)?;
        gate.cli(["approve", &card_id(&cards[0]), "--run"])?;
        ok_text(&agent.response(&call).await?)?;

        assert!(gate.cli(["lock"])?.contains("vault locked"));
        for tool in ["whoami", "publish_preview", "no_such_tool"] {
            let refused = agent.call_next(tool, json!({"branch": "main"})).await?;
            let detail = tool_error(&refused)?;
            assert_eq!(detail["error"], "vault_locked", "{refused}");
            assert!(
                !refused.to_string().contains(LABEL),
                "no server name leaks: {refused}"
            );
        }
        assert!(
            open_approvals(&gate)?.is_empty(),
            "a locked vault asks nobody"
        );
        let grants: Vec<Value> = serde_json::from_str(&gate.cli(["grants", "--json"])?)?;
        assert!(grants.is_empty(), "the lock ended the grants: {grants:?}");
        let status = gate.status().await?;
        assert_eq!(status["gate"]["vault"], "locked");

        assert!(gate.cli(["unlock"])?.contains("vault unlocked"));
        let call = agent
            .start("tools/call", json!({"name": "whoami", "arguments": {}}))
            .await?;
        let cards = wait_approvals(&gate)?;
        assert_eq!(
            cards[0]["what"], "sessionAndCall",
            "the lock ended the admission too"
        );
        gate.cli(["approve", &card_id(&cards[0])])?;
        assert!(ok_text(&agent.response(&call).await?)?.contains("revision=A"));
        agent.kill().await?;
        Ok(())
    })
    .await
}

/// An agent cannot approve itself through a shell: the test process is the agent here (it
/// launched the shim), so its `postern approve` and `postern unlock` are refused, and so is
/// anything that destroys configuration (removing a credential, removing or replacing a
/// server). Adding a new server is taken.
#[tokio::test]
async fn an_approval_from_inside_the_agents_process_tree_is_refused() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate(&fixture).await?;
    // Added by the human before any agent connected.
    gate.cli_with_stdin(
        &["credential", "add", "kept", "--kind", "env", "--env", "K"],
        "v",
    )?;
    gate.scenario(async {
        let (cmd, log) = gate.mcp_command(LABEL)?;
        let mut agent = connect(cmd, log).await?;
        let call = agent
            .start(
                "tools/call",
                json!({"name": "publish_preview", "arguments": {"branch": "main"}}),
            )
            .await?;
        let cards = wait_approvals(&gate)?;
        let card = card_id(&cards[0]);
        let refused = gate
            .cli(["approve", &card, "--run"])
            .expect_err("self-approval must fail");
        assert!(
            refused
                .to_string()
                .contains("inside the process tree of an agent"),
            "{refused:#}"
        );
        gate.cli(["lock"])?;
        let refused = gate.cli(["unlock"]).expect_err("self-unlock must fail");
        assert!(refused.to_string().contains("process tree"), "{refused:#}");
        // Adding or binding a credential widens authority too.
        let refused = gate
            .cli_with_stdin(
                &["credential", "add", "x", "--kind", "env", "--env", "X"],
                "v",
            )
            .expect_err("a credential added from the agent's tree must fail");
        assert!(refused.to_string().contains("process tree"), "{refused:#}");
        let refused = gate
            .cli(["server", "bind", LABEL, "x"])
            .expect_err("a binding from the agent's tree must fail");
        assert!(refused.to_string().contains("process tree"), "{refused:#}");
        // Destroying configuration too; adding a new server is not destructive.
        for (args, what) in [
            (&["credential", "remove", "kept"][..], "remove credential"),
            (&["server", "remove", LABEL][..], "remove server"),
            (
                &["server", "add", LABEL, "--", "true"][..],
                "replace server",
            ),
        ] {
            let refused = gate.cli(args).expect_err(what);
            assert!(
                refused.to_string().contains(&format!("refused to {what}"))
                    && refused.to_string().contains("process tree"),
                "{refused:#}"
            );
        }
        gate.cli(["server", "add", "scratch", "--", "true"])?;
        let listed = gate.cli(["server", "list"])?;
        assert!(
            listed.contains(&format!("{LABEL}\t")) && listed.contains("scratch\t"),
            "{listed}"
        );
        assert!(gate.cli(["credential", "list"])?.contains("kept"));
        assert!(fixture.effects().is_empty());
        agent.kill().await?;
        let _ = call;
        Ok(())
    })
    .await
}

/// With the engine stopped, the CLI judges by itself: a process under an agent that launched
/// a `postern mcp` shim still cannot remove a server; once the agent is gone, it can.
#[tokio::test]
async fn with_the_engine_stopped_an_agent_still_cannot_remove_a_server() -> Result<()> {
    let fixture = Fixture::new()?;
    let mut gate = gate(&fixture).await?;
    let (cmd, log) = gate.mcp_command(LABEL)?;
    let mut agent = connect(cmd, log).await?;
    gate.stop_daemon();
    let refused = gate
        .cli(["server", "remove", LABEL])
        .expect_err("an agent's removal must fail without an engine too");
    assert!(
        refused.to_string().contains("refused to remove server")
            && refused.to_string().contains("process tree of an agent"),
        "{refused:#}"
    );
    agent.kill().await?;
    gate.cli(["server", "remove", LABEL])?;
    Ok(())
}

/// A human's deny reaches the agent as `approval_denied`; an unanswered request times out with
/// `approval_timeout`; a late answer is refused.
#[tokio::test]
async fn denied_and_unanswered_requests_refuse_the_call() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate(&fixture).await?;
    gate.cli(["settings", "--approval-timeout", "2"])?;
    gate.scenario(async {
        let mut agent = agent(&gate).await?;
        let write = json!({"name": "publish_preview", "arguments": {"branch": "main"}});

        let call = agent.start("tools/call", write.clone()).await?;
        let cards = wait_approvals(&gate)?;
        gate.cli(["deny", &card_id(&cards[0])])?;
        let denied = agent.response(&call).await?;
        assert_eq!(tool_error(&denied)?["error"], "approval_denied", "{denied}");

        let call = agent.start("tools/call", write.clone()).await?;
        let cards = wait_approvals(&gate)?;
        let timed_out = agent.response(&call).await?;
        assert_eq!(
            tool_error(&timed_out)?["error"],
            "approval_timeout",
            "{timed_out}"
        );
        let late = gate
            .cli(["approve", &card_id(&cards[0])])
            .expect_err("a late answer is ignored");
        assert!(
            late.to_string().contains("no open approval request")
                && late.to_string().contains("(not_open)"),
            "{late:#}"
        );
        assert!(
            fixture.effects().is_empty(),
            "nothing ran: {:?}",
            fixture.effects()
        );
        agent.kill().await?;
        Ok(())
    })
    .await
}

/// A request outlives the agent cancelling its call (what a client's tool timeout does): the
/// card stays open, approving it runs nothing by itself, and the identical retry goes through
/// on that approval, once (refresh-contract §8). A request is withdrawn when the agent
/// disconnects: the card disappears, and approving it afterwards does nothing.
#[tokio::test]
async fn a_request_outlives_a_cancel_and_is_withdrawn_when_the_agent_disconnects() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate(&fixture).await?;
    gate.scenario(async {
        let mut agent = agent(&gate).await?;
        let write = json!({"name": "publish_preview", "arguments": {"branch": "main"}});

        let call = agent.start("tools/call", write.clone()).await?;
        let cards = wait_approvals(&gate)?;
        agent
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call}}))
            .await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let open = open_approvals(&gate)?;
        assert_eq!(open.len(), 1, "the card stays open for the retry");
        gate.cli(["approve", &card_id(&cards[0])])?;
        assert!(fixture.effects().is_empty(), "nothing waited, nothing ran");
        let retried = agent.request_next("tools/call", write.clone()).await?;
        assert!(ok_text(&retried)?.contains("revision=A"), "{retried}");
        assert_eq!(fixture.effects().len(), 1, "{:?}", fixture.effects());
        // Once: the next identical call asks again.
        agent.start("tools/call", write.clone()).await?;
        let cards = wait_approvals(&gate)?;
        // The agent goes away: its end of the shim's pipes closes.
        drop(agent);
        wait_no_approvals(&gate).await?;
        assert!(gate.cli(["approve", &card_id(&cards[0])]).is_err());
        assert_eq!(fixture.effects().len(), 1, "{:?}", fixture.effects());
        Ok(())
    })
    .await
}

async fn wait_no_approvals(gate: &Gate) -> Result<()> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    while !open_approvals(gate)?.is_empty() {
        if tokio::time::Instant::now() >= deadline {
            bail!("the approval request was not withdrawn within {SETTLE:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// What an agent sends reaches the human's terminal as text, never as commands: an argument
/// whose name hides the rest of the card (`ESC [8m`) and whose value reverses the line
/// (U+202E) shows escaped in `postern approvals`.
#[tokio::test]
async fn a_card_cannot_drive_the_humans_terminal() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = gate(&fixture).await?;
    gate.scenario(async {
        let mut agent = agent(&gate).await?;
        let arguments = json!({"branch": "main\u{202e}", "rm -rf ~\u{1b}[8m": "\u{1b}[28m",
            "x\n  code:    same code as approved": 1});
        let _call = agent
            .start(
                "tools/call",
                json!({"name": "publish_preview", "arguments": arguments}),
            )
            .await?;
        wait_approvals(&gate)?;
        let shown = gate.cli(["approvals"])?;
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{202e}'),
            "{shown:?}"
        );
        assert!(
            shown.contains("/rm -rf ~0\\u001b[8m") && shown.contains("main\\u202e"),
            "{shown}"
        );
        // A newline in a name cannot forge the card's next line.
        assert!(
            shown.contains("/x\\u000a  code:    same code as approved = 1")
                && !shown.contains("\n  code:    same code as approved"),
            "{shown}"
        );
        agent.kill().await?;
        Ok(())
    })
    .await
}
