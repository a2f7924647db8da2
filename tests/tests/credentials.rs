//! Credentials in the OS keychain, released only under a current approval (issue 6), end to
//! end: the real daemon with a real Secret Service keychain (a private gnome-keyring per
//! gate), credentials added through the CLI from stdin, the rebuildable fixture (its `whoami`
//! says whether its launch holds `FIXTURE_TOKEN`, never the value), and server-everything's
//! `get-env`, which echoes its whole environment.

use std::time::Duration;

use anyhow::Result;
use postern_e2e::Gate;
use postern_e2e::human::{approved_call, card_id, epoch, ready, wait_approvals, wait_session};
use postern_e2e::raw::{self, RawAgent, ok_text, tool_error};
use postern_e2e::rebuild::Fixture;
use postern_e2e::servers;
use postern_gateway::control;
use postern_gateway::hello::ControlCommand;
use serde_json::{Value, json};

const ANSWER: Duration = Duration::from_secs(30);
const LABEL: &str = "rebuildable";
const CANARY: &str = "canary-7f3a9c2e-postern-secret-value";

async fn agent(gate: &Gate, label: &str) -> Result<RawAgent> {
    let (cmd, log) = gate.agent_command(label)?;
    raw::connect(cmd, &log, "credentials-agent", ANSWER).await
}

/// Adds the env credential `fixture-token` (`FIXTURE_TOKEN`), its value `value` typed on stdin,
/// and binds it to the fixture; returns what `credential add` printed.
fn add_fixture_token(gate: &Gate, value: &str) -> Result<String> {
    let added = gate.cli_with_stdin(
        &[
            "credential",
            "add",
            "fixture-token",
            "--kind",
            "env",
            "--env",
            "FIXTURE_TOKEN",
        ],
        value,
    )?;
    gate.cli(["server", "bind", LABEL, "fixture-token"])?;
    Ok(added)
}

/// A rebuilt server is not given the credential until a human approves its identity for it;
/// approving relaunches it (same code, a new epoch) with the credential, and the call goes
/// through there. Status and the CLI say what was withheld and why.
#[tokio::test]
async fn a_launch_gets_a_credential_only_for_an_identity_a_human_approved() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = Gate::start_prompting(&[]).await?;
    fixture.add(
        &gate,
        LABEL,
        &["--restart", "on-change"],
        &["-B", "server.py"],
    )?;
    let added = add_fixture_token(&gate, &format!("{CANARY}\n"))?;
    assert!(
        added.contains("added credential 'fixture-token'"),
        "{added}"
    );
    let listed = gate.cli(["credential", "list"])?;
    assert!(
        listed.contains("fixture-token") && listed.contains("env FIXTURE_TOKEN"),
        "{listed}"
    );
    assert!(
        !listed.contains(CANARY),
        "no command shows a value: {listed}"
    );

    gate.scenario(async {
        let mut agent = agent(&gate, LABEL).await?;
        agent.list_tools().await?;
        // The first launch: no human approved any identity for the credential yet.
        let first = wait_session(&gate, LABEL, "the first launch", ready).await?;
        assert_eq!(
            first["credentials"]["withheld"],
            json!(["fixture-token"]),
            "{first}"
        );

        let (card, answer) = approved_call(&gate, &mut agent, "whoami", json!({}), "--run").await?;
        assert_eq!(card["credentials"], json!(["fixture-token"]), "{card}");
        assert_eq!(
            card["withheldCredentials"],
            json!(["fixture-token"]),
            "{card}"
        );
        let text = ok_text(&answer)?;
        assert!(
            text.contains("token=set") && text.contains("revision=A"),
            "{text}"
        );
        let holding = wait_session(&gate, LABEL, "a launch holding the credential", |s| {
            s["credentials"]["released"] == json!(["fixture-token"])
        })
        .await?;
        assert_ne!(
            epoch(&holding),
            epoch(&first),
            "the release relaunched the server"
        );

        // Rotation: the holder restarts with the new value (a new epoch of the same approved
        // identity, so it is released again).
        gate.cli_with_stdin(&["credential", "rotate", "fixture-token"], "rotated-value")?;
        let holding = wait_session(&gate, LABEL, "the holder restarted after rotation", |s| {
            ready(s)
                && epoch(s) != epoch(&holding)
                && s["credentials"]["released"] == json!(["fixture-token"])
        })
        .await?;
        let listed = gate.cli(["credential", "list", "--json"])?;
        assert!(listed.contains("\"version\": 2"), "{listed}");

        // A rebuild is new code: its launch does not get the credential.
        fixture.rebuild("b-handler")?;
        let rebuilt = wait_session(&gate, LABEL, "the rebuilt launch", |s| {
            ready(s) && epoch(s) != epoch(&holding)
        })
        .await?;
        assert_eq!(
            rebuilt["credentials"]["withheld"],
            json!(["fixture-token"]),
            "{rebuilt}"
        );
        assert_eq!(
            rebuilt["credentials"]["reason"],
            "identity changed since approval"
        );
        let status = gate.cli(["server", "status", LABEL])?;
        assert!(
            status.contains("credential withheld: fixture-token (identity changed since approval)"),
            "{status}"
        );
        // The old grant is stale; after a refresh the human is asked about the new code.
        let stale = agent.call_next("whoami", json!({})).await?;
        assert_eq!(
            tool_error(&stale)?["error"],
            "authorization_stale",
            "{stale}"
        );
        agent.list_tools().await?;
        let (card, answer) = approved_call(&gate, &mut agent, "whoami", json!({}), "--run").await?;
        assert_eq!(card["epoch"]["since"]["kind"], "changed", "{card}");
        assert_eq!(card["withheldCredentials"], json!(["fixture-token"]));
        let text = ok_text(&answer)?;
        assert!(
            text.contains("token=set") && text.contains("revision=B"),
            "{text}"
        );

        // Locking stops the server holding the credential.
        gate.cli(["lock"])?;
        wait_session(&gate, LABEL, "the holder stopped", |s| {
            s["state"] == "stopped"
        })
        .await?;
        agent.kill().await?;
        Ok(())
    })
    .await
}

