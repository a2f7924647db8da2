//! `postern mcp everything` against `@modelcontextprotocol/server-everything` (stdio), driven by
//! rmcp's client, and compared with the same client talking to the server directly.
//!
//! server-everything registers "conditional" tools right after `notifications/initialized`,
//! one `notifications/tools/list_changed` each, according to the client's declared
//! capabilities; then, 350 ms later, if the client declared roots, it sends `roots/list` and
//! logs the answer. So a session is "settled" once `roots/list` has been answered: every
//! list_changed came before it.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use postern_e2e::client::{ELICITED_NAME, SAMPLED_TEXT, call_params};
use postern_e2e::wire::Direction;
use postern_e2e::{Client, Gate, Profile, compare, servers};
use serde_json::{Value, json};

const LABEL: &str = "everything";
const ROOT: &str = "file:///tmp/postern-e2e-root";
const SETTLE: Duration = Duration::from_secs(20);

async fn gate() -> Result<Gate> {
    Gate::start(&[(LABEL, &servers::everything()?)]).await
}

/// Lists tools once (which also starts a lazily launched server), waits until the server's
/// post-initialization burst is over (it has asked for roots), and lists again.
async fn settled_tools(client: &Client) -> Result<Vec<Value>> {
    client.list_tools_raw().await?;
    client
        .wait_seen("the server's roots/list request", SETTLE, |s| {
            s.roots_requests >= 1
        })
        .await?;
    client.list_tools_raw().await
}

