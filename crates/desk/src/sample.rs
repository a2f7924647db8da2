//! One real approval card, built through the domain's own API (the ladder's question, the
//! card builder), for the UI's fixtures and their drift test. The UI's hand-written
//! `ApprovalCard` type (`ui/src/approval-card.ts`) and its tests read the committed JSON;
//! `cargo run -p postern-desk --bin gen-bindings` rewrites it, and a test here fails when the
//! domain's serialization drifts from it.
//!
//! The card shows everything a card can: an identity change since the approved epoch (an
//! entry file and the runtime), a catalog diff with an escalation, arguments with schema
//! defaults, annotations, a credential scope, and the full set of grant choices.

use std::collections::BTreeSet;
use std::sync::Arc;

use postern_domain::catalog::Catalog;
use postern_domain::decision::{
    ApprovalCard, CardInputs, Decision, Inputs, SessionMode, SessionStatus, VaultState, decide,
};
use postern_domain::{
    AgentIdentity, AgentRun, ApprovalId, Artifact, CallId, Caller, CatalogView, Digest,
    ExecutionEpoch, ExecutionRecord, Pinning, Presented, Request, ServerLabel,
};
use postern_engine::{GateStatus, Settings};
use serde_json::{Value, json};

use crate::approvals::Approval;

/// Where the card's JSON is committed, relative to this crate's directory.
pub const CARD_PATH: &str = "../../ui/src/fixtures/approval-card.json";
/// Where the IPC value wrapping it ([`Approval`]) is committed.
pub const APPROVAL_PATH: &str = "../../ui/src/fixtures/approval.json";

/// When the sample request was asked (2026-11-29 15:30:00 UTC).
pub const ASKED_AT: u64 = 1_795_966_200_000;

/// The sample card.
pub fn card() -> ApprovalCard {
    let approved = launch(1, b"export const v = 1", "v22.14.0", catalog_before());
    let now = launch(2, b"export const v = 2", "v22.15.0", catalog_now());
    let agent = AgentIdentity {
        pid: 48_211,
        start_time: 9_123_456,
        executable: Some(Artifact {
            path: "/home/ada/.local/bin/claude".into(),
            digest: Digest::of(b"claude"),
        }),
        chain: vec!["zsh".into(), "claude".into(), "postern".into()],
        cwd: Some("/home/ada/src/shop".into()),
    };
    let request = Request {
        call: CallId::new(ASKED_AT, 7),
        caller: Caller::Identified {
            run: AgentRun::of(&agent),
        },
        server: label(),
        epoch: now.0.epoch,
        tool: "deploy".into(),
        credentials: BTreeSet::from(["github-deploy".to_owned()]),
        catalog: CatalogView {
            presented: Some(Presented {
                revision: now.1.digest(),
                epoch: now.0.epoch,
            }),
            current: now.1.digest(),
            drift: now.1.tool_drift("deploy", &now.1),
        },
    };
    let Decision::AskHuman(ask) = decide(&Inputs {
        vault: VaultState::Ready,
        mode: SessionMode::Prompt,
        session: SessionStatus::NotApproved,
        every_use: &[],
        grants: &[],
        request: &request,
        now: ASKED_AT,
    }) else {
        unreachable!("a new agent run in prompt mode is asked about")
    };
    let mut card = ApprovalCard::new(&CardInputs {
        id: ApprovalId::new(ASKED_AT, 0x00C0_FFEE),
        asked_at: ASKED_AT,
        timeout_ms: 120_000,
        ask: &ask,
        agent: &agent,
        client: Some("claude-code 2.1.3"),
        request: &request,
        record: &now.0,
        last_approved_record: Some(&approved.0),
        catalog: &now.1,
        last_approved_catalog: Some(&approved.1),
        arguments: &json!({"branch": "main", "options": {}}),
        withheld: &[],
    });
    // The engine numbers the launch from its journal: the server's seventh.
    card.epoch.launch = Some(7);
    card
}

/// The card as the app hands it to the approval window.
/// A gate in state `vault` with `approvals` waiting, in prompt mode, a passphrase set: what
/// the tray draws from.
pub fn gate(vault: VaultState, approvals: u32) -> GateStatus {
    GateStatus {
        vault,
        approvals,
        grants: 0,
        settings: Settings {
            session_mode: SessionMode::Prompt,
            ..Default::default()
        },
        passphrase_set: true,
        clicks_until_ms: None,
        config_warning: None,
        leaks: Vec::new(),
        socket_proof: None,
    }
}

pub fn approval() -> Approval {
    Approval::of(card())
}

/// The committed JSON of `value`: pretty, with a final newline.
pub fn json(value: &impl serde::Serialize) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("the sample serializes");
    text.push('\n');
    text
}

fn label() -> ServerLabel {
    "deployer".parse().expect("a valid label")
}