/// The vault locks while a call waits for a human on a server that holds a credential: the
/// lock refuses the call with `vault_locked` (it was never forwarded: unlock and call again)
/// and stops the server. The call is never told `epoch_transition`'s "check whether the call
/// took effect", whichever of the two reaches the session first; a few rounds, since that
/// order is a race here (crates/gateway/src/session/tests.rs forces the worst one).
#[tokio::test]
async fn a_call_waiting_for_a_human_when_the_vault_locks_gets_vault_locked() -> Result<()> {
    const ROUNDS: usize = 5;
    let fixture = Fixture::new()?;
    let gate = Gate::start_prompting(&[]).await?;
    fixture.add(&gate, LABEL, &[], &["-B", "server.py"])?;
    add_fixture_token(&gate, "a-token-value")?;

    gate.scenario(async {
        let mut agent = agent(&gate, LABEL).await?;
        agent.list_tools().await?;
        for round in 1..=ROUNDS {
            // Approving releases the credential: the server is relaunched holding it.
            let (_, answer) =
                approved_call(&gate, &mut agent, "whoami", json!({}), "--run").await?;
            assert!(ok_text(&answer)?.contains("token=set"), "{answer}");
            wait_session(&gate, LABEL, "a launch holding the credential", |s| {
                ready(s) && s["credentials"]["released"] == json!(["fixture-token"])
            })
            .await?;

            // The run grant covers whoami only: this call waits for a human.
            let call = agent
                .start(
                    "tools/call",
                    json!({"name": "publish_preview", "arguments": {"branch": "main"}}),
                )
                .await?;
            wait_approvals(&gate)?;
            gate.cli(["lock"])?;
            let answer = agent.response(&call).await?;
            assert_eq!(
                tool_error(&answer)?["error"],
                "vault_locked",
                "round {round}: {answer}"
            );
            wait_session(&gate, LABEL, "the holder stopped", |s| {
                s["state"] == "stopped"
            })
            .await?;
            gate.cli(["unlock"])?;
        }
        let effects = fixture.effects();
        assert!(
            !effects.iter().any(|e| e.starts_with("publish_preview")),
            "a refused call took effect: {effects:?}"
        );
        agent.kill().await?;
        Ok(())
    })
    .await
}

