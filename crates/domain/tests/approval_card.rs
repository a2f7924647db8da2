//! Snapshots of approval cards (issue 5 item 5): the article's `publish_preview` rebuilt
//! with a `target` defaulting to `preview`, which the reviewer must see as a default.

use postern_domain::catalog::{Catalog, ToolDrift};
use postern_domain::decision::{
    APPROVAL_TIMEOUT_MS, ApprovalCard, ArgumentSource, CardInputs, CatalogSince, Decision,
    IdentitySince, Inputs, SessionMode, SessionStatus, VaultState, decide,
};
use postern_domain::{
    AgentIdentity, AgentRun, ApprovalId, Artifact, CallId, Caller, CatalogView, Digest,
    ExecutionEpoch, ExecutionRecord, Pinning, Presented, Request,
};
use serde_json::{Value, json};

const NOW: u64 = 1_800_000_000_000;

fn catalog(with_target: bool) -> Catalog {
    let mut properties = json!({"branch": {"type": "string"}});
    if with_target {
        properties["target"] = json!({
            "type": "string", "enum": ["preview", "production"], "default": "preview"
        });
    }
    let tool = json!({
        "name": "publish_preview",
        "description": "Publish the branch to a preview environment.",
        "inputSchema": {
            "type": "object",
            "required": ["branch"],
            "properties": properties,
            "additionalProperties": false,
        },
        "annotations": {"readOnlyHint": false, "destructiveHint": false},
    });
    Catalog::new(vec![tool], None, json!({"tools": {"listChanged": true}})).expect("catalog")
}

fn record(epoch: ExecutionEpoch, entry: &[u8]) -> ExecutionRecord {
    let artifact = |p: &str, b: &[u8]| Artifact {
        path: p.into(),
        digest: Digest::of(b),
    };
    ExecutionRecord {
        server_label: "previews".parse().expect("label"),
        epoch,
        launch_command: vec![
            "/usr/bin/node".into(),
            "/work/previews/dist/server.js".into(),
        ],
        executable: artifact("/usr/bin/node", b"node"),
        wrappers: vec![],
        entry: Some(artifact("/work/previews/dist/server.js", entry)),
        lockfiles: vec![artifact("/work/previews/package-lock.json", b"lock")],
        extra_paths: vec![],
        runtime: Some("v22.14.0".into()),
        working_directory: "/work/previews".into(),
        env_names: vec!["PATH".into(), "PREVIEW_TOKEN".into()],
        pinning: Pinning::Pinned,
        pid: 48192,
        started_at_ms: 1_700_000_000_000,
    }
}

/// The card as pretty JSON, volatile ids and times replaced by placeholders.
fn scrubbed(card: &ApprovalCard, volatile: &[(String, &str)]) -> String {
    let mut text = serde_json::to_string_pretty(card).expect("a card serializes");
    let back: ApprovalCard = serde_json::from_str(&text).expect("and reads back");
    assert_eq!(&back, card);
    for (value, placeholder) in volatile {
        text = text.replace(value.as_str(), placeholder);
    }
    text
}

