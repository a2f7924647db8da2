//! The gate forwards exactly what it decided, and decides every request that reaches the
//! server (issue 12): the server under test reads stdin with Python's universal newlines, so
//! it splits a line on `\r` as the MCP Python SDK does.

use postern_domain::decision::Denial;
use serde_json::json;

use super::{Agent, HandGate, lock, rpc_error};
use crate::authorize::Direction;
use crate::authorize::Verdict;
use crate::registry::Phase;
use postern_domain::decision::Authority;

/// A request to the server the gate forwards without a decision, answered: everything the
/// session wrote to the server before it has been read by then.
async fn round_trip(agent: &mut Agent, id: &str) {
    let answer = agent.request(json!(id), "resources/list", json!({})).await;
    assert_eq!(answer["result"], json!({}), "{answer}");
}

#[tokio::test]
async fn a_tool_call_smuggled_behind_a_carriage_return_never_reaches_the_server() {
    let mut agent = Agent::ready(HandGate::default()).await;
    let hidden = r#"{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"echo","arguments":{"text":"smuggled"}}}"#;
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"resources/list\",\"params\":{{\"x\":\r{hidden}\r}}}}"
    );
    let offset = line.find('\r').expect("a CR");
    agent.send_raw(&line).await;

    let answer = agent.next().await;
    assert_eq!(answer["id"], "s1", "{answer}");
    let (code, message) = rpc_error(&answer);
    assert_eq!(code, -32600, "{answer}");
    assert!(
        message.contains("carriage return") && message.contains(&format!("offset {offset}")),
        "{message}"
    );
    round_trip(&mut agent, "after").await;
    let received = agent.server_received();
    assert!(
        !received.contains(&"tools/call".to_owned()),
        "the server ran the hidden call: {received:?}"
    );
    assert!(
        lock(&agent.gate.asked).is_empty(),
        "nothing was put to the gate"
    );
}

#[tokio::test]
async fn the_agent_s_tools_list_is_the_checked_catalog_and_never_reaches_the_server() {
    let mut agent = Agent::ready(HandGate::default()).await;
    for id in ["again", "and again"] {
        let listed = agent.request(json!(id), "tools/list", json!({})).await;
        assert_eq!(
            listed["result"],
            json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
            "{listed}"
        );
    }
    let paged = agent
        .request(json!("paged"), "tools/list", json!({"cursor": "2"}))
        .await;
    assert_eq!(rpc_error(&paged).0, -32602, "{paged}");
    round_trip(&mut agent, "after").await;

    // One tools/list reached the server: the gate's own fetch, under an id nobody could guess.
    let lists: Vec<_> = agent
        .server_messages()
        .into_iter()
        .filter(|m| m["method"] == "tools/list")
        .collect();
    assert_eq!(lists.len(), 1, "{lists:?}");
    let id = lists[0]["id"].as_str().expect("a string id");
    let suffix = id
        .strip_prefix("postern-catalog-")
        .expect("the gate's prefix");
    assert_eq!(suffix.len(), 26, "a ULID: {id}");
}

