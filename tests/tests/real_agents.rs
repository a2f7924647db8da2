//! Real agents keep working across a rebuild (issue 14): Claude Code and Codex as shipped on
//! npm, run headless (`claude -p`, `codex exec`) against the scripted model stand-in, with
//! `postern mcp` as their MCP server and the rebuildable fixture behind it. The test plays the
//! model (which never calls tools/list: it only sees the tools the client lists for it) and the
//! person (who approves each card at a terminal). Claude Code re-lists tools when told
//! `list_changed`; Codex never does. Each scenario runs against both, and against applications
//! on the official Python and TypeScript SDKs (`tests/clients/`), which list tools at start and
//! on `list_changed` only.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use postern_e2e::Gate;
use postern_e2e::agents;
use postern_e2e::human::{card_id, epoch, open_approvals, ready, wait_session};
use postern_e2e::model::{Model, ToolResult, Turn};
use postern_e2e::rebuild::Fixture;
use serde_json::{Value, json};

const LABEL: &str = "rebuildable";
const ANSWER: Duration = Duration::from_secs(60);

/// The client under test.
#[derive(Debug, Clone, Copy)]
enum Client {
    ClaudeCode,
    Codex,
    PythonSdk,
    TypescriptSdk,
}

impl Client {
    /// The client's headless run with `prompt`, giving each tool call `tool_timeout`.
    fn command(
        self,
        gate: &Gate,
        model: &Model,
        prompt: &str,
        tool_timeout: Duration,
    ) -> Result<tokio::process::Command> {
        match self {
            Client::ClaudeCode => {
                agents::claude_code(gate, model, LABEL, prompt, tool_timeout.as_millis() as u64)
            }
            Client::Codex => agents::codex(gate, model, LABEL, prompt, tool_timeout.as_secs()),
            Client::PythonSdk => agents::python_sdk(gate, model, LABEL, prompt, tool_timeout),
            Client::TypescriptSdk => {
                agents::typescript_sdk(gate, model, LABEL, prompt, tool_timeout)
            }
        }
    }
}

