//! Snapshots of approval cards (issue 5 item 5): the article's `publish_preview` rebuilt
//! with a `target` defaulting to `preview`, which the reviewer must see as a default.

use postern_domain::catalog::{Catalog, ToolDrift};
use postern_domain::decision::{
    APPROVAL_TIMEOUT_MS, ApprovalCard, ArgumentSource, CardInputs, CatalogSince, Decision,
    IdentitySince, Inputs, Risk, SessionMode, SessionStatus, Severity, VaultState, decide,
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
        loader_env: vec![],
        sandbox: Some(sandbox()),
        pinning: Pinning::Pinned,
        pid: 48192,
        started_at_ms: 1_700_000_000_000,
    }
}

/// The sandbox the fixture's launches run in.
fn sandbox() -> postern_domain::Sandbox {
    postern_domain::Sandbox {
        tool: "bubblewrap".into(),
        hidden: vec!["/home/dev/.ssh".into(), "/home/dev/.postern".into()],
        writable: vec!["/work/previews".into()],
        network: "only through the egress broker".into(),
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
        client: Some("claude-code 2.1.3"),
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
        client: None,
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

/// A card for `publish_preview` asked by `agent` (calling itself `client`), the approved
/// launch `approved` and catalog `approved_catalog` against the current `now`.
fn card_of(
    agent: &AgentIdentity,
    client: Option<&str>,
    approved: (&ExecutionRecord, &Catalog),
    now: (&ExecutionRecord, &Catalog),
    credentials: &[&str],
    withheld: &[String],
) -> ApprovalCard {
    let run = AgentRun::of(agent);
    let request = Request {
        call: CallId::new(NOW, 5),
        caller: Caller::Identified { run },
        server: "previews".parse().expect("label"),
        epoch: now.0.epoch,
        tool: "publish_preview".into(),
        credentials: credentials.iter().map(|c| (*c).to_owned()).collect(),
        catalog: CatalogView {
            presented: Some(Presented {
                revision: now.1.digest(),
                epoch: now.0.epoch,
            }),
            current: now.1.digest(),
            drift: ToolDrift::Unchanged,
        },
    };
    let Decision::AskHuman(ask) = decide(&Inputs {
        vault: VaultState::Ready,
        mode: SessionMode::Prompt,
        session: SessionStatus::NotApproved,
        every_use: &[],
        grants: &[],
        request: &request,
        now: NOW,
    }) else {
        panic!("a new session asks");
    };
    ApprovalCard::new(&CardInputs {
        id: ApprovalId::new(NOW, 5),
        asked_at: NOW,
        timeout_ms: APPROVAL_TIMEOUT_MS,
        ask: &ask,
        agent,
        client,
        request: &request,
        record: now.0,
        last_approved_record: Some(approved.0),
        catalog: now.1,
        last_approved_catalog: Some(approved.1),
        arguments: &json!({"branch": "main"}),
        withheld,
    })
}

/// A card of a call acting with no credential.
fn plain(
    agent: &AgentIdentity,
    client: Option<&str>,
    approved: (&ExecutionRecord, &Catalog),
    now: (&ExecutionRecord, &Catalog),
) -> ApprovalCard {
    card_of(agent, client, approved, now, &[], &[])
}

fn claude() -> AgentIdentity {
    AgentIdentity {
        pid: 4242,
        start_time: 987_654,
        executable: Some(Artifact {
            path: "/home/dev/.local/share/claude/versions/2.1.3".into(),
            digest: Digest::of(b"claude"),
        }),
        chain: vec!["zsh".into(), "claude".into(), "postern".into()],
        cwd: Some("/work/previews".into()),
    }
}

fn kinds(card: &ApprovalCard) -> Vec<(Severity, &'static str)> {
    card.risks
        .iter()
        .map(|line| {
            let kind = match line.risk {
                Risk::CodeChanged { .. } => "code",
                Risk::Escalation { .. } => "escalation",
                Risk::ClientMismatch { .. } => "client",
                Risk::ToolChanged { .. } => "tool",
                Risk::ReleasesCredentials { .. } => "releases",
                Risk::UsesCredentials { .. } => "uses",
                Risk::EveryUse { .. } => "every-use",
                Risk::CatalogChanged { .. } => "catalog",
                Risk::ContextChanged { .. } => "context",
                Risk::Unconfined => "unconfined",
            };
            (line.severity, kind)
        })
        .collect()
}

#[test]
fn the_risk_strip_says_what_changed_most_severe_first() {
    let (old, new) = (
        record(ExecutionEpoch::new(1_700_000_000_000, 1), b"v1"),
        record(ExecutionEpoch::new(1_700_000_100_000, 2), b"v2"),
    );
    let card = card_of(
        &claude(),
        Some("claude-code 2.1.3"),
        (&old, &catalog(false)),
        (&new, &catalog(true)),
        &["previews-staging", "previews-prod"],
        &["previews-prod".to_owned()],
    );
    assert_eq!(
        kinds(&card),
        [
            (Severity::Danger, "code"),
            (Severity::Caution, "tool"),
            (Severity::Caution, "releases"),
            (Severity::Caution, "uses"),
        ]
    );
    let text: Vec<&str> = card.risks.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        text,
        [
            "The code changed since you approved it: server.js.",
            "publish_preview changed since you approved it, and fills in target = \"preview\" by default.",
            "Allowing gives the server's code previews-prod (it restarts with it).",
            "The call acts with previews-staging.",
        ]
    );
    assert_eq!(card.agent_name, "claude-code 2.1.3");
    assert!(!card.is_calm());
}

#[test]
fn a_new_working_directory_is_a_context_change_not_a_code_change() {
    let old = record(ExecutionEpoch::new(1_700_000_000_000, 1), b"v1");
    let mut new = record(ExecutionEpoch::new(1_700_000_100_000, 2), b"v1");
    new.working_directory = "/work/previews-2".into();
    let same = catalog(true);
    let card = plain(
        &claude(),
        Some("claude-code 2.1.3"),
        (&old, &same),
        (&new, &same),
    );
    assert_eq!(kinds(&card), [(Severity::Caution, "context")]);
    assert_eq!(
        card.risks[0].text,
        "Started with another working directory than the launch you approved."
    );
}

#[test]
fn the_same_code_tools_and_agent_make_a_calm_card() {
    let old = record(ExecutionEpoch::new(1_700_000_000_000, 1), b"v1");
    let new = record(ExecutionEpoch::new(1_700_000_100_000, 2), b"v1");
    let same = catalog(true);
    let card = plain(
        &claude(),
        Some("claude-code 2.1.3"),
        (&old, &same),
        (&new, &same),
    );
    assert!(card.is_calm(), "{:?}", card.risks);
    assert!(matches!(card.epoch.since, IdentitySince::Unchanged { .. }));
}

#[test]
fn a_known_client_name_on_another_program_is_flagged() {
    let old = record(ExecutionEpoch::new(1_700_000_000_000, 1), b"v1");
    let same = catalog(true);
    let mut python = claude();
    python.executable = Some(Artifact {
        path: "/usr/bin/python3.11".into(),
        digest: Digest::of(b"python"),
    });
    python.chain = vec!["bash".into(), "python3.11".into(), "postern".into()];
    let card = plain(
        &python,
        Some("claude-code 2.1.3"),
        (&old, &same),
        (&old, &same),
    );
    assert_eq!(kinds(&card), [(Severity::Danger, "client")]);
    assert_eq!(
        card.risks[0].text,
        "It says it is claude-code 2.1.3, but its program is python3.11."
    );
    // The same program under a name nobody knows is not judged; under no name it is its program.
    let unknown = plain(&python, Some("my-agent 0.1"), (&old, &same), (&old, &same));
    assert!(unknown.is_calm());
    let nameless = card_of(&python, None, (&old, &same), (&old, &same), &[], &[]);
    assert_eq!(nameless.agent_name, "python3.11");
    // Claude Code's native build, named by its version in a `claude` directory, is Claude Code.
    let mut native = python.clone();
    native.executable = Some(Artifact {
        path: "/home/dev/.local/share/claude/versions/2.1.3".into(),
        digest: Digest::of(b"claude"),
    });
    native.chain = vec!["zsh".into(), "2.1.3".into(), "postern".into()];
    let native_card = plain(
        &native,
        Some("claude-code 2.1.3"),
        (&old, &same),
        (&old, &same),
    );
    assert!(native_card.is_calm(), "{:?}", native_card.risks);
    // Claude Code on Node is Claude Code.
    let mut node = claude();
    node.executable = Some(Artifact {
        path: "/usr/bin/node".into(),
        digest: Digest::of(b"node"),
    });
    let on_node = plain(
        &node,
        Some("claude-code 2.1.3"),
        (&old, &same),
        (&old, &same),
    );
    assert!(on_node.is_calm());
}

#[test]
fn an_unconfined_launch_says_so_and_opting_out_is_a_context_change() {
    let old = record(ExecutionEpoch::new(1_700_000_000_000, 1), b"v1");
    let mut new = record(ExecutionEpoch::new(1_700_000_100_000, 2), b"v1");
    new.sandbox = None;
    assert_ne!(old.identity_digest(), new.identity_digest());
    let card = card_of(
        &claude(),
        Some("claude-code 2.1.3"),
        (&old, &catalog(false)),
        (&new, &catalog(false)),
        &[],
        &[],
    );
    assert_eq!(
        kinds(&card),
        [
            (Severity::Caution, "context"),
            (Severity::Caution, "unconfined")
        ]
    );
    let texts: Vec<&str> = card.risks.iter().map(|l| l.text.as_str()).collect();
    assert!(texts[0].contains("another sandbox"), "{texts:?}");
    assert!(texts[1].starts_with("It runs unconfined"), "{texts:?}");
}
