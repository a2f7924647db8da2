//! Tasks follow their epoch (issue 12, item 4), on server-everything's task tool
//! (`simulate-research-query`, MCP 2025-11-25 tasks): a task created by a call in epoch A is
//! polled through the gate while A runs; after a restart the agent is told it failed, and a
//! later `tasks/result` or `tasks/get` for it gets the epoch-transition error from the gate,
//! never an answer from epoch B's code. Activity shows the call under epoch A, ended by the
//! transition.

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use postern_e2e::human::{activity, epoch, ready, wait_session};
use postern_e2e::raw::{self, RawAgent};
use postern_e2e::{Gate, servers};
use serde_json::{Value, json};

const EVERYTHING: &str = "everything";
const TASK_TOOL: &str = "simulate-research-query";
const ANSWER: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_task_created_in_one_epoch_is_never_polled_in_the_next() -> Result<()> {
    let gate = Gate::start(&[(EVERYTHING, &servers::everything()?)]).await?;
    gate.scenario(async {
        let (cmd, log) = gate.mcp_command(EVERYTHING)?;
        let mut agent = raw::connect(cmd, &log, "tasks-test", ANSWER).await?;
        wait_for_tool(&mut agent, TASK_TOOL).await?;
        let before = epoch(&wait_session(&gate, EVERYTHING, "a ready server", ready).await?);

        let created = agent
            .request_next(
                "tools/call",
                json!({"name": TASK_TOOL, "arguments": {"topic": "epochs"}, "task": {"ttl": 60000}}),
            )
            .await?;
        let task_id = created["result"]["task"]["taskId"]
            .as_str()
            .with_context(|| format!("the call did not create a task: {created}"))?
            .to_owned();
        let polled = agent
            .request_next("tasks/get", json!({"taskId": task_id}))
            .await?;
        ensure!(
            polled["result"]["taskId"] == task_id.as_str(),
            "epoch A's code answers for its task: {polled}"
        );

        gate.cli(["server", "restart", EVERYTHING])?;
        let failed = agent
            .wait_for("the task's failed status", |m| {
                m["method"] == "notifications/tasks/status"
                    && m["params"]["taskId"] == task_id.as_str()
                    && m["params"]["status"] == "failed"
            })
            .await?;
        let says = failed["params"]["statusMessage"].as_str().unwrap_or_default();
        ensure!(says.contains("epoch ended"), "{failed}");
        let after = epoch(
            &wait_session(&gate, EVERYTHING, "the new epoch", |s| {
                ready(s) && epoch(s) != before
            })
            .await?,
        );
        for method in ["tasks/result", "tasks/get"] {
            let answer = agent
                .request_next(method, json!({"taskId": task_id}))
                .await?;
            ensure!(
                answer["error"]["data"]["error"] == "epoch_transition"
                    && answer["error"]["data"]["oldEpoch"] == before.as_str(),
                "{method} for epoch A's task after the restart (now {after}): {answer}"
            );
        }

        let rows = activity(&gate, &["--tool", TASK_TOOL])?;
        let row = rows
            .first()
            .with_context(|| format!("no Activity row for {TASK_TOOL}"))?;
        ensure!(
            row["epoch"] == before.as_str() && row["outcome"] == "epoch_transition",
            "the task's call is journaled under epoch A, ended by the transition: {row}"
        );
        Ok(())
    })
    .await
}

/// Lists tools until `name` is among them: server-everything registers its task tool after
/// initialization and the gate refetches its catalog when told.
async fn wait_for_tool(agent: &mut RawAgent, name: &str) -> Result<()> {
    for _ in 0..50 {
        let tools: Vec<Value> = agent.list_tools().await?;
        if tools.iter().any(|t| t["name"] == name) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    anyhow::bail!("{name} never appeared in the catalog")
}