#[tokio::test]
async fn requests_without_an_id_and_unknown_methods_never_reach_the_server() {
    let mut agent = Agent::ready(HandGate::default()).await;
    agent
        .send(json!({"jsonrpc": "2.0", "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "no id"}}}))
        .await;
    let unknown = agent
        .request(json!("u"), "vendor/frobnicate", json!({}))
        .await;
    let (code, message) = rpc_error(&unknown);
    assert_eq!(code, -32601, "{unknown}");
    assert!(
        message.contains("--pass-method vendor/frobnicate"),
        "{message}"
    );
    round_trip(&mut agent, "after").await;

    let methods: Vec<_> = agent
        .server_messages()
        .iter()
        .filter_map(|m| m["method"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !methods
            .iter()
            .any(|m| m == "tools/call" || m == "vendor/frobnicate"),
        "{methods:?}"
    );
    assert!(lock(&agent.gate.asked).is_empty());
}

#[tokio::test]
async fn a_method_the_server_s_configuration_passes_is_decided_then_forwarded() {
    let mut agent = Agent::connect_passing(HandGate::default(), false, &["vendor/search"]);
    agent.handshake().await;
    let answer = agent
        .request(json!(1), "vendor/search", json!({"q": "x"}))
        .await;
    assert_eq!(answer["result"], json!({}), "{answer}");
    let asked = lock(&agent.gate.operations).clone();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(
        (asked[0].method.as_str(), asked[0].direction),
        ("vendor/search", Direction::ToServer)
    );
    assert!(
        agent
            .server_received()
            .contains(&"vendor/search".to_owned())
    );
}

#[tokio::test]
async fn reads_and_prompts_are_decided_and_a_refusal_never_reaches_the_server() {
    let mut agent = Agent::ready(HandGate::default()).await;
    *lock(&agent.gate.refuse_operations) = Some(Denial::vault_locked());
    for (id, method, params) in [
        ("r", "resources/read", json!({"uri": "file:///etc/passwd"})),
        ("p", "prompts/get", json!({"name": "greet"})),
        (
            "c",
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "greet"}}),
        ),
    ] {
        let answer = agent.request(json!(id), method, params).await;
        let (code, _) = rpc_error(&answer);
        assert_eq!(code, -32603, "{answer}");
        assert_eq!(answer["error"]["data"]["error"], "vault_locked", "{answer}");
    }
    round_trip(&mut agent, "after").await;
    let received = agent.server_received();
    assert!(
        !received
            .iter()
            .any(|m| ["resources/read", "prompts/get", "completion/complete"].contains(&m.as_str())),
        "{received:?}"
    );

    // Unlocked: the same read goes through, decided once more.
    *lock(&agent.gate.refuse_operations) = None;
    let read = agent
        .request(
            json!("r2"),
            "resources/read",
            json!({"uri": "file:///tmp/x"}),
        )
        .await;
    assert_eq!(read["result"], json!({}), "{read}");
    assert!(
        agent
            .server_received()
            .contains(&"resources/read".to_owned())
    );
    let methods: Vec<_> = lock(&agent.gate.operations)
        .iter()
        .map(|o| o.method.clone())
        .collect();
    assert_eq!(
        methods,
        [
            "resources/read",
            "prompts/get",
            "completion/complete",
            "resources/read"
        ]
    );
}

#[tokio::test]
async fn a_task_of_an_ended_epoch_is_failed_and_never_reaches_the_new_code() {
    let mut agent = Agent::ready(HandGate::default()).await;
    agent
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "slow"}, "task": {"ttl": 60000}}}))
        .await;
    let (_, done) = agent.gate.decided().await;
    done(Verdict::Allow(Authority::Observed));
    let created = agent.next().await;
    assert_eq!(created["result"]["task"]["taskId"], "task-5", "{created}");

    // The task's own epoch: polls go through.
    let polled = agent
        .request(json!("g1"), "tasks/get", json!({"taskId": "task-5"}))
        .await;
    assert_eq!(polled["result"], json!({}), "{polled}");
    // A task no call of this session created is nobody's to ask about.
    let stranger = agent
        .request(json!("g2"), "tasks/get", json!({"taskId": "task-1"}))
        .await;
    assert_eq!(rpc_error(&stranger).0, -32602, "{stranger}");

    agent.restart();
    let status = agent.next().await;
    assert_eq!(status["method"], "notifications/tasks/status", "{status}");
    assert_eq!(status["params"]["taskId"], "task-5");
    assert_eq!(status["params"]["status"], "failed");
    let result = agent
        .request(json!("r"), "tasks/result", json!({"taskId": "task-5"}))
        .await;
    let (code, message) = rpc_error(&result);
    assert_eq!(code, -32603, "{result}");
    assert_eq!(
        result["error"]["data"]["error"], "epoch_transition",
        "{result}"
    );
    assert!(message.contains("task-5"), "{message}");

    round_trip(&mut agent, "after").await;
    let polls: Vec<_> = agent
        .server_messages()
        .into_iter()
        .filter(|m| {
            m["method"]
                .as_str()
                .is_some_and(|m| m.starts_with("tasks/"))
        })
        .collect();
    assert_eq!(
        polls.len(),
        1,
        "only the poll of epoch A reached a server: {polls:?}"
    );
}

/// The session's state is derived from the upstream's own: while the gate refetches a catalog
/// the server said changed, status says so and requests wait for it.
#[tokio::test]
async fn while_the_gate_refetches_a_changed_catalog_status_says_so_and_requests_wait() {
    let mut agent = Agent::start(HandGate::default(), Some("mute-relist"), &[]);
    agent.handshake().await;
    let listed = agent.request(json!("list"), "tools/list", json!({})).await;
    assert_eq!(listed["result"]["tools"][0]["name"], "echo", "{listed}");
    agent
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"announce": true}}}))
        .await;
    let (_, done) = agent.gate.decided().await;
    done(Verdict::Allow(Authority::Observed));
    let answered = agent.next().await;
    assert_eq!(answered["id"], 1, "{answered}");
    // The server's list_changed is not forwarded; the gate refetches (and this server never
    // answers a second tools/list).
    agent.wait_phase(Phase::CatalogRefreshing).await;
    agent.start_call(json!(2)).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        lock(&agent.gate.asked).len(),
        1,
        "the call waits for the catalog"
    );
    assert_eq!(
        agent.sessions.snapshot().first().map(|s| s.phase),
        Some(Phase::CatalogRefreshing)
    );
}

