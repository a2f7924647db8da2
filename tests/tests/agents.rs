//! Who is behind a session (the authorization issue, item 1): the engine reads the
//! connecting process's credentials from the socket and walks the process table from the
//! shim to the agent that launched it. The agent's self-reported name is kept apart.

use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use postern_e2e::{Gate, servers};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::test]
async fn the_agent_is_the_process_that_launched_the_shim() -> Result<()> {
    let gate = Gate::start(&[("fixture", &servers::fixture()?)]).await?;
    gate.scenario(async {
        // This test process is the agent: it launches `postern mcp` as Claude Code would.
        let mut shim = tokio::process::Command::new(gate.bin())
            .arg("--home")
            .arg(gate.home())
            .args(["mcp", "fixture"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut stdin = shim.stdin.take().context("stdin")?;
        let mut stdout = BufReader::new(shim.stdout.take().context("stdout")?).lines();
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claims-to-be-claude","version":"9"}}}"#;
        stdin.write_all(format!("{init}\n").as_bytes()).await?;
        stdout.next_line().await?.context("no initialize answer")?;

        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let session = loop {
            let status = gate.status().await?;
            let session = status["sessions"][0].clone();
            if !session["agent"].is_null() {
                break session;
            }
            if tokio::time::Instant::now() > deadline {
                bail!("no identified agent in status: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let agent = &session["agent"];
        assert_eq!(agent["pid"], std::process::id(), "{session}");
        let exe = std::fs::canonicalize(std::env::current_exe()?)?;
        assert_eq!(agent["executable"]["path"], exe.display().to_string(), "{session}");
        assert!(agent["executable"]["digest"].as_str().is_some_and(|d| d.starts_with("sha256:")));
        let chain: Vec<&str> = agent["chain"].as_array().context("chain")?.iter().filter_map(|c| c.as_str()).collect();
        assert_eq!(chain.last(), Some(&"postern"), "{chain:?}");
        // What the agent says about itself is shown apart, never taken as its identity.
        assert_eq!(session["client"], "claims-to-be-claude 9");
        // The Sessions journal (the timeline's lanes) names both.
        let journal = gate.cli(["sessions", "--json"])?;
        let row: serde_json::Value = serde_json::from_str(journal.lines().next().context("a session row")?)?;
        assert_eq!(row["client"], "claims-to-be-claude 9", "{row}");
        assert!(row["agent"].as_str().is_some_and(|a| a.ends_with(&format!("(pid {})", std::process::id()))), "{row}");

        let text = gate.cli(["server", "status", "fixture"])?;
        assert!(text.contains(&format!("pid {}", std::process::id())), "{text}");
        Ok(())
    })
    .await
}

/// A shim outlives the agent that launched it (an agent that leaves a shim behind it, whose
/// pid may be reused): once that process has exited, the session's calls have no agent a
/// person could be asked about and are refused, while the shim itself still runs (in the
/// default mode, where a call needs a person; observe mode admits unidentified callers).
#[tokio::test]
async fn a_session_whose_agent_exited_is_refused_its_calls() -> Result<()> {
    let gate = Gate::start_prompting(&[("fixture", &servers::fixture()?)]).await?;
    gate.scenario(async {
        // `sh` plays the agent: it launches the shim on our pipes (fd 3 keeps stdin from
        // the /dev/null an asynchronous command gets) and exits once `leave` exists.
        let leave = gate.home().join("leave");
        let mut agent = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(r#"exec 3<&0; "$0" --home "$1" mcp fixture <&3 3<&- & while [ ! -e "$2" ]; do sleep 0.05; done"#)
            .arg(gate.bin())
            .arg(gate.home())
            .arg(&leave)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let sh = agent.id().context("sh's pid")?;
        let mut stdin = agent.stdin.take().context("stdin")?;
        let mut stdout = BufReader::new(agent.stdout.take().context("stdout")?).lines();
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"left-behind","version":"1"}}}"#;
        stdin.write_all(format!("{init}\n{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}}\n").as_bytes()).await?;
        stdout.next_line().await?.context("no initialize answer")?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let status = gate.status().await?;
            if status["sessions"][0]["agent"]["pid"] == sh {
                break;
            }
            if tokio::time::Instant::now() > deadline {
                bail!("sh is not the session's agent: {status}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }

        std::fs::write(&leave, "")?;
        let exited = tokio::time::timeout(Duration::from_secs(10), agent.wait()).await??;
        assert!(exited.success(), "{exited}");
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#;
        stdin.write_all(format!("{call}\n").as_bytes()).await?;
        let answer = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let line = stdout.next_line().await?.context("the shim closed its stdout")?;
                let msg: serde_json::Value = serde_json::from_str(&line)?;
                if msg["id"] == 1 {
                    return anyhow::Ok(msg);
                }
            }
        })
        .await??;
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let refusal = &answer["result"]["structuredContent"];
        assert_eq!(refusal["error"], "session_unidentifiable", "{answer}");
        assert!(refusal["reason"].as_str().is_some_and(|r| r.contains(&format!("pid {sh}"))), "{answer}");
        Ok(())
    })
    .await
}
