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
    let added = add_unbound_fixture_token(gate, value)?;
    gate.cli(["server", "bind", LABEL, "fixture-token"])?;
    Ok(added)
}

/// [`add_fixture_token`] without the binding.
fn add_unbound_fixture_token(gate: &Gate, value: &str) -> Result<String> {
    gate.cli_with_stdin(
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
    )
}

/// After the fixture's code changed under an approval: its next `whoami` is refused as stale;
/// once the agent lists the tools again, the card says the code changed since the approval and
/// that the credential waits for it, and approving it runs the call holding the credential.
/// Returns the call's text.
async fn asked_about_changed_code(gate: &Gate, agent: &mut RawAgent) -> Result<String> {
    let stale = agent.call_next("whoami", json!({})).await?;
    assert_eq!(
        tool_error(&stale)?["error"],
        "authorization_stale",
        "{stale}"
    );
    agent.list_tools().await?;
    let (card, answer) = approved_call(gate, agent, "whoami", json!({}), "--run").await?;
    assert_eq!(card["epoch"]["since"]["kind"], "changed", "{card}");
    assert_eq!(card["withheldCredentials"], json!(["fixture-token"]));
    let text = ok_text(&answer)?;
    assert!(text.contains("token=set"), "{text}");
    Ok(text)
}

/// The red team's recipe: with the vault unlocked, the agent binds a credential to a server
/// straight in SQLite, to have its next approved call act with it. The launch is not told of
/// the binding (nothing held, nothing withheld, no card can name it), the row is removed, and
/// status says so at once, not at the next unlock.
#[tokio::test]
async fn a_binding_written_into_sqlite_while_unlocked_is_not_used() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = fixture.gate(LABEL, "on-change").await?;
    add_unbound_fixture_token(&gate, &format!("{CANARY}\n"))?;
    let db = rusqlite::Connection::open(gate.home().join("postern.db"))?;
    db.execute(
        "INSERT INTO server_credentials (server, credential) VALUES (?1, 'fixture-token')",
        [LABEL],
    )?;
    drop(db);

    gate.scenario(async {
        let mut agent = agent(&gate, LABEL).await?;
        agent.list_tools().await?;
        let first = wait_session(&gate, LABEL, "the first launch", ready).await?;
        assert_eq!(first["credentials"]["withheld"], json!([]), "{first}");
        assert_eq!(first["credentials"]["released"], json!([]), "{first}");
        let status = gate.status().await?;
        let warning = status["gate"]["configWarning"].as_str().unwrap_or_default();
        assert!(
            warning
                .contains("credential 'fixture-token' was bound to 'rebuildable' and is unbound"),
            "{status}"
        );
        let db = rusqlite::Connection::open(gate.home().join("postern.db"))?;
        let rows: i64 =
            db.query_row("SELECT count(*) FROM server_credentials", [], |r| r.get(0))?;
        assert_eq!(rows, 0, "the row is removed");
        Ok(())
    })
    .await
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
        let text = asked_about_changed_code(&gate, &mut agent).await?;
        assert!(text.contains("revision=B"), "{text}");

        // Locking stops the server holding the credential.
        gate.cli(["lock"])?;
        wait_session(&gate, LABEL, "the holder stopped", |s| {
            s["state"] == "stopped"
        })
        .await?;
        agent.kill().await?;

        // Per-call approval for a tool the server did not offer (a typo) is set, but the CLI
        // warns, naming the tools the server offered when Postern last saw them.
        let typo = gate.cli_output(
            &["every-use", "on", "--server", LABEL, "--tool", "whoamii"],
            "",
        )?;
        let warning = String::from_utf8_lossy(&typo.stderr);
        assert!(typo.status.success(), "{typo:?}");
        assert!(
            warning.starts_with(
                "warning: 'rebuildable' did not offer a tool named 'whoamii' when Postern last saw its tools (it offered: "
            ) && (warning.contains(" whoami,") || warning.contains(" whoami)")),
            "{warning}"
        );
        let exact = gate.cli_output(
            &["every-use", "on", "--server", LABEL, "--tool", "whoami"],
            "",
        )?;
        assert!(exact.status.success(), "{exact:?}");
        assert_eq!(String::from_utf8_lossy(&exact.stderr), "", "a known tool");
        Ok(())
    })
    .await
}