/// A rebuild that keeps its catalog is news to the agent (issue 14): it is told with
/// `list_changed`; and a client that never re-lists is refused as stale once, after which its
/// calls are decided against the new epoch.
#[tokio::test]
async fn a_new_epoch_is_announced_and_a_session_is_refused_as_stale_at_most_once() {
    let mut agent = Agent::ready(HandGate::default()).await;
    agent.restart();
    let told = agent.next().await;
    assert_eq!(told["method"], "notifications/tools/list_changed", "{told}");

    // The agent does not re-list: its first call was prepared against the old code.
    agent.start_call(json!(1)).await;
    let (first, done) = agent.gate.decided().await;
    let presented = first.request.catalog.presented.expect("shown a catalog");
    assert_ne!(
        presented.epoch, first.request.epoch,
        "shown by the old epoch"
    );
    done(Verdict::Deny(Denial::authorization_stale(
        presented.epoch,
        first.request.epoch,
    )));
    let refused = agent.next().await;
    assert_eq!(
        refused["result"]["structuredContent"]["error"],
        "authorization_stale"
    );
    let again = agent.next().await;
    assert_eq!(
        again["method"], "notifications/tools/list_changed",
        "{again}"
    );

    // Still without re-listing, the next call is decided against the new epoch.
    agent.start_call(json!(2)).await;
    let (second, _done) = agent.gate.decided().await;
    let presented = second
        .request
        .catalog
        .presented
        .expect("told by the refusal");
    assert_eq!(presented.epoch, second.request.epoch);
}

/// A call waiting for a human keeps a client that resets its timeout on progress waiting
/// (issue 14): with a `progressToken`, the agent hears why it waits, until the verdict.
#[tokio::test]
async fn a_call_waiting_for_a_human_sends_progress_while_it_waits() {
    let mut agent = Agent::ready(HandGate::default()).await;
    agent
        .send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"text": "hi"},
                                "_meta": {"progressToken": "p9"}}}))
        .await;
    let first = agent.next().await;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    assert_eq!(first["params"]["progressToken"], "p9");
    assert_eq!(first["params"]["progress"], 1);
    let message = first["params"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("waiting for a person"), "{message}");
    let second = agent.next().await;
    assert_eq!(second["params"]["progress"], 2, "{second}");

    let (_, done) = agent.gate.decided().await;
    done(Verdict::Allow(Authority::Observed));
    loop {
        let line = agent.next().await;
        if line.get("id").is_some() {
            assert_eq!(line["id"], 9, "{line}");
            assert!(line["result"]["content"].is_array(), "{line}");
            break;
        }
    }
}

/// A request the agent cancelled keeps its id until the server answers it: its late answer can
/// never be taken for the answer to a request that reuses the id.
#[tokio::test]
async fn a_cancelled_request_s_late_answer_never_answers_another_request() {
    let mut agent = Agent::ready(HandGate::default()).await;
    agent
        .send(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                     "params": {"name": "echo", "arguments": {"mute": true}}}))
        .await;
    let (_, done) = agent.gate.decided().await;
    done(Verdict::Allow(Authority::Observed));
    super::within("the call to reach the server", async {
        while !agent.server_received().contains(&"tools/call".to_owned()) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
    agent
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 9}}),
        )
        .await;
    // Reusing the id (as "9", which a Python or TypeScript server takes for 9) is refused
    // while the server may still answer the first.
    let reused = agent.request(json!("9"), "resources/list", json!({})).await;
    assert_eq!(rpc_error(&reused).0, -32600, "{reused}");
    assert!(rpc_error(&reused).1.contains("already in use"), "{reused}");
}

/// A server that pages its tools without end cannot keep the session's requests held: the
/// gate stops at its page limit and the catalog is what came.
#[tokio::test]
async fn a_catalog_that_pages_without_end_is_cut_at_the_limit() {
    let mut agent = Agent::start(HandGate::default(), Some("endless-pages"), &[]);
    agent.handshake().await;
    let listed = agent.request(json!("list"), "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 100, "one tool per page, 100 pages");
    assert_eq!(
        agent.sessions.snapshot().first().map(|s| s.phase),
        Some(Phase::CatalogReady)
    );
}
