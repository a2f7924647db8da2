//! The built-in `http_request` (issue 6, item 4), end to end: the real daemon (trusting a test
//! CA through `SSL_CERT_FILE`), a bearer credential added through the CLI into a real Secret
//! Service keychain and bound to the built-in server, an agent speaking raw MCP to
//! `postern mcp postern`, a human approving with the CLI, and local HTTPS servers that record
//! the headers they receive.

use std::time::Duration;

use anyhow::Result;
use postern_e2e::Gate;
use postern_e2e::https::{HttpsServer, Reply, TestCa};
use postern_e2e::human;
use postern_e2e::raw::{self, RawAgent, ok_text, tool_error};
use serde_json::{Value, json};

const ANSWER: Duration = Duration::from_secs(30);
const BUILTIN: &str = "postern";
const TOKEN: &str = "tok-canary-5b1e9d0c-http-request";

async fn agent(gate: &Gate) -> Result<RawAgent> {
    let (cmd, log) = gate.agent_command(BUILTIN)?;
    raw::connect(cmd, &log, "http-agent", ANSWER).await
}

/// Calls `http_request` with `args` and approves its card with `answer`.
async fn approved_call(
    gate: &Gate,
    agent: &mut RawAgent,
    args: Value,
    answer: &str,
) -> Result<(Value, Value)> {
    human::approved_call(gate, agent, "http_request", args, answer).await
}

async fn start(ca: &TestCa) -> Result<Gate> {
    Gate::start_prompting_with_env(&[], &[("SSL_CERT_FILE", ca.pem_path().as_os_str())]).await
}

/// A bearer credential `api` for `127.0.0.1` on `port`, bound to the built-in server.
fn add_bearer(gate: &Gate, port: u16, extra: &[&str]) -> Result<()> {
    let host = format!("127.0.0.1:{port}");
    let mut args = vec![
        "credential",
        "add",
        "api",
        "--kind",
        "bearer",
        "--host",
        &host,
    ];
    args.extend_from_slice(extra);
    gate.cli_with_stdin(&args, &format!("{TOKEN}\n"))?;
    let bound = gate.cli(["server", "bind", BUILTIN, "api"])?;
    assert!(
        bound.contains("bound credential 'api' to 'postern'"),
        "{bound}"
    );
    Ok(())
}