/// The canary: a credential added through the CLI appears nowhere after a full scenario (a
/// launch, calls, a denial, a lock, an audit export, the status the app shows) except in the
/// deliberate output of a tool that echoes its environment (server-everything's `get-env`:
/// a server holding a credential can leak it through its own output, and Postern cannot stop
/// that; it can only make sure the server was approved to hold it).
#[tokio::test]
async fn a_canary_credential_appears_nowhere_but_the_tools_own_output() -> Result<()> {
    let everything = servers::everything()?;
    let gate = Gate::start_prompting(&[("everything", &everything)]).await?;
    gate.cli_with_stdin(
        &[
            "credential",
            "add",
            "canary",
            "--kind",
            "env",
            "--env",
            "POSTERN_CANARY",
        ],
        CANARY,
    )?;
    gate.cli(["server", "bind", "everything", "canary"])?;
    let seen = gate
        .scenario(async {
            let mut agent = agent(&gate, "everything").await?;
            let mut seen = Vec::new();
            let tools = agent.request_next("tools/list", json!({})).await?;
            seen.push(tools.clone());
            let (card, echoed) =
                approved_call(&gate, &mut agent, "get-env", json!({}), "--run").await?;
            seen.push(card);
            let text = echoed.to_string();
            assert!(
                text.contains(CANARY),
                "get-env echoes the released credential: {text}"
            );

            // A denial, then a lock, then a refused call.
            let call = agent
                .start(
                    "tools/call",
                    json!({"name": "echo", "arguments": {"message": "hi"}}),
                )
                .await?;
            let cards = wait_approvals(&gate)?;
            seen.push(cards[0].clone());
            gate.cli(["deny", &card_id(&cards[0])])?;
            seen.push(agent.response(&call).await?);
            gate.cli(["lock"])?;
            seen.push(agent.call_next("get-env", json!({})).await?);
            seen.push(control::request(&gate.socket(), ControlCommand::Status).await?);
            for args in [
                vec!["server", "status"],
                vec!["grants", "--json"],
                vec!["sessions", "--json"],
                vec!["activity", "--json"],
                vec!["credential", "list", "--json"],
            ] {
                seen.push(Value::String(gate.cli(args)?));
            }
            agent.kill().await?;
            Ok(seen)
        })
        .await?;
    for value in &seen {
        assert!(
            !value.to_string().contains(CANARY),
            "the canary leaked into {value}"
        );
    }
    // The audit, decrypted, with argument values.
    let export = gate.cli(["audit", "export", "--with-arguments"])?;
    assert!(
        export.contains("credential_released"),
        "the release is audited"
    );
    assert!(
        !export.contains(CANARY),
        "the canary is not in the audit log"
    );
    // The database files, byte for byte, and every log.
    for entry in std::fs::read_dir(gate.home())? {
        let path = entry?.path();
        if path.is_file() {
            let bytes = std::fs::read(&path)?;
            assert!(
                !bytes.windows(CANARY.len()).any(|w| w == CANARY.as_bytes()),
                "the canary is in {}",
                path.display()
            );
        }
    }
    assert!(
        !gate.logs_report().contains(CANARY),
        "the canary is in a log"
    );
    Ok(())
}

/// `postern forget-keychain` deletes a home's entries from the real keychain (the audit log's
/// key and anchor, the credentials' values), only with `--yes` and only once no engine owns
/// the home.
#[tokio::test]
async fn forgetting_a_home_deletes_its_keychain_entries() -> Result<()> {
    let mut gate = Gate::start(&[]).await?;
    let add: Vec<&str> = "credential add api --kind bearer --host api.example.com"
        .split(' ')
        .collect();
    gate.cli_with_stdin(&add, "forget-me-value")?;
    let running = gate.cli(["forget-keychain", "--yes"]).unwrap_err();
    assert!(
        running
            .to_string()
            .contains("another Postern engine is already running"),
        "{running:#}"
    );

    gate.stop_daemon();
    let unconfirmed = gate.cli(["forget-keychain"]).unwrap_err();
    assert!(unconfirmed.to_string().contains("--yes"), "{unconfirmed:#}");
    let deleted = gate.cli(["forget-keychain", "--yes"])?;
    let names: Vec<&str> = deleted
        .lines()
        .filter_map(|l| l.strip_prefix("deleted ")?.split_once('@'))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        names,
        ["audit-opening-key", "audit-anchor", "credential.api.v1"],
        "{deleted}"
    );
    assert!(!deleted.contains("forget-me-value"));
    let again = gate.cli(["forget-keychain", "--yes"])?;
    assert!(again.starts_with("no keychain entries"), "{again}");
    Ok(())
}