#[test]
fn publish_preview_after_a_rebuild() {
    let old_epoch = ExecutionEpoch::new(1_700_000_000_000, 1);
    let new_epoch = ExecutionEpoch::new(1_700_000_100_000, 2);
    let (old_catalog, new_catalog) = (catalog(false), catalog(true));
    let run = AgentRun {
        pid: 4242,
        start_time: 987_654,
    };
    let request = Request {
        call: CallId::new(NOW, 3),
        caller: Caller::Identified { run },
        server: "previews".parse().expect("label"),
        epoch: new_epoch,
        tool: "publish_preview".into(),
        credentials: ["previews-staging".to_owned()].into(),
        catalog: CatalogView {
            presented: Some(Presented {
                revision: new_catalog.digest(),
                epoch: new_epoch,
            }),
            current: new_catalog.digest(),
            drift: ToolDrift::Unchanged,
        },
    };
    let inputs = Inputs {
        vault: VaultState::Ready,
        mode: SessionMode::Prompt,
        session: SessionStatus::NotApproved,
        every_use: &[],
        grants: &[],
        request: &request,
        now: NOW,
    };
    let Decision::AskHuman(ask) = decide(&inputs) else {
        panic!("a new session asks");
    };
    let agent = AgentIdentity {
        pid: run.pid,
        start_time: run.start_time,
        executable: Some(Artifact {
            path: "/home/dev/.local/bin/claude".into(),
            digest: Digest::of(b"claude"),
        }),
        chain: vec!["claude".into(), "postern".into()],
        cwd: Some("/work/previews".into()),
    };
    assert_eq!(AgentRun::of(&agent), run);
    let (old_record, new_record) = (record(old_epoch, b"v1"), record(new_epoch, b"v2"));
    let arguments = json!({"branch": "feature/login"});
    let id = ApprovalId::new(NOW, 99);
    let card = ApprovalCard::new(&CardInputs {
        id,
        asked_at: NOW,
        timeout_ms: APPROVAL_TIMEOUT_MS,
        ask: &ask,
        agent: &agent,
        request: &request,
        record: &new_record,
        last_approved_record: Some(&old_record),
        catalog: &new_catalog,
        last_approved_catalog: Some(&old_catalog),
        arguments: &arguments,
        withheld: &[],
    });

    let target = card
        .arguments
        .iter()
        .find(|a| a.pointer == "/target")
        .expect("the omitted target is on the card");
    assert_eq!(target.value, Value::from("preview"));
    assert_eq!(target.source, ArgumentSource::Default);
    assert!(
        matches!(card.epoch.since, IdentitySince::Changed { ref changed_artifacts, .. }
        if changed_artifacts == &[std::path::PathBuf::from("/work/previews/dist/server.js")])
    );
    assert!(matches!(card.catalog, CatalogSince::Changed { .. }));
    assert!(
        card.annotations
            .as_ref()
            .is_some_and(|a| a.note.contains("untrusted"))
    );

    let volatile = [
        (id.to_string(), "[approval id]"),
        (NOW.to_string(), "[asked at]"),
        ((NOW + APPROVAL_TIMEOUT_MS).to_string(), "[expires at]"),
        (old_epoch.to_string(), "[approved epoch]"),
        (new_epoch.to_string(), "[current epoch]"),
        (run.start_time.to_string(), "[start time]"),
    ];
    insta::assert_snapshot!("publish_preview_card", scrubbed(&card, &volatile));
}

#[test]
fn a_first_approval_has_nothing_to_compare_with() {
    let epoch = ExecutionEpoch::new(1_700_000_000_000, 7);
    let current = catalog(true);
    let run = AgentRun {
        pid: 1,
        start_time: 2,
    };
    let request = Request {
        call: CallId::new(NOW, 1),
        caller: Caller::Identified { run },
        server: "previews".parse().expect("label"),
        epoch,
        tool: "publish_preview".into(),
        credentials: Default::default(),
        catalog: CatalogView {
            presented: None,
            current: current.digest(),
            drift: ToolDrift::Unchanged,
        },
    };
    let Decision::AskHuman(ask) = decide(&Inputs {
        vault: VaultState::Ready,
        mode: SessionMode::Prompt,
        session: SessionStatus::Approved,
        every_use: &[],
        grants: &[],
        request: &request,
        now: NOW,
    }) else {
        panic!("no grant: ask");
    };
    let agent = AgentIdentity {
        pid: run.pid,
        start_time: run.start_time,
        executable: None,
        chain: vec!["codex".into(), "postern".into()],
        cwd: None,
    };
    let rec = record(epoch, b"v2");
    let card = ApprovalCard::new(&CardInputs {
        id: ApprovalId::new(NOW, 1),
        asked_at: NOW,
        timeout_ms: APPROVAL_TIMEOUT_MS,
        ask: &ask,
        agent: &agent,
        request: &request,
        record: &rec,
        last_approved_record: None,
        catalog: &current,
        last_approved_catalog: None,
        arguments: &json!({"branch": "main", "target": "production"}),
        withheld: &[],
    });
    assert_eq!(card.epoch.since, IdentitySince::FirstApproval);
    assert_eq!(
        card.catalog,
        CatalogSince::FirstApproval {
            revision: current.digest()
        }
    );
    assert!(
        card.arguments
            .iter()
            .all(|a| a.source == ArgumentSource::Sent),
        "a target the agent sent is not a default"
    );
}
