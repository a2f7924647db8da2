//! The human's side of a test: approval requests answered with the CLI, and the engine's
//! status polled until it shows what a step waits for.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::Gate;

/// How long the engine may take to reach a state a test waits for.
pub const SETTLE: Duration = Duration::from_secs(30);

/// The open approval requests (`postern approvals --json`), waiting up to [`SETTLE`] for at
/// least one.
pub fn wait_approvals(gate: &Gate) -> Result<Vec<Value>> {
    let out = gate.cli([
        "approvals",
        "--json",
        "--wait",
        &SETTLE.as_secs().to_string(),
    ])?;
    let cards: Vec<Value> = serde_json::from_str(&out).context("approvals --json")?;
    if cards.is_empty() {
        bail!("no approval request arrived within {SETTLE:?}");
    }
    Ok(cards)
}

/// The open approval requests now.
pub fn open_approvals(gate: &Gate) -> Result<Vec<Value>> {
    Ok(serde_json::from_str(&gate.cli(["approvals", "--json"])?)?)
}

/// The Activity journal's rows (`postern activity --json <filter>`), newest first.
pub fn activity(gate: &Gate, filter: &[&str]) -> Result<Vec<Value>> {
    let out = gate.cli(
        ["activity", "--json"]
            .into_iter()
            .chain(filter.iter().copied()),
    )?;
    out.lines()
        .map(|row| serde_json::from_str(row).with_context(|| format!("activity row {row}")))
        .collect()
}

/// A card's id.
pub fn card_id(card: &Value) -> String {
    card["id"].as_str().unwrap_or_default().to_owned()
}

/// The one session of `label` in the engine's status once `pred` holds.
pub async fn wait_session(
    gate: &Gate,
    label: &str,
    what: &str,
    pred: impl Fn(&Value) -> bool,
) -> Result<Value> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let status = gate.status().await?;
        let found = status["sessions"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["server"] == label).cloned());
        if let Some(session) = found.filter(|s| pred(s)) {
            return Ok(session);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!("status never showed {what} within {SETTLE:?}; last: {status}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A session's current epoch.
pub fn epoch(session: &Value) -> String {
    session["execution"]["epoch"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A running process whose catalog is in.
pub fn ready(session: &Value) -> bool {
    session["state"] == "catalogReady" && session["serverPid"].is_u64()
}

/// Calls `tool` with `args`, answers the approval request it raises with `postern approve <id>
/// <answer>` (`--run`, `--once`, ...), and returns the card and the call's answer.
pub async fn approved_call(
    gate: &Gate,
    agent: &mut crate::raw::RawAgent,
    tool: &str,
    args: Value,
    answer: &str,
) -> Result<(Value, Value)> {
    let call = agent
        .start(
            "tools/call",
            serde_json::json!({"name": tool, "arguments": args}),
        )
        .await?;
    let card = wait_approvals(gate)?.remove(0);
    gate.cli(["approve", &card_id(&card), answer])?;
    Ok((card, agent.response(&call).await?))
}