/// The scenario `$scenario` against every client, as tests named `<client>_$name`.
/// Multi-threaded: the model stand-in answers the agent while the test blocks on the CLI.
macro_rules! for_every_client {
    ($name:ident, $scenario:ident) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn claude_code() -> Result<()> {
                $scenario(Client::ClaudeCode).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn codex() -> Result<()> {
                $scenario(Client::Codex).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn python_sdk() -> Result<()> {
                $scenario(Client::PythonSdk).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn typescript_sdk() -> Result<()> {
                $scenario(Client::TypescriptSdk).await
            }
        }
    };
}

for_every_client!(
    keeps_working_across_a_rebuild_with_an_identical_catalog,
    across_a_rebuild
);
for_every_client!(
    retries_a_call_the_person_approved_after_its_timeout,
    late_approval
);
for_every_client!(
    keeps_working_across_a_rebuild_that_adds_a_schema_default,
    across_a_schema_rebuild
);
for_every_client!(
    gets_epoch_transition_for_a_write_in_flight_across_a_restart,
    restart_in_flight
);

/// One scenario's world: the fixture behind a prompting gate (`restart` policy), the model
/// stand-in, and the client's run with `prompt`, each tool call given `tool_timeout`.
struct Scene {
    fixture: Fixture,
    gate: Gate,
    model: Model,
    run: tokio::process::Child,
}

async fn scene(
    client: Client,
    restart: &str,
    prompt: &str,
    tool_timeout: Duration,
) -> Result<Scene> {
    let fixture = Fixture::new()?;
    let gate = fixture.gate(LABEL, restart).await?;
    let model = Model::start().await?;
    let run = client
        .command(&gate, &model, prompt, tool_timeout)?
        .spawn()?;
    Ok(Scene {
        fixture,
        gate,
        model,
        run,
    })
}

/// Waits for the run to end and checks it ended well, saying `said` last.
async fn completes(run: tokio::process::Child, said: &str) -> Result<()> {
    let out = tokio::time::timeout(ANSWER, run.wait_with_output()).await??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the run failed ({}): {stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(said), "{stdout}");
    Ok(())
}

/// The next tool result the agent hands the model, approving (for the agent run) every card
/// that appears meanwhile, as the person at the approval window would; the cards approved are
/// added to `cards`.
async fn result_approving(
    gate: &Gate,
    model: &Model,
    cards: &mut Vec<Value>,
) -> Result<ToolResult> {
    let deadline = Instant::now() + ANSWER;
    loop {
        if let Ok(result) = model.result(Duration::from_millis(300)).await {
            return Ok(result);
        }
        for card in open_approvals(gate)? {
            gate.cli(["approve", &card_id(&card), "--run"])?;
            cards.push(card);
        }
        if Instant::now() > deadline {
            bail!("no tool result within {ANSWER:?}");
        }
    }
}

/// What a run saw across a rebuild: the person's cards, the model's results after it, and the
/// two epochs.
struct Across {
    cards: Vec<Value>,
    results: Vec<ToolResult>,
    epoch_a: String,
    epoch_b: String,
}

/// The model publishes main once under revision A (the person approves the run), the fixture
/// is rebuilt to `revision`, and the model goes on publishing three times as before (the
/// person approving what is asked), then says "published".
async fn publishing_across(
    fixture: &Fixture,
    gate: &Gate,
    model: &Model,
    revision: &str,
) -> Result<Across> {
    let publish = || Turn::call("publish_preview", json!({"branch": "main"}));
    let mut cards = Vec::new();
    // Revision A: the first call asks the person about the agent run and the call.
    model.turn(publish());
    let first = result_approving(gate, model, &mut cards).await?;
    assert!(first.text.contains("revision=A"), "{first:?}");
    assert_eq!(cards.len(), 1, "one card for the run and its call");
    let a = wait_session(gate, LABEL, "revision A", ready).await?;
    let epoch_a = epoch(&a);
    fixture.rebuild(revision)?;
    let b = wait_session(gate, LABEL, "the rebuilt epoch", |s| {
        ready(s) && epoch(s) != epoch_a
    })
    .await?;
    let mut results = Vec::new();
    for _ in 0..3 {
        model.turn(publish());
        results.push(result_approving(gate, model, &mut cards).await?);
    }
    model.turn(Turn::Say("published".into()));
    Ok(Across {
        cards,
        results,
        epoch_a,
        epoch_b: epoch(&b),
    })
}

/// A rebuild with an identical catalog mid-run: the run completes, its later calls reach the
/// new code after one approval, at most one call is refused, as `authorization_stale` naming
/// both epochs, and Activity shows each call under its epoch.
async fn across_a_rebuild(client: Client) -> Result<()> {
    // Rebuilt to the same catalog, another handler: nothing the client lists tells it apart.
    let Scene {
        fixture,
        gate,
        model,
        run,
    } = scene(client, "on-change", "publish a preview of main", ANSWER).await?;
    gate.scenario(async {
        let Across {
            cards,
            results,
            epoch_a,
            epoch_b,
        } = publishing_across(&fixture, &gate, &model, "b-handler").await?;
        // At most one call is refused as stale, naming both epochs; after that the call
        // reaches the person and then the new code.
        let stale: Vec<&ToolResult> = results
            .iter()
            .filter(|r| r.text.contains("authorization_stale"))
            .collect();
        assert!(stale.len() <= 1, "at most one stale refusal: {results:#?}");
        for refusal in &stale {
            // Codex hands the model the output without an error flag; the others mark it.
            assert!(
                refusal.is_error || matches!(client, Client::Codex),
                "{refusal:?}"
            );
            assert!(
                refusal.text.contains(&epoch_a) && refusal.text.contains(&epoch_b),
                "the refusal names both epochs: {refusal:?}"
            );
        }
        let reached: Vec<&ToolResult> = results
            .iter()
            .filter(|r| r.text.contains("revision=B"))
            .collect();
        assert_eq!(reached.len(), results.len() - stale.len(), "{results:#?}");
        assert_eq!(
            cards.len(),
            2,
            "one more card, for the rebuilt code: {cards:#?}"
        );
        let since = &cards[1]["epoch"]["since"];
        assert_eq!(since["kind"], "changed", "{since}");
        assert_eq!(since["approvedEpoch"], epoch_a.as_str());
        // The card leads with the code change, names the agent by its own name, and a real
        // client is never taken for one whose name its program belies.
        let risks: Vec<&str> = cards[1]["risks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["kind"].as_str())
            .collect();
        assert_eq!(
            risks.first(),
            Some(&"codeChanged"),
            "{:#}",
            cards[1]["risks"]
        );
        assert!(!risks.contains(&"clientMismatch"), "{:#}", cards[1]);
        let name = cards[1]["agentName"].as_str().unwrap_or_default();
        assert_eq!(Some(name), cards[1]["client"].as_str(), "{:#}", cards[1]);

        // The run completes.
        completes(run, "published").await?;

        // Activity shows each call under its epoch.
        let activity = gate.cli(["activity", "--json", "--server", LABEL])?;
        let epochs: Vec<String> = activity
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["outcome"] == "ok")
            .filter_map(|r| r["epoch"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(
            epochs.iter().filter(|e| **e == epoch_a).count(),
            1,
            "{activity}"
        );
        assert_eq!(
            epochs.iter().filter(|e| **e == epoch_b).count(),
            reached.len(),
            "{activity}"
        );
        Ok(())
    })
    .await
}

/// The person answers after the client gave up waiting (its tool timeout, here 4 s): the card
/// stayed open, the answer covers the identical retry, and no second card is raised.
async fn late_approval(client: Client) -> Result<()> {
    let Scene {
        fixture,
        gate,
        model,
        run,
    } = scene(
        client,
        "on-change",
        "publish a preview",
        Duration::from_secs(4),
    )
    .await?;
    gate.scenario(async {
        let publish = || Turn::call("publish_preview", json!({"branch": "main"}));
        model.turn(publish());
        let cards = postern_e2e::human::wait_approvals(&gate)?;
        assert_eq!(cards.len(), 1, "{cards:#?}");
        // Nobody answers in time: the client gives up and tells the model.
        let gave_up = model.result(ANSWER).await?;
        assert!(gave_up.text.contains("timed out"), "{gave_up:?}");
        assert!(fixture.effects().is_empty(), "nothing ran");
        let still = open_approvals(&gate)?;
        assert_eq!(still.len(), 1, "the card stays open for the retry");
        assert_eq!(still[0]["agentStoppedWaiting"], true, "and says so");
        assert_eq!(card_id(&still[0]), card_id(&cards[0]));

        // The person approves this call, late; the model tries the same call again.
        gate.cli(["approve", &card_id(&cards[0]), "--once"])?;
        model.turn(publish());
        let retried = model.result(ANSWER).await?;
        assert!(retried.text.contains("revision=A"), "{retried:?}");
        assert!(open_approvals(&gate)?.is_empty(), "no second card");
        assert_eq!(fixture.effects().len(), 1, "{:?}", fixture.effects());

        model.turn(Turn::Say("published".into()));
        completes(run, "published").await?;
        Ok(())
    })
    .await
}

/// A rebuild that adds an optional field with a default to the tool the agent keeps calling:
/// the run completes, at most one call is refused, and the card for the new code shows the
/// arguments checked against the new schema, the default marked as not sent.
async fn across_a_schema_rebuild(client: Client) -> Result<()> {
    let Scene {
        fixture,
        gate,
        model,
        run,
    } = scene(client, "on-change", "publish a preview of main", ANSWER).await?;
    gate.scenario(async {
        let Across { cards, results, .. } =
            publishing_across(&fixture, &gate, &model, "b-schema").await?;
        let reached = results
            .iter()
            .filter(|r| r.text.contains("revision=B published main to preview"))
            .count();
        assert!(
            reached >= results.len() - 1,
            "at most one refused: {results:#?}"
        );
        assert_eq!(
            cards.len(),
            2,
            "one more card, for the new code: {cards:#?}"
        );
        let card = &cards[1];
        assert_eq!(card["catalog"]["kind"], "changed", "{card}");
        let arguments = card["arguments"].as_array().cloned().unwrap_or_default();
        assert!(
            arguments.contains(&json!({"pointer": "/branch", "value": "main", "source": "sent"}))
                && arguments.contains(
                    &json!({"pointer": "/target", "value": "preview", "source": "default"})
                ),
            "the default is shown, marked: {arguments:#?}"
        );
        completes(run, "published").await?;
        Ok(())
    })
    .await
}

/// A restart while a write call is in flight: that call gets the epoch-transition error, it is
/// not retried by anyone, and the next call works.
async fn restart_in_flight(client: Client) -> Result<()> {
    let Scene {
        fixture,
        gate,
        model,
        run,
    } = scene(client, "manual", "write t1, then publish", ANSWER).await?;
    gate.scenario(async {
        let mut cards = Vec::new();
        model.turn(Turn::call("whoami", json!({})));
        result_approving(&gate, &model, &mut cards).await?;
        model.turn(Turn::call(
            "slow_write",
            json!({"token": "t1", "ms": 600_000}),
        ));
        let deadline = Instant::now() + ANSWER;
        loop {
            for card in open_approvals(&gate)? {
                gate.cli(["approve", &card_id(&card), "--run"])?;
            }
            if fixture
                .effects()
                .iter()
                .any(|e| e.starts_with("slow_write start"))
            {
                break;
            }
            if Instant::now() > deadline {
                bail!("the write never started: {:?}", fixture.effects());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        gate.cli(["server", "restart", LABEL])?;
        let cut = model.result(ANSWER).await?;
        assert!(cut.text.contains("epoch_transition"), "{cut:?}");
        model.turn(Turn::call("publish_preview", json!({"branch": "main"})));
        let next = result_approving(&gate, &model, &mut cards).await?;
        assert!(next.text.contains("revision=A published main"), "{next:?}");
        model.turn(Turn::Say("done".into()));
        completes(run, "done").await?;
        let writes: Vec<String> = fixture
            .effects()
            .into_iter()
            .filter(|e| e.starts_with("slow_write start"))
            .collect();
        assert_eq!(writes.len(), 1, "the cut write was not retried: {writes:?}");
        Ok(())
    })
    .await
}
