//! `postern demo` (issue 7, first run): one command plays the rebuild story against the
//! running engine, and a human (this test, outside the demo's process tree) approves twice.

use std::process::Stdio;

use anyhow::Result;
use postern_e2e::Gate;
use postern_e2e::human::{card_id, wait_approvals};

#[tokio::test]
async fn the_demo_plays_the_rebuild_story_with_two_approvals() -> Result<()> {
    let gate = Gate::start_prompting(&[]).await?;
    let demo = tokio::process::Command::new(gate.bin())
        .arg("--home")
        .arg(gate.home())
        .arg("demo")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let out = gate
        .scenario(async {
            let first = wait_approvals(&gate)?;
            assert_eq!(first[0]["server"], "demo");
            assert_eq!(first[0]["tool"]["name"], "deploy");
            gate.cli(["approve", &card_id(&first[0]), "--run"])?;
            // After the rebuild the card is about new code, with the new field's default shown.
            let second = loop {
                let cards = wait_approvals(&gate)?;
                if cards[0]["id"] != first[0]["id"] {
                    break cards;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            };
            let card = &second[0];
            assert_eq!(card["epoch"]["since"]["kind"], "changed", "{card}");
            let target = card["arguments"]
                .as_array()
                .and_then(|args| args.iter().find(|a| a["pointer"] == "/target"))
                .cloned()
                .unwrap_or_default();
            assert_eq!(target["value"], "preview", "{card}");
            assert_eq!(target["source"], "default", "{card}");
            gate.cli(["approve", &card_id(card), "--once"])?;
            Ok(demo.wait_with_output().await?)
        })
        .await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("revision 1 deployed main to preview"),
        "{stdout}"
    );
    assert!(stdout.contains("refused: authorization_stale"), "{stdout}");
    assert!(
        stdout.contains("revision 2 deployed main to preview"),
        "{stdout}"
    );
    Ok(())
}

/// A server of the user's own named `demo` is never replaced by the demo's.
#[tokio::test]
async fn the_demo_never_replaces_a_server_of_the_users_named_demo() -> Result<()> {
    let gate = Gate::start_prompting(&[]).await?;
    gate.cli(["server", "add", "demo", "--", "/bin/echo", "mine"])?;
    let refused = gate
        .cli(["demo"])
        .expect_err("the demo must not replace it");
    assert!(
        refused
            .to_string()
            .contains("a server named 'demo' is already configured"),
        "{refused:#}"
    );
    let listed = gate.cli(["server", "list"])?;
    assert!(listed.contains("demo\t/bin/echo mine"), "{listed}");
    Ok(())
}