fn text_of(result: &rmcp::model::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_is_answered_by_postern_with_the_servers_capabilities() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let listed = gate.cli(["server", "list"])?;
        ensure!(
            listed.contains(LABEL),
            "`postern server list` does not show {LABEL}: {listed}"
        );

        let direct = Client::direct(&servers::everything()?, Profile::full(ROOT)).await?;
        let gated = Client::through(&gate, LABEL, Profile::full(ROOT)).await?;
        let d = direct.initialize_result()?;
        let g = gated.initialize_result()?;

        // The version the server negotiated and its own identity reach the agent as they are.
        ensure!(
            g["protocolVersion"] == d["protocolVersion"],
            "protocolVersion through Postern: {g} (server: {d})"
        );
        ensure!(
            g["serverInfo"] == d["serverInfo"],
            "serverInfo through Postern: {} (server: {})",
            g["serverInfo"],
            d["serverInfo"]
        );
        ensure!(
            g["capabilities"]["tools"]["listChanged"] == true,
            "Postern must advertise tools.listChanged: true; got {}",
            g["capabilities"]
        );
        let direct_caps = d["capabilities"]
            .as_object()
            .context("direct capabilities")?;
        ensure!(
            direct_caps.len() > 1,
            "server-everything declares several capabilities: {d}"
        );
        for (name, value) in direct_caps.iter().filter(|(name, _)| *name != "tools") {
            ensure!(
                g["capabilities"].get(name) == Some(value),
                "capability `{name}` of the server is {value} directly but {:?} through Postern \
                 (all: {})",
                g["capabilities"].get(name),
                g["capabilities"]
            );
        }
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_through_postern_is_the_servers_own_json() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let direct = Client::direct(&servers::everything()?, Profile::full(ROOT)).await?;
        let gated = Client::through(&gate, LABEL, Profile::full(ROOT)).await?;
        let direct_tools = settled_tools(&direct).await?;
        let gated_tools = settled_tools(&gated).await?;

        // The baseline has what the comparison is about, or the comparison proves nothing.
        ensure!(
            direct_tools.len() >= 16,
            "expected the conditional tools: {direct_tools:?}"
        );
        for tool in &direct_tools {
            ensure!(
                tool.get("execution").is_some(),
                "no execution field: {tool}"
            );
            ensure!(tool.get("annotations").is_some(), "no annotations: {tool}");
        }
        ensure!(
            direct_tools.iter().any(|t| t.get("outputSchema").is_some()),
            "no tool with an outputSchema"
        );

        compare::same_tools(&direct_tools, &gated_tools)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_through_postern_are_the_servers_own_json() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let direct = Client::direct(&servers::everything()?, Profile::bare()).await?;
        let gated = Client::through(&gate, LABEL, Profile::bare()).await?;
        let calls = [
            ("echo", json!({ "message": "héllo \"postern\"\n\u{1F600}" })),
            ("get-sum", json!({ "a": 2, "b": 40.5 })),
            ("get-structured-content", json!({ "location": "Chicago" })),
            ("get-tiny-image", json!({})),
            (
                "get-annotated-message",
                json!({ "messageType": "error", "includeImage": true }),
            ),
        ];
        for (tool, args) in calls {
            direct.call(tool, args.clone()).await?;
            gated.call(tool, args).await?;
            let d = direct.wire().last_call_result(tool)?;
            let g = gated.wire().last_call_result(tool)?;
            ensure!(
                d == g,
                "result of {tool} differs:\n  direct: {d}\n  gated:  {g}\n  {}",
                compare::field_diff(&d, &g)
            );
        }
        // The server ran confined (issue 16), its answers unchanged.
        if cfg!(target_os = "linux") {
            let sandbox = gate.sandbox_of(LABEL).await?;
            ensure!(sandbox["tool"] == "bubblewrap", "not confined: {sandbox}");
        }
        let structured = gated.wire().last_call_result("get-structured-content")?;
        ensure!(
            structured["structuredContent"]["temperature"].is_number(),
            "structuredContent lost: {structured}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_notifications_reach_the_agent_before_the_result() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let client = Client::through(&gate, LABEL, Profile::bare()).await?;
        let result = client
            .call(
                "trigger-long-running-operation",
                json!({ "duration": 2, "steps": 4 }),
            )
            .await?;
        ensure!(
            text_of(&result).contains("completed"),
            "unexpected result: {result:?}"
        );

        let (request, response) = client
            .wire()
            .exchanges("tools/call")
            .pop()
            .context("the call is on the wire")?;
        let response = response.context("the call's response is on the wire")?;
        let token = request
            .json
            .as_ref()
            .map(|j| j["params"]["_meta"]["progressToken"].clone());
        let token = token
            .filter(|t| !t.is_null())
            .context("rmcp sent a progressToken")?;
        let progress: Vec<_> = client
            .wire()
            .notifications("notifications/progress")
            .into_iter()
            .filter(|n| {
                n.json
                    .as_ref()
                    .is_some_and(|j| j["params"]["progressToken"] == token)
            })
            .collect();
        let values: Vec<f64> = progress
            .iter()
            .filter_map(|n| n.json.as_ref()?["params"]["progress"].as_f64())
            .collect();
        ensure!(
            values == [1.0, 2.0, 3.0, 4.0],
            "expected progress 1..4 for token {token}, got {values:?}; wire: {}",
            client.wire().summary()
        );
        ensure!(
            progress.iter().all(|n| n.at <= response.at),
            "a progress notification arrived after the result"
        );
        // rmcp's own dispatch saw them too.
        client
            .wait_seen("4 progress notifications in the handler", SETTLE, |s| {
                s.progress.len() >= 4
            })
            .await?;
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_gets_the_settled_catalog_without_the_servers_own_list_changed() -> Result<()> {
    // server-everything registers more tools right after initialization and says so with
    // notifications/tools/list_changed. Postern does not forward the server's notification: it
    // fetches the catalog itself, answers the agent's tools/list from it, and announces its own
    // list_changed only when the agent was shown something else.
    let gate = gate().await?;
    gate.scenario(async {
        let direct = Client::direct(&servers::everything()?, Profile::full(ROOT)).await?;
        let gated = Client::through(&gate, LABEL, Profile::full(ROOT)).await?;
        let settled = names(&settled_tools(&direct).await?);
        ensure!(
            direct.seen().tools_list_changed >= 1,
            "server-everything sent no list_changed directly"
        );
        let first = names(&gated.list_tools_raw().await?);
        gated
            .wait_seen("the server's roots/list request", SETTLE, |s| {
                s.roots_requests >= 1
            })
            .await?;
        if first != settled {
            gated
                .wait_seen("Postern's list_changed", SETTLE, |s| {
                    s.tools_list_changed >= 1
                })
                .await?;
        }
        let now = names(&gated.list_tools_raw().await?);
        ensure!(
            now == settled,
            "through Postern the agent lists {now:?}, directly {settled:?}\nwire: {}",
            gated.wire().summary()
        );
        Ok(())
    })
    .await
}

fn names(tools: &[Value]) -> Vec<String> {
    let mut names: Vec<String> = tools
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_is_answered_while_a_long_call_is_running() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let client = Client::through(&gate, LABEL, Profile::bare()).await?;
        let peer = client.peer().clone();
        let long = tokio::spawn(async move {
            peer.call_tool(call_params(
                "trigger-long-running-operation",
                json!({ "duration": 4, "steps": 4 }),
            )?)
            .await
            .map_err(anyhow::Error::from)
        });
        // The first progress notification proves the call is running at the server.
        client
            .wire()
            .wait_for("the long call's first progress", SETTLE, |lines| {
                lines.iter().any(|l| {
                    l.direction == Direction::Received
                        && l.method() == Some("notifications/progress")
                })
            })
            .await?;
        client.ping().await?;
        let call_answered = client
            .wire()
            .exchanges("tools/call")
            .pop()
            .is_some_and(|(_, response)| response.is_some());
        ensure!(
            !call_answered && !long.is_finished(),
            "the ping was only answered after the long call finished"
        );
        // The tap records a written line after the write returns; on a loaded machine the
        // answer can be read before the writer thread gets there, so wait for both lines.
        client
            .wire()
            .wait_for("the ping and its answer on the wire", SETTLE, |lines| {
                lines
                    .iter()
                    .any(|l| l.direction == Direction::Sent && l.method() == Some("ping"))
            })
            .await?;
        let (_, ping_response) = client
            .wire()
            .exchanges("ping")
            .pop()
            .context("ping on wire")?;
        ensure!(ping_response.is_some(), "ping response on the wire");

        let result = long.await??;
        ensure!(
            text_of(&result).contains("completed"),
            "long call result: {result:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_list_from_the_server_is_answered_by_the_agent() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let client = Client::through(&gate, LABEL, Profile::full(ROOT)).await?;
        settled_tools(&client).await?;
        let asked = client.wire().peer_exchanges("roots/list");
        ensure!(
            asked.iter().any(|(_, answer)| answer.is_some()),
            "roots/list was not answered on the wire: {}",
            client.wire().summary()
        );
        // The server got the answer: its tool reports the root the client gave.
        let result = client.call("get-roots-list", json!({})).await?;
        ensure!(
            text_of(&result).contains(ROOT),
            "the server does not know the client's root: {result:?}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampling_and_elicitation_requests_during_a_call_round_trip() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let client = Client::through(&gate, LABEL, Profile::full(ROOT)).await?;
        settled_tools(&client).await?;

        let sampled = client
            .call(
                "trigger-sampling-request",
                json!({ "prompt": "hello through postern" }),
            )
            .await?;
        ensure!(
            text_of(&sampled).contains(SAMPLED_TEXT),
            "sampling result: {sampled:?}"
        );
        let seen = client.seen();
        ensure!(
            seen.sampling_requests.len() == 1,
            "sampling requests: {seen:?}"
        );

        let elicited = client
            .call("trigger-elicitation-request", json!({}))
            .await?;
        ensure!(
            text_of(&elicited).contains(ELICITED_NAME),
            "elicitation result: {elicited:?}"
        );
        ensure!(client.seen().elicitations.len() == 1, "one elicitation");
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_agent_connection_has_its_own_server_and_outlives_the_others() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let first_root = "file:///tmp/postern-e2e-first";
        let second_root = "file:///tmp/postern-e2e-second";
        let first = Client::through(&gate, LABEL, Profile::full(first_root)).await?;
        let second = Client::through(&gate, LABEL, Profile::full(second_root)).await?;
        settled_tools(&first).await?;
        settled_tools(&second).await?;

        // server-everything keeps roots per process: each agent sees only its own.
        let roots_of = |result: &rmcp::model::CallToolResult| text_of(result);
        let a = roots_of(&first.call("get-roots-list", json!({})).await?);
        let b = roots_of(&second.call("get-roots-list", json!({})).await?);
        ensure!(
            a.contains(first_root) && !a.contains(second_root),
            "first sees: {a}"
        );
        ensure!(
            b.contains(second_root) && !b.contains(first_root),
            "second sees: {b}"
        );

        // An agent that quits closes its stdin; its shim exits, and the other session is fine.
        first
            .close(Duration::from_secs(10))
            .await
            .context("`postern mcp` must exit when the agent closes its stdin")?;
        second.ping().await?;
        let echoed = second
            .call("echo", json!({ "message": "still here" }))
            .await?;
        ensure!(text_of(&echoed).contains("still here"), "echo: {echoed:?}");
        Ok(())
    })
    .await
}