/// The red team's recipe (2026-12-06): a person approved a server's launch for a credential;
/// the agent rewrites a module the entry imports from beside it (the entry itself byte for byte
/// the same, no `--identity` naming the module) and restarts the server, which takes no proof.
/// The new code is a new identity: its launch is not given the credential, and the card that
/// follows says the code changed since the approval.
#[tokio::test]
async fn a_module_rewritten_beside_an_approved_entry_gets_no_credential() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = Gate::start_prompting(&[]).await?;
    fixture.add(&gate, LABEL, &[], &["-B", "server.py"])?;
    add_fixture_token(&gate, &format!("{CANARY}\n"))?;
    gate.scenario(async {
        let mut agent = agent(&gate, LABEL).await?;
        agent.list_tools().await?;
        let (_, answer) = approved_call(&gate, &mut agent, "whoami", json!({}), "--run").await?;
        assert!(ok_text(&answer)?.contains("token=set"), "{answer}");
        let holding = wait_session(&gate, LABEL, "a launch holding the credential", |s| {
            s["credentials"]["released"] == json!(["fixture-token"])
        })
        .await?;

        // The agent's move: the entry stays, a module beside it changes, and a restart.
        let replaced = fixture.rebuild("dependency-2")?;
        assert_eq!(replaced, [fixture.lib().join("dependency.py")]);
        gate.cli(["server", "restart", LABEL])?;
        let relaunched = wait_session(&gate, LABEL, "the relaunch", |s| {
            ready(s) && epoch(s) != epoch(&holding)
        })
        .await?;
        assert_eq!(
            relaunched["execution"]["entry"], holding["execution"]["entry"],
            "the entry is the same: {relaunched}"
        );
        assert_ne!(
            relaunched["execution"]["identity"], holding["execution"]["identity"],
            "{relaunched}"
        );
        assert_eq!(
            relaunched["credentials"]["released"],
            json!([]),
            "{relaunched}"
        );
        assert_eq!(
            relaunched["credentials"]["withheld"],
            json!(["fixture-token"]),
            "{relaunched}"
        );
        assert_eq!(
            relaunched["credentials"]["reason"],
            "identity changed since approval"
        );
        let text = asked_about_changed_code(&gate, &mut agent).await?;
        assert!(text.contains("dependency=2"), "{text}");
        Ok(())
    })
    .await
}

/// Review 11, F1: a person approves "this call only" after the agent stopped waiting, on a
/// launch that lacks the credential the approval releases. The server restarts (here by a
/// command that takes no proof; a crash does the same): the first call on the launch that holds
/// the credential, its arguments other than the ones the person saw, waits for a person and
/// runs nothing. The identical retry goes through there, once.
#[tokio::test]
async fn a_late_approval_for_a_withheld_credential_lets_no_other_call_through() -> Result<()> {
    let fixture = Fixture::new()?;
    let gate = Gate::start_prompting(&[]).await?;
    fixture.add(&gate, LABEL, &[], &["-B", "server.py"])?;
    add_fixture_token(&gate, &format!("{CANARY}\n"))?;
    gate.cli([
        "every-use",
        "on",
        "--server",
        LABEL,
        "--tool",
        "publish_preview",
    ])?;
    let publish =
        |branch: &str| json!({"name": "publish_preview", "arguments": {"branch": branch}});
    gate.scenario(async {
        let mut agent = agent(&gate, LABEL).await?;
        agent.list_tools().await?;
        let first = wait_session(&gate, LABEL, "the first launch", ready).await?;
        assert_eq!(first["credentials"]["withheld"], json!(["fixture-token"]));

        let call = agent.start("tools/call", publish("main")).await?;
        let cards = wait_approvals(&gate)?;
        agent
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call}}))
            .await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        gate.cli(["approve", &card_id(&cards[0]), "--once"])?;
        gate.cli(["server", "restart", LABEL])?;
        wait_session(&gate, LABEL, "a launch holding the credential", |s| {
            ready(s)
                && epoch(s) != epoch(&first)
                && s["credentials"]["released"] == json!(["fixture-token"])
        })
        .await?;

        let other = agent.start("tools/call", publish("never-shown")).await?;
        let cards = wait_approvals(&gate)?;
        assert_eq!(cards.len(), 1, "{cards:?}");
        assert!(cards[0]["arguments"].to_string().contains("never-shown"), "{cards:?}");
        assert!(fixture.effects().is_empty(), "{:?}", fixture.effects());
        gate.cli(["deny", &card_id(&cards[0])])?;
        let refused = agent.response(&other).await?;
        assert_eq!(
            tool_error(&refused)?["error"],
            "approval_denied",
            "{refused}"
        );

        let retried = agent.request_next("tools/call", publish("main")).await?;
        assert!(ok_text(&retried)?.contains("published main"), "{retried}");
        assert_eq!(fixture.effects().len(), 1, "{:?}", fixture.effects());
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
            seen.push(gate.status().await?);
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
        [
            "audit-opening-key",
            "audit-anchor",
            "vault-key",
            "credential.api.v1"
        ],
        "{deleted}"
    );
    assert!(!deleted.contains("forget-me-value"));
    let again = gate.cli(["forget-keychain", "--yes"])?;
    assert!(again.starts_with("no keychain entries"), "{again}");
    Ok(())
}