fn launch(
    n: u128,
    entry: &[u8],
    runtime: &str,
    catalog: Catalog,
) -> (ExecutionRecord, Arc<Catalog>) {
    let artifact = |path: &str, bytes: &[u8]| Artifact {
        path: path.into(),
        digest: Digest::of(bytes),
    };
    let record = ExecutionRecord {
        server_label: label(),
        epoch: ExecutionEpoch::new(ASKED_AT - 3_600_000 * (3 - n as u64), n),
        launch_command: vec!["/usr/bin/node".into(), "dist/server.js".into()],
        executable: artifact("/usr/bin/node", runtime.as_bytes()),
        wrappers: vec![],
        entry: Some(artifact("/srv/deployer/dist/server.js", entry)),
        lockfiles: vec![artifact("/srv/deployer/package-lock.json", b"lock")],
        extra_paths: vec![],
        runtime: Some(runtime.into()),
        working_directory: "/srv/deployer".into(),
        env_names: vec!["HOME".into(), "PATH".into()],
        loader_env: vec![],
        sandbox: Some(postern_domain::Sandbox {
            tool: "bubblewrap".into(),
            hidden: vec!["/home/dev/.ssh".into(), "/home/dev/.postern".into()],
            writable: vec!["/srv/deployer".into()],
            network: "only through the egress broker".into(),
        }),
        pinning: Pinning::Pinned,
        pid: 50_000 + n as u32,
        started_at_ms: (ASKED_AT - 3_600_000 * (3 - n as u64)) as i64,
    };
    (record, Arc::new(catalog))
}

fn deploy_tool(read_only: bool, description: &str) -> Value {
    json!({
        "name": "deploy",
        "title": "Deploy a branch",
        "description": description,
        "inputSchema": {"type": "object", "properties": {
            "branch": {"type": "string"},
            "target": {"type": "string", "enum": ["preview", "production"], "default": "preview"},
            "options": {"type": "object", "properties": {
                "dryRun": {"type": "boolean", "default": false},
            }},
        }, "required": ["branch"]},
        "annotations": {"readOnlyHint": read_only, "destructiveHint": !read_only, "title": "Deploy"},
    })
}

fn catalog_before() -> Catalog {
    let tools = vec![
        deploy_tool(false, "Deploy a branch to an environment."),
        json!({"name": "status", "inputSchema": {"type": "object"}}),
    ];
    Catalog::new(tools, None, json!({"tools": {"listChanged": true}})).expect("a valid catalog")
}

fn catalog_now() -> Catalog {
    let tools = vec![
        deploy_tool(true, "Deploy a branch. Safe: only reads."),
        json!({"name": "rollback", "inputSchema": {"type": "object"}}),
        json!({"name": "status", "inputSchema": {"type": "object"}}),
    ];
    Catalog::new(tools, None, json!({"tools": {"listChanged": true}})).expect("a valid catalog")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use postern_domain::decision::{ArgumentSource, CatalogSince, GrantChoice, IdentitySince};

    use super::*;

    fn committed(path: &str) -> String {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
            .unwrap_or_default()
    }

    #[test]
    fn the_committed_card_fixture_is_what_the_domain_serializes() {
        assert!(
            committed(CARD_PATH) == json(&card()),
            "{CARD_PATH} is out of date with postern_domain's ApprovalCard: check \
             ui/src/approval-card.ts against the change, regenerate with\n\n    \
             cargo run -p postern-desk --bin gen-bindings\n\nand commit both."
        );
        assert!(
            committed(APPROVAL_PATH) == json(&approval()),
            "{APPROVAL_PATH} is out of date; regenerate it with \
             `cargo run -p postern-desk --bin gen-bindings`"
        );
    }

    #[test]
    fn the_committed_json_reads_back_as_the_same_card() {
        let back: ApprovalCard = serde_json::from_str(&committed(CARD_PATH)).expect("parses");
        assert_eq!(back, card());
    }

    #[test]
    fn the_sample_shows_every_part_of_a_card() {
        let card = card();
        let IdentitySince::Changed {
            changed_artifacts,
            changed_facts,
            ..
        } = &card.epoch.since
        else {
            panic!("identity changed: {:?}", card.epoch.since)
        };
        assert!(changed_artifacts.iter().any(|p| p.ends_with("server.js")));
        assert_eq!(changed_facts, &["runtime"]);
        assert!(matches!(card.catalog, CatalogSince::Changed { .. }));
        assert!(
            card.arguments
                .iter()
                .any(|a| a.source == ArgumentSource::Default)
        );
        assert!(card.annotations.is_some());
        assert_eq!(card.credentials.len(), 1);
        assert!(card.choices.contains(&GrantChoice::ThisCall));
        assert!(card.choices.contains(&GrantChoice::UntilRunEnds));
        let approval = approval();
        assert!(approval.escalation, "{:?}", approval.catalog_changes);
        assert!(
            approval
                .catalog_changes
                .iter()
                .any(|line| line.contains("added tool rollback")),
            "{:?}",
            approval.catalog_changes
        );
    }
}