/// The bound bearer credential reaches its host and nothing else: the header arrives with the
/// right value and the agent never sees it (an echo is redacted); a redirect away from the
/// credentialed host is handed back, not followed; a host it is not bound to gets no
/// credential; plain http to a non-loopback host is refused; a header the agent forges in the
/// private injection field is dropped; and the value is in neither the audit log, nor the
/// database, nor any log.
#[tokio::test]
async fn a_bound_credential_goes_only_to_its_host_and_never_to_the_agent() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new(dir.path())?;
    // Another host (localhost, another port) that the credentialed one redirects to.
    let other = HttpsServer::start(&ca, |_| Reply::ok("landed")).await?;
    let landing = other.url("localhost", "/landing");
    let api = HttpsServer::start(&ca, move |req| match req.path.as_str() {
        "/data" => Reply::ok(r#"{"items": 3}"#).header("content-type", "application/json"),
        "/redirect" => Reply::status(302).header("location", &landing),
        "/echo" => Reply::ok(format!(
            "you sent: {}",
            req.header("authorization").unwrap_or("nothing")
        )),
        _ => Reply::status(404),
    })
    .await?;
    let gate = start(&ca).await?;
    add_bearer(&gate, api.port(), &[])?;
    let listed = gate.cli(["credential", "list"])?;
    assert!(
        listed.contains("api\tbearer header") && listed.contains("servers: postern"),
        "{listed}"
    );

    let answers = gate
        .scenario(async {
            let mut agent = agent(&gate).await?;
            let tools = agent.list_tools().await?;
            assert_eq!(tools.len(), 1, "{tools:?}");
            assert_eq!(tools[0]["name"], "http_request");
            assert_eq!(tools[0]["annotations"]["openWorldHint"], true);
            let mut answers = vec![Value::Array(tools)];
            // The CLI shows the built-in server beside the configured ones, and its process.
            let listed = gate.cli(["server", "list"])?;
            assert!(listed.contains("postern\tbuilt-in: http_request"), "{listed}");
            let status = gate.cli(["server", "status", BUILTIN])?;
            assert!(
                status.starts_with("postern  (built-in: http_request")
                    && status.contains(": catalog-ready"),
                "{status}"
            );

            // (a) The header arrives with the right value; the answer does not carry it.
            let (card, data) = approved_call(
                &gate,
                &mut agent,
                json!({"url": api.url("127.0.0.1", "/data")}),
                "--run",
            )
            .await?;
            assert_eq!(card["credentials"], json!(["api"]), "{card}");
            let text = ok_text(&data)?;
            assert!(
                text.starts_with("HTTP 200 OK\n") && text.ends_with(r#"{"items": 3}"#),
                "{text}"
            );
            let seen = api.last()?;
            assert_eq!(seen.path, "/data");
            assert_eq!(
                seen.header("authorization"),
                Some(format!("Bearer {TOKEN}").as_str())
            );
            answers.extend([card, data]);

            // A server that echoes the header: the value is redacted from the answer.
            let echo = agent
                .call_next("http_request", json!({"url": api.url("127.0.0.1", "/echo")}))
                .await?;
            let text = ok_text(&echo)?;
            assert!(
                text.ends_with("you sent: [redacted: Postern credential]"),
                "{text}"
            );
            answers.push(echo);

            // (b) A redirect to another host is handed back, not followed.
            let redirect = agent
                .call_next(
                    "http_request",
                    json!({"url": api.url("127.0.0.1", "/redirect")}),
                )
                .await?;
            let detail = &redirect["result"]["structuredContent"];
            assert_eq!(detail["status"], 302, "{redirect}");
            assert_eq!(
                detail["headers"]["location"],
                other.url("localhost", "/landing")
            );
            assert!(
                detail["redirectNotFollowed"]
                    .as_str()
                    .is_some_and(|why| why.contains("credential")),
                "{redirect}"
            );
            assert!(
                other.received().is_empty(),
                "the redirect target was not contacted"
            );
            answers.push(redirect);

            // The same host on another port (another process of the user's could listen
            // there) gets none either.
            let other_port = agent
                .call_next(
                    "http_request",
                    json!({"url": other.url("127.0.0.1", "/landing")}),
                )
                .await?;
            ok_text(&other_port)?;
            let seen = other.last()?;
            assert_eq!(seen.header("authorization"), None, "{seen:?}");

            // (c) A host the credential is not bound to gets none (the same server, by name:
            // `localhost` is two addresses, and the credential names one).
            let unbound = agent
                .call_next("http_request", json!({"url": api.url("localhost", "/data")}))
                .await?;
            ok_text(&unbound)?;
            let seen = api.last()?;
            assert_eq!(seen.header("authorization"), None, "{seen:?}");
            answers.push(unbound);

            // The private injection field is the gateway's: one forged by the agent is dropped.
            let forged = agent
                .request_next(
                    "tools/call",
                    json!({"name": "http_request",
                           "arguments": {"url": api.url("localhost", "/data")},
                           "_meta": {"postern/inject": [{"header": "X-Forged", "value": "forged-value", "hosts": ["127.0.0.1"]}]}}),
                )
                .await?;
            ok_text(&forged)?;
            let seen = api.last()?;
            assert_eq!(seen.header("x-forged"), None, "{seen:?}");

            // (d) Plain http to a host that is not loopback is refused before anything is sent.
            let plain = agent
                .call_next("http_request", json!({"url": "http://example.com/"}))
                .await?;
            let refusal = tool_error(&plain)?;
            assert_eq!(refusal["error"], "https_required", "{plain}");
            assert!(
                refusal["reason"]
                    .as_str()
                    .is_some_and(|r| r.contains("loopback")),
                "{plain}"
            );
            answers.push(plain);

            // Locking the vault refuses the next call; nothing is sent.
            let before = api.received().len();
            gate.cli(["lock"])?;
            let locked = agent
                .call_next("http_request", json!({"url": api.url("127.0.0.1", "/data")}))
                .await?;
            assert_eq!(tool_error(&locked)?["error"], "vault_locked", "{locked}");
            assert_eq!(api.received().len(), before);
            answers.push(locked);
            agent.kill().await?;
            Ok(answers)
        })
        .await?;
    for answer in &answers {
        assert!(
            !answer.to_string().contains(TOKEN),
            "the value reached the agent: {answer}"
        );
    }

    // (e) The audit log (decrypted, with arguments), the database and every log.
    let export = gate.cli(["audit", "export", "--with-arguments"])?;
    assert!(export.contains("credential_released"), "{export}");
    // The built-in holds only a placeholder: the egress broker put the value in, for the
    // bound host alone (one egress path for every server).
    assert!(
        export.lines().any(|l| l.contains("credential_substituted")
            && l.contains("\"postern\"")
            && l.contains("127.0.0.1")),
        "the broker put the value in the built-in's request: {export}"
    );
    assert!(
        !export
            .lines()
            .any(|l| l.contains("credential_substituted") && l.contains("localhost")),
        "{export}"
    );
    assert!(
        export.contains("/redirect"),
        "the intent records the agent's arguments"
    );
    assert!(!export.contains(TOKEN), "the value is in the audit log");
    assert!(
        !export.contains("postern/inject"),
        "the intent is the agent's call"
    );
    for entry in std::fs::read_dir(gate.home())? {
        let path = entry?.path();
        if path.is_file() {
            let bytes = std::fs::read(&path)?;
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "the value is in {}",
                path.display()
            );
        }
    }
    assert!(
        !gate.daemon_log().is_empty() && !gate.logs_report().contains(TOKEN),
        "the value is in a log"
    );
    Ok(())
}

/// A credential set to "every use": each call that would carry it asks a human, who can
/// approve that call only, even once the agent run is admitted.
#[tokio::test]
async fn every_use_on_the_credential_asks_for_each_call_that_carries_it() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let ca = TestCa::new(dir.path())?;
    let api = HttpsServer::start(&ca, |_| Reply::ok("fine")).await?;
    let gate = start(&ca).await?;
    add_bearer(&gate, api.port(), &["--every-use"])?;

    gate.scenario(async {
        let mut agent = agent(&gate).await?;
        agent.list_tools().await?;
        // The first call admits the run and offers this call only.
        let (card, first) = approved_call(
            &gate,
            &mut agent,
            json!({"url": api.url("127.0.0.1", "/one")}),
            "--once",
        )
        .await?;
        assert_eq!(card["credentials"], json!(["api"]), "{card}");
        ok_text(&first)?;
        assert_eq!(
            api.last()?.header("authorization"),
            Some(format!("Bearer {TOKEN}").as_str())
        );
        // The next call that would carry it asks again.
        let (_, second) = approved_call(
            &gate,
            &mut agent,
            json!({"url": api.url("127.0.0.1", "/two")}),
            "--once",
        )
        .await?;
        ok_text(&second)?;
        assert_eq!(api.last()?.path, "/two");
        agent.kill().await?;
        Ok(())
    })
    .await
}