/// Input that could never work is refused where it comes in, saying what is wrong and what to
/// give instead, and no refusal shows the value piped in: a URL or a wildcard as a host, a
/// header HTTP cannot carry or the client sets, a variable no shell can set or one that decides
/// which code runs, hosts on an env credential, a basic value without `user:`, a second
/// credential (or the server's own --env) for one variable, per-call approval for what does not
/// exist or was never on, settings out of range.
#[tokio::test]
async fn input_that_could_never_work_is_refused_with_what_to_do_instead() -> Result<()> {
    let gate = Gate::start_prompting(&[]).await?;
    // Fails with `expected` on stderr, exit 1, and never shows the value on stdin.
    let refused = |args: &[&str], expected: &str| -> Result<()> {
        let out = gate.cli_output(args, CANARY)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{args:?} was accepted: {stdout}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(
            !stderr.contains(CANARY) && !stdout.contains(CANARY),
            "{args:?} showed the value: {stderr}"
        );
        Ok(())
    };
    let header = |name| {
        [
            "--kind",
            "header",
            "--header",
            name,
            "--host",
            "api.github.com",
        ]
    };
    let env = |var| ["--kind", "env", "--env", var];
    for (rest, expected) in [
        (
            &["--kind", "bearer", "--host", "https://api.github.com/"][..],
            "postern: give the host alone, e.g. api.github.com, not a URL (\"https://api.github.com/\"): a credential goes to every path of its hosts",
        ),
        (
            &["--kind", "bearer", "--host", "*.github.com"],
            "postern: \"*.github.com\" has a wildcard, but a credential's hosts are matched exactly: name each host it may go to, e.g. api.github.com",
        ),
        (
            &["--kind", "bearer", "--host", "localhost:8443"],
            "postern: \"localhost:8443\" names this machine, which is two addresses (127.0.0.1 and ::1): another process of yours can listen on the one your service does not, on the same port. Name the address and port your service listens on, e.g. 127.0.0.1:8443",
        ),
        (
            &["--kind", "bearer", "--host", "127.0.0.1"],
            "postern: \"127.0.0.1\" is this machine, where any process of yours can listen on any port: name the port the credential may go to, e.g. 127.0.0.1:8080",
        ),
        (
            &header("Bad Header"),
            "postern: \"Bad Header\" is not an HTTP header name",
        ),
        (
            &header("Host"),
            "postern: the built-in http_request cannot send a credential as \"Host\"",
        ),
        (
            &env("BAD NAME"),
            "postern: \"BAD NAME\" is not an environment variable name: use letters, digits and '_', not starting with a digit (e.g. API_TOKEN)",
        ),
        (
            &env("LD_PRELOAD"),
            "postern: a credential cannot set LD_PRELOAD",
        ),
        (
            &[
                "--kind",
                "env",
                "--env",
                "GH_TOKEN",
                "--host",
                "https://example.com/",
            ],
            "postern: give the host alone, e.g. example.com, not a URL",
        ),
        (
            &["--kind", "basic", "--host", "api.github.com"],
            "postern: a basic credential's value is user:password, and this one has no ':' (the value is not shown)",
        ),
    ] {
        let mut args = vec!["credential", "add", "gh"];
        args.extend_from_slice(rest);
        refused(&args, expected)?;
    }
    assert!(
        gate.cli(["credential", "list"])?
            .starts_with("no credentials"),
        "nothing was added"
    );

    // Two sources for one variable at launch: refused, naming the other one.
    gate.cli([
        "server",
        "add",
        "plain",
        "--env",
        "PLAIN_TOKEN=x",
        "--",
        "python3",
        "-c",
        "pass",
    ])?;
    for (name, var) in [
        ("own", "PLAIN_TOKEN"),
        ("first", "OTHER_TOKEN"),
        ("second", "OTHER_TOKEN"),
    ] {
        gate.cli_with_stdin(
            &["credential", "add", name, "--kind", "env", "--env", var],
            CANARY,
        )?;
    }
    refused(
        &["server", "bind", "plain", "own"],
        "postern: credential 'own' sets PLAIN_TOKEN, which server 'plain' already sets in its own environment (--env)",
    )?;
    gate.cli(["server", "bind", "plain", "first"])?;
    refused(
        &["server", "bind", "plain", "second"],
        "postern: credential 'second' sets OTHER_TOKEN, which credential 'first' bound to 'plain' already sets; one would silently win at launch. Unbind it first (postern server unbind plain first) or give one of them another variable (variable_conflict)",
    )?;
    // Each refusal carries a stable code a script can match on.
    refused(
        &["server", "bind", "plain", "nosuch"],
        "postern: no credential named 'nosuch' (credential_not_found)",
    )?;
    refused(
        &["server", "bind", "nosuch", "first"],
        "postern: no server is configured as 'nosuch' (server_not_found)",
    )?;
    refused(
        &[
            "server",
            "add",
            "plain",
            "--env",
            "OTHER_TOKEN=y",
            "--",
            "python3",
            "-c",
            "pass",
        ],
        "postern: credential 'first' bound to 'plain' sets OTHER_TOKEN at launch",
    )?;

    // Per-call approval where it could never apply, or off where it was never on.
    refused(
        &["every-use", "on", "--server", "nosuch"],
        "postern: no server is configured as 'nosuch', so per-call approval there would never apply; the servers are: plain, postern",
    )?;
    refused(
        &["every-use", "on", "--credential", "nosuch"],
        "postern: no credential named 'nosuch', so per-call approval for it would never apply; the credentials are: first, own, second",
    )?;
    refused(
        &["every-use", "off", "--server", "plain"],
        "postern: per-call approval was not on for every tool of plain, so there is nothing to turn off; it is off everywhere",
    )?;
    let tool = gate.cli_output(
        &[
            "every-use",
            "on",
            "--server",
            "plain",
            "--tool",
            "nosuchtool",
        ],
        "",
    )?;
    assert!(tool.status.success(), "{tool:?}");
    assert_eq!(
        String::from_utf8_lossy(&tool.stderr),
        "warning: Postern has not seen the tools of 'plain' since the engine started, so it cannot check that 'nosuchtool' is one of them; per-call approval is on for it as typed\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&tool.stdout),
        "every use: tool nosuchtool of plain\n"
    );

    refused(
        &["settings", "--approval-timeout", "18446744073709551615"],
        "postern: the approval timeout must be between 1 second and 1 day (86400 seconds)",
    )?;
    refused(
        &["settings", "--auto-lock", "18446744073709551615"],
        "postern: the auto-lock time must be at most 1 week (10080 minutes); 0 turns it off",
    )?;
    let settings = gate.cli(["settings"])?;
    assert!(settings.contains("approval timeout: 120 s"), "{settings}");
    assert!(
        !gate.daemon_log().contains(CANARY),
        "the value reached the log"
    );
    Ok(())
}
