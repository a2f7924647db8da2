//! `postern mcp time` against `mcp-server-time` (PyPI, Python MCP SDK, a dual-era server run
//! in its legacy mode), driven by rmcp's client, and compared with the same client talking to
//! the server directly.

use anyhow::{Context, Result, ensure};
use postern_e2e::{Client, Gate, Profile, compare, servers};
use serde_json::{Value, json};

const LABEL: &str = "time";

async fn gate() -> Result<Gate> {
    Gate::start(&[(LABEL, &servers::time()?)]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_through_postern_advertises_list_changed() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let direct = Client::direct(&servers::time()?, Profile::bare()).await?;
        let gated = Client::through(&gate, LABEL, Profile::bare()).await?;
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
        // The server itself does not claim listChanged; Postern does, because its own view of
        // the catalog can change (and Claude Code only listens when it is advertised).
        ensure!(
            g["capabilities"]["tools"]["listChanged"] == true,
            "Postern must advertise tools.listChanged: true; got {} (server: {})",
            g["capabilities"],
            d["capabilities"]
        );
        ensure!(
            d["capabilities"]["tools"].is_object(),
            "the server declares tools: {d}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_through_postern_is_the_servers_own_json() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let direct = Client::direct(&servers::time()?, Profile::bare()).await?;
        let gated = Client::through(&gate, LABEL, Profile::bare()).await?;
        let direct_tools = direct.list_tools_raw().await?;
        let gated_tools = gated.list_tools_raw().await?;

        let names: Vec<&str> = direct_tools
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        ensure!(
            names.contains(&"get_current_time") && names.contains(&"convert_time"),
            "unexpected baseline tools: {names:?}"
        );
        for tool in &direct_tools {
            ensure!(
                tool.get("outputSchema").is_some(),
                "no outputSchema: {tool}"
            );
            ensure!(tool.get("annotations").is_some(), "no annotations: {tool}");
        }
        compare::same_tools(&direct_tools, &gated_tools)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_current_time_returns_structured_content_through_postern() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let direct = Client::direct(&servers::time()?, Profile::bare()).await?;
        let gated = Client::through(&gate, LABEL, Profile::bare()).await?;

        let result = gated
            .call("get_current_time", json!({ "timezone": "UTC" }))
            .await?;
        ensure!(result.is_error != Some(true), "the call failed: {result:?}");
        let structured = result
            .structured_content
            .clone()
            .context("get_current_time returned no structuredContent through Postern")?;
        ensure!(
            structured["timezone"] == "UTC",
            "structuredContent: {structured}"
        );
        // The server ran confined (issue 16), its answers unchanged.
        if cfg!(target_os = "linux") {
            let sandbox = gate.sandbox_of(LABEL).await?;
            ensure!(sandbox["tool"] == "bubblewrap", "not confined: {sandbox}");
        }
        let datetime = structured["datetime"].as_str().unwrap_or_default();
        ensure!(
            datetime.ends_with("+00:00"),
            "not a UTC datetime: {structured}"
        );
        ensure!(
            structured["is_dst"] == false,
            "UTC has no DST: {structured}"
        );

        // What rmcp parsed is what came off the wire, and the text block mirrors it.
        let raw = gated.wire().last_call_result("get_current_time")?;
        ensure!(raw["structuredContent"] == structured, "raw result: {raw}");
        let text = raw["content"][0]["text"].as_str().context("a text block")?;
        let mirrored: Value = serde_json::from_str(text).context("the text block is JSON")?;
        ensure!(
            mirrored == structured,
            "text block {text} != structuredContent {structured}"
        );

        // Same shape as the server gives directly (the values are the time, so they move).
        direct
            .call("get_current_time", json!({ "timezone": "UTC" }))
            .await?;
        let direct_raw = direct.wire().last_call_result("get_current_time")?;
        let keys = |v: &Value| -> Vec<String> {
            v.as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        };
        ensure!(
            keys(&direct_raw) == keys(&raw)
                && keys(&direct_raw["structuredContent"]) == keys(&raw["structuredContent"]),
            "result shape differs:\n  direct: {direct_raw}\n  gated:  {raw}"
        );
        Ok(())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_and_errors_through_postern() -> Result<()> {
    let gate = gate().await?;
    gate.scenario(async {
        let direct = Client::direct(&servers::time()?, Profile::bare()).await?;
        let gated = Client::through(&gate, LABEL, Profile::bare()).await?;
        gated.ping().await?;

        // The Python SDK answers an unknown tool with a JSON-RPC error. Postern does not
        // forward such a call at all: a server may handle tools it does not list, and a call
        // to one would bypass every approval. The agent gets a tool error, `unknown_tool`.
        let d = direct
            .call_expecting_error("no_such_tool", json!({}))
            .await?;
        ensure!(d.code.0 == -32602, "baseline: {d:?}");
        let g = gated.call("no_such_tool", json!({})).await?;
        ensure!(g.is_error == Some(true), "{g:?}");
        ensure!(
            g.structured_content
                .as_ref()
                .is_some_and(|s| s["error"] == "unknown_tool" && s["tool"] == "no_such_tool"),
            "{g:?}"
        );

        // A tool error is a result with isError, carried unchanged.
        let args = json!({ "timezone": "Not/A_Zone" });
        let bad = gated.call("get_current_time", args.clone()).await?;
        ensure!(
            bad.is_error == Some(true),
            "an invalid zone is a tool error: {bad:?}"
        );
        direct.call("get_current_time", args).await?;
        let d = direct.wire().last_call_result("get_current_time")?;
        let g = gated.wire().last_call_result("get_current_time")?;
        ensure!(d == g, "tool error differs:\n  direct: {d}\n  gated:  {g}");

        gated.ping().await?;
        Ok(())
    })
    .await
}
