//! The gate's live state as an agent waiting on a call and a human at the approval card
//! notice it: a real audit log and store in a temp home (in-memory keychain), the test
//! process itself as the agent run (so the sweeper sees it alive), a manual clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use postern_domain::catalog::Catalog;
use postern_domain::decision::{
    self, ApprovalCard, ArgumentSource, AskFor, DenyCode, EveryUse, EveryUseSetting, GrantChoice,
    IdentitySince, Reply, SettingTarget,
};
use postern_domain::{
    AgentIdentity, AgentRun, Artifact, CallId, Caller, CatalogView, Digest, ExecutionEpoch,
    ExecutionRecord, GrantEnd, Pinning, Presented, Request, ServerConfig, ServerLabel,
};
use postern_gateway::Command;
use postern_gateway::authorize::{Authorizer, CallToAuthorize, Verdict, Withdrawal, Withdrawn};
use postern_store::Store;
use postern_vault::{MemoryStore, SecretStore};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::sync::oneshot::error::TryRecvError;

use super::{
    AnswerError, Authority, ManualClock, Proof, Proven, SessionMode, SettingsUpdate, VaultState,
};
use crate::{AuditLog, Home};

mod launches;
mod lock;
mod operations;
mod presence;
mod refusals;
mod restart;
mod retry;
mod revoke;
mod step_away;

const SESSION: u64 = 7;
const ENTRY: &str = "/srv/deploy/server.js";

fn label() -> ServerLabel {
    "deployer".parse().expect("label")
}

/// One launch of the `deployer` server: its record (the entry file's bytes are `code`)
/// and its catalog (`deploy`, with a schema default, and `status`).
struct Launch {
    record: ExecutionRecord,
    catalog: Arc<Catalog>,
}

fn launch(epoch: u128, code: &[u8]) -> Launch {
    let artifact = |path: &str, bytes: &[u8]| Artifact {
        path: path.into(),
        digest: Digest::of(bytes),
    };
    let record = ExecutionRecord {
        server_label: label(),
        epoch: ExecutionEpoch::new(1_700_000_000_000, epoch),
        launch_command: vec!["/usr/bin/node".into(), ENTRY.into()],
        executable: artifact("/usr/bin/node", b"node"),
        wrappers: vec![],
        entry: Some(artifact(ENTRY, code)),
        lockfiles: vec![artifact("/srv/deploy/package-lock.json", b"lock")],
        extra_paths: vec![],
        runtime: Some("v22.14.0".into()),
        working_directory: "/srv/deploy".into(),
        env_names: vec!["PATH".into()],
        loader_env: vec![],
        sandbox: None,
        pinning: Pinning::Pinned,
        pid: 4242,
        started_at_ms: 1_700_000_000_000,
    };
    let page = json!({"tools": [
        {
            "name": "deploy",
            "description": "Deploy a branch",
            "inputSchema": {"type": "object", "properties": {
                "branch": {"type": "string"},
                "target": {"type": "string", "default": "preview"},
            }},
        },
        {"name": "status", "inputSchema": {"type": "object"}},
    ]});
    let catalog = Catalog::from_pages([page], None, json!({"tools": {}})).expect("catalog");
    Launch {
        record,
        catalog: Arc::new(catalog),
    }
}

/// The test process itself: a live agent run.
fn me() -> AgentIdentity {
    let pid = std::process::id();
    AgentIdentity {
        pid,
        start_time: postern_supervisor::process_start_time(pid).expect("own start time"),
        executable: None,
        chain: vec!["cargo".into(), "postern-engine-tests".into()],
        cwd: None,
    }
}

/// A call to `tool` at `now`'s epoch from a session last shown the catalog of `shown`.
fn call_to(tool: &str, now: &Launch, shown: &Launch) -> CallToAuthorize {
    let agent = me();
    CallToAuthorize {
        session: SESSION,
        client: Some("claude-code 2.1.3".into()),
        request: Request {
            call: CallId::new(1_700_000_000_000, ulid::Ulid::new().random()),
            caller: Caller::Identified {
                run: AgentRun::of(&agent),
            },
            server: label(),
            epoch: now.record.epoch,
            tool: tool.into(),
            credentials: Default::default(),
            catalog: CatalogView {
                presented: Some(Presented {
                    revision: shown.catalog.digest(),
                    epoch: shown.record.epoch,
                }),
                current: now.catalog.digest(),
                drift: shown.catalog.tool_drift(tool, &now.catalog),
            },
        },
        agent: Some(agent),
        record: now.record.clone().into(),
        catalog: Arc::clone(&now.catalog),
        arguments: json!({"branch": "main"}),
        withheld: Vec::new(),
    }
}

/// Adds the env credential `name` (`TOKEN`) with the value `value`, as a person does; its name.
fn add_env_credential(gate: &Gate, name: &str, value: &str) -> postern_domain::CredentialName {
    use postern_domain::credential::{CredentialSpec, Injection};
    let name: postern_domain::CredentialName = name.parse().expect("name");
    let spec = CredentialSpec::new(
        Injection::Env {
            var: "TOKEN".into(),
        },
        &[],
    )
    .expect("spec");
    gate.authority
        .add_credential(
            &gate.proven,
            &name,
            spec,
            false,
            postern_vault::Secret::new(value.into()),
        )
        .expect("add");
    name
}

fn deploy(at: &Launch) -> CallToAuthorize {
    call_to("deploy", at, at)
}

/// An `Authority` over a fresh home.
struct Gate {
    authority: Authority,
    /// What the gate tells every session (stop the servers holding credentials, ...).
    commands: tokio::sync::broadcast::Sender<Command>,
    clock: Arc<ManualClock>,
    audit: Arc<AuditLog>,
    secrets: Arc<MemoryStore>,
    home: Home,
    /// The person's proof, checked once at the start (a proof may be used again).
    proven: Proven,
    _dir: tempfile::TempDir,
}

/// The test person's passphrase.
const PASSPHRASE: &str = "correct horse battery";

/// An engine as it starts on a home: locked, nothing proven (`Gate` proves and unlocks).
struct Started {
    authority: Authority,
    audit: Arc<AuditLog>,
    clock: Arc<ManualClock>,
    commands: tokio::sync::broadcast::Sender<Command>,
}

impl Started {
    fn on(home: &Home, secrets: &Arc<MemoryStore>) -> Started {
        let store = Arc::new(Mutex::new(Store::open(home.path()).expect("store")));
        let audit = Arc::new(AuditLog::open(
            home.path(),
            Arc::clone(secrets) as Arc<dyn SecretStore>,
        ));
        let clock = Arc::new(ManualClock::new());
        let commands = tokio::sync::broadcast::channel(8).0;
        let authority = Authority::new(
            Arc::clone(&audit),
            store,
            Arc::clone(&clock) as _,
            Arc::clone(secrets) as Arc<dyn SecretStore>,
            commands.clone(),
        );
        Started {
            authority,
            audit,
            clock,
            commands,
        }
    }
}

impl Gate {
    fn new() -> Gate {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path());
        let secrets = Arc::new(MemoryStore::new());
        Self::with(home, secrets, dir)
    }

    /// A gate in observe mode: agent runs are admitted without a card.
    fn observing() -> Gate {
        let gate = Self::new();
        gate.authority
            .update_settings(
                SettingsUpdate {
                    session_mode: Some(SessionMode::Observe),
                    ..SettingsUpdate::default()
                },
                Some(&gate.proven),
            )
            .expect("settings");
        gate
    }

    /// Another gate on `home` (as after an engine restart), unlocked with the passphrase;
    /// its own directory is unused.
    fn on(home: &Home, secrets: Arc<MemoryStore>) -> Gate {
        Self::with(home.clone(), secrets, tempfile::tempdir().expect("tempdir"))
    }

    /// [`Gate::on`] left locked, as a restarted engine is.
    fn on_locked(home: &Home, secrets: Arc<MemoryStore>) -> Gate {
        let gate = Self::on(home, secrets);
        gate.authority.lock("test: as started");
        gate
    }

    fn with(home: Home, secrets: Arc<MemoryStore>, dir: tempfile::TempDir) -> Gate {
        let Started {
            authority,
            audit,
            clock,
            commands,
        } = Started::on(&home, &secrets);
        // Every start is locked: the first on a home sets the passphrase (and unlocks), a
        // restart unlocks with it.
        assert_eq!(
            authority.vault(),
            VaultState::Locked,
            "an engine starts locked"
        );
        if authority.passphrase_set() {
            let proven = authority
                .prove(Some(&Proof::passphrase(PASSPHRASE.into())), "unlock")
                .expect("proof");
            authority.unlock(proven).expect("unlocked");
        } else {
            authority
                .set_passphrase(&postern_vault::Secret::new(PASSPHRASE.into()), None)
                .expect("first passphrase");
        }
        let proven = authority
            .prove(Some(&Proof::passphrase(PASSPHRASE.into())), "test")
            .expect("proof");
        Gate {
            authority,
            commands,
            clock,
            audit,
            secrets,
            home,
            proven,
            _dir: dir,
        }
    }

    /// A fresh proof (for an unlock, which takes one).
    fn prove(&self) -> Proven {
        self.authority
            .prove(Some(&Proof::passphrase(PASSPHRASE.into())), "test")
            .expect("proof")
    }

    /// Asks the gate about `call`; the receiver gets the verdict once `done` is called.
    fn ask(&self, call: CallToAuthorize) -> oneshot::Receiver<Verdict> {
        let (tx, rx) = oneshot::channel();
        self.authority.authorize(
            call,
            Box::new(move |verdict| {
                let _ = tx.send(verdict);
            }),
        );
        rx
    }

    /// Asks about `call`, which must be decided at once (no card).
    fn decided_now(&self, call: CallToAuthorize) -> Verdict {
        let cards = self.authority.approvals().len();
        let verdict = self.ask(call).try_recv().expect("decided without a human");
        assert_eq!(
            self.authority.approvals().len(),
            cards,
            "no card was opened"
        );
        verdict
    }

    /// Asks about `call`, which must wait on a new card; returns the card and the receiver.
    /// The engine stopped and started again on the same home and keychain, and unlocked.
    fn restarted(&self) -> Gate {
        self.audit.close("restart");
        Gate::on(&self.home, Arc::clone(&self.secrets))
    }

    fn carded(&self, call: CallToAuthorize) -> (ApprovalCard, oneshot::Receiver<Verdict>) {
        let before = self.authority.approvals();
        let mut rx = self.ask(call);
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "waits for a human");
        let card = self
            .authority
            .approvals()
            .into_iter()
            .find(|c| !before.iter().any(|b| b.id == c.id))
            .expect("a new card");
        (card, rx)
    }

    /// Opens a card for `call` and approves it with `choice`; the call must be allowed on
    /// a grant, whose id is returned.
    fn approve(&self, call: CallToAuthorize, choice: GrantChoice) -> postern_domain::GrantId {
        let (card, mut rx) = self.carded(call);
        self.authority
            .answer(
                card.id,
                Reply::Approve {
                    choice: Some(choice),
                },
                Some(&self.proven),
                postern_domain::AnswerChannel::Window,
            )
            .expect("answer taken");
        match rx.try_recv() {
            Ok(Verdict::Allow(decision::Authority::Grant(id))) => id,
            other => panic!("expected an allow on a grant, got {other:?}"),
        }
    }

    /// Configures `label` in the store with the environment `env` (`KEY=VALUE`s), as
    /// `postern server add` does.
    fn configure(&self, label: &ServerLabel, env: &[&str]) {
        let env = env.iter().map(|e| e.parse().expect("env")).collect();
        let command = vec!["/usr/bin/node".into(), ENTRY.into()];
        let config = ServerConfig::new(label.clone(), command, None, env).expect("config");
        Store::open(self.home.path())
            .expect("store")
            .add_server(&config)
            .expect("add server");
    }

    /// Every event the audit log committed (closes the log).
    fn events(&self) -> Vec<Value> {
        self.audit.close("test");
        assert_eq!(self.audit.status().failed_batches, 0);
        let mut out = Vec::new();
        // The log's opening key is sealed under the vault key: the person's key opens it.
        crate::audit::export(
            &self.home,
            &*self.secrets,
            Some(&self.proven.key),
            true,
            &mut out,
        )
        .expect("export");
        String::from_utf8(out)
            .expect("utf8")
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).expect("json")["event"].clone())
            .collect()
    }
}

/// What a card says of a launch whose entry file changed since `approved` was approved.
fn entry_changed_since(approved: &Launch) -> IdentitySince {
    IdentitySince::Changed {
        approved_epoch: approved.record.epoch,
        changed_artifacts: vec![ENTRY.into()],
        changed_facts: vec![],
    }
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

fn denied(verdict: Verdict) -> decision::Denial {
    match verdict {
        Verdict::Deny(denial) => denial,
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[tokio::test]
async fn a_first_call_waits_on_one_card_and_a_run_grant_then_allows_repeats_at_once() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let (card, mut rx) = gate.carded(deploy(&a));
    assert_eq!(gate.authority.approvals().len(), 1);
    assert_eq!(card.what, AskFor::SessionAndCall);
    assert_eq!(card.agent.pid, std::process::id());
    assert_eq!(card.server, label());
    assert_eq!(card.tool.name, "deploy");
    assert_eq!(card.tool.description.as_deref(), Some("Deploy a branch"));
    assert_eq!(card.epoch.epoch, a.record.epoch);
    assert_eq!(card.epoch.since, IdentitySince::FirstApproval);
    let arguments: Vec<(&str, &Value, ArgumentSource)> = card
        .arguments
        .iter()
        .map(|arg| (arg.pointer.as_str(), &arg.value, arg.source))
        .collect();
    assert_eq!(
        arguments,
        [
            ("/branch", &json!("main"), ArgumentSource::Sent),
            ("/target", &json!("preview"), ArgumentSource::Default),
        ]
    );
    assert_eq!(
        card.choices,
        [
            GrantChoice::ThisCall,
            GrantChoice::ForMinutes { minutes: 15 },
            GrantChoice::ForMinutes { minutes: 60 },
            GrantChoice::UntilRunEnds,
        ]
    );
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));

    let reply = Reply::Approve {
        choice: Some(GrantChoice::UntilRunEnds),
    };
    gate.authority
        .answer(
            card.id,
            reply,
            Some(&gate.proven),
            postern_domain::AnswerChannel::Window,
        )
        .expect("answer taken");
    let grants = gate.authority.grants();
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].end, GrantEnd::UntilRunEnds);
    assert_eq!(grants[0].execution_epoch, a.record.epoch);
    assert_eq!(
        rx.try_recv(),
        Ok(Verdict::Allow(decision::Authority::Grant(grants[0].id)))
    );
    assert!(gate.authority.approvals().is_empty());

    // The same call again (a new call id): allowed on the grant, nobody asked.
    assert_eq!(
        gate.decided_now(deploy(&a)),
        Verdict::Allow(decision::Authority::Grant(grants[0].id))
    );

    let events = gate.events();
    let requested = of_type(&events, "approval_requested");
    assert_eq!(requested.len(), 1, "{events:#?}");
    assert_eq!(requested[0]["approval"], card.id.to_string());
    assert_eq!(requested[0]["tool"], "deploy");
    let admitted = of_type(&events, "session_approved");
    assert_eq!(admitted.len(), 1);
    assert_eq!(admitted[0]["by"], "human");
    assert_eq!(admitted[0]["session"], SESSION);
    let granted = of_type(&events, "approval_granted");
    assert_eq!(granted.len(), 1);
    assert_eq!(granted[0]["admitted_session"], true);
    assert_eq!(granted[0]["grant"]["id"], grants[0].id.to_string());
}

#[tokio::test]
async fn a_grant_for_minutes_ends_with_the_clock() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let id = gate.approve(deploy(&a), GrantChoice::ForMinutes { minutes: 15 });
    gate.clock.advance(15 * 60_000 - 1);
    assert_eq!(
        gate.decided_now(deploy(&a)),
        Verdict::Allow(decision::Authority::Grant(id))
    );
    gate.clock.advance(1);
    let (card, _rx) = gate.carded(deploy(&a));
    // The session stays admitted: only the call is asked about.
    assert_eq!(card.what, AskFor::Call);
    assert!(gate.authority.grants().is_empty());

    let events = gate.events();
    let ended = of_type(&events, "grant_ended");
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["grant"], id.to_string());
    assert_eq!(ended[0]["reason"], "its time ran out");
}

#[tokio::test]
async fn a_this_call_grant_is_used_up_by_its_call() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    gate.approve(deploy(&a), GrantChoice::ThisCall);
    assert!(gate.authority.grants().is_empty(), "used up");
    let (card, _rx) = gate.carded(deploy(&a));
    assert_eq!(card.what, AskFor::Call);
}

#[tokio::test]
async fn a_denial_refuses_the_call_and_a_second_answer_finds_nothing_open() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let (card, mut rx) = gate.carded(deploy(&a));
    gate.authority
        .answer(
            card.id,
            Reply::Deny,
            Some(&gate.proven),
            postern_domain::AnswerChannel::Window,
        )
        .expect("answer taken");
    let denial = denied(rx.try_recv().expect("decided"));
    assert_eq!(denial.code, DenyCode::ApprovalDenied);
    assert_eq!(denial.detail["error"], "approval_denied");
    assert!(gate.authority.approvals().is_empty());
    let late = gate.authority.answer(
        card.id,
        Reply::Approve {
            choice: Some(GrantChoice::UntilRunEnds),
        },
        Some(&gate.proven),
        postern_domain::AnswerChannel::Window,
    );
    assert_eq!(late, Err(AnswerError::NotOpen(card.id.to_string())));
    assert!(gate.authority.grants().is_empty());
    // Nothing was admitted: the next call asks about the session again.
    assert_eq!(gate.carded(deploy(&a)).0.what, AskFor::SessionAndCall);

    let events = gate.events();
    let refused = of_type(&events, "approval_denied");
    assert_eq!(refused.len(), 1, "{events:#?}");
    assert_eq!(refused[0]["approval"], card.id.to_string());
    assert!(of_type(&events, "approval_granted").is_empty());
}

#[tokio::test]
async fn an_unanswered_card_times_out_and_is_gone() {
    let gate = Gate::new();
    let settings = gate
        .authority
        .update_settings(
            SettingsUpdate {
                approval_timeout_ms: Some(1000),
                ..SettingsUpdate::default()
            },
            Some(&gate.proven),
        )
        .expect("settings");
    assert_eq!(settings.approval_timeout_ms, 1000);
    let a = launch(1, b"v1");
    let (card, rx) = gate.carded(deploy(&a));
    assert_eq!(card.expires_at, card.asked_at + 1000);
    let verdict = tokio::time::timeout(Duration::from_secs(10), rx)
        .await
        .expect("decided within the slack")
        .expect("done called");
    assert_eq!(denied(verdict).code, DenyCode::ApprovalTimeout);
    assert!(gate.authority.approvals().is_empty());
    let late = gate.authority.answer(
        card.id,
        Reply::Deny,
        Some(&gate.proven),
        postern_domain::AnswerChannel::Window,
    );
    assert_eq!(late, Err(AnswerError::NotOpen(card.id.to_string())));

    let events = gate.events();
    let expired = of_type(&events, "approval_expired");
    assert_eq!(expired.len(), 1, "{events:#?}");
    assert_eq!(expired[0]["code"], "approval_timeout");
}

#[tokio::test]
async fn a_grant_of_an_older_epoch_is_stale_until_the_agent_refreshes_and_cards_show_the_change() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let b = launch(2, b"v2");
    gate.approve(deploy(&a), GrantChoice::UntilRunEnds);

    // Prepared against epoch A's catalog, called at epoch B: refused, nobody asked.
    let stale = denied(gate.decided_now(call_to("deploy", &b, &a)));
    assert_eq!(stale.code, DenyCode::AuthorizationStale);
    assert_eq!(
        stale.detail,
        decision::authorization_stale(a.record.epoch, b.record.epoch)
    );

    // After a refresh from epoch B the old grant is no authority: a human is asked again,
    // and the card says what changed since the approved launch.
    let (card, _rx) = gate.carded(deploy(&b));
    assert_eq!(card.what, AskFor::Call, "the run stays admitted");
    assert_eq!(card.epoch.epoch, b.record.epoch);
    assert_eq!(card.epoch.since, entry_changed_since(&a));
    // A relaunch of the approved code reads as unchanged.
    let relaunched = launch(3, b"v1");
    let (card, _rx) = gate.carded(deploy(&relaunched));
    let approved_epoch = a.record.epoch;
    assert_eq!(
        card.epoch.since,
        IdentitySince::Unchanged { approved_epoch }
    );
}

#[tokio::test]
async fn a_withdrawn_call_loses_its_card_and_is_never_answered() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let call = deploy(&a);
    let id = call.request.call;
    let (card, rx) = gate.carded(call);
    // Another session's call of the same id is not this one.
    gate.authority
        .withdraw(SESSION + 1, id, Withdrawn::Disconnected);
    assert_eq!(gate.authority.approvals().len(), 1);
    assert_eq!(
        gate.authority
            .withdraw(SESSION, id, Withdrawn::Disconnected),
        Withdrawal::Withdrawn
    );
    assert!(gate.authority.approvals().is_empty());
    assert!(rx.await.is_err(), "done was dropped without being called");
    let late = gate.authority.answer(
        card.id,
        Reply::Deny,
        Some(&gate.proven),
        postern_domain::AnswerChannel::Window,
    );
    assert_eq!(late, Err(AnswerError::NotOpen(card.id.to_string())));

    let events = gate.events();
    let expired = of_type(&events, "approval_expired");
    assert_eq!(expired.len(), 1, "{events:#?}");
    assert_eq!(expired[0]["code"], "withdrawn");
    assert_eq!(expired[0]["reason"], Withdrawn::Disconnected.as_str());
}

#[tokio::test]
async fn observe_mode_allows_without_a_card() {
    let gate = Gate::observing();
    let a = launch(1, b"v1");
    assert_eq!(
        gate.decided_now(deploy(&a)),
        Verdict::Allow(decision::Authority::Observed)
    );
    assert_eq!(
        gate.decided_now(deploy(&a)),
        Verdict::Allow(decision::Authority::Observed)
    );
    assert!(gate.authority.approvals().is_empty());

    let events = gate.events();
    let admitted = of_type(&events, "session_approved");
    assert_eq!(admitted.len(), 1, "admitted once: {events:#?}");
    assert_eq!(admitted[0]["by"], "observe");
}

/// Observe mode lets calls through without a card, but a credential the launch was not given
/// is released only by a human: that call asks, and approving it relaunches.
#[tokio::test]
async fn observe_mode_still_asks_a_human_to_release_a_withheld_credential() {
    let gate = Gate::observing();
    let a = launch(1, b"v1");
    let mut call = deploy(&a);
    call.request.credentials = ["inventory-api".to_owned()].into();
    call.withheld = vec!["inventory-api".to_owned()];
    let (card, rx) = gate.carded(call);
    assert_eq!(card.withheld_credentials, ["inventory-api"]);
    gate.authority
        .answer(
            card.id,
            Reply::Approve {
                choice: Some(GrantChoice::UntilRunEnds),
            },
            Some(&gate.proven),
            postern_domain::AnswerChannel::Window,
        )
        .expect("approve");
    assert_eq!(rx.await.expect("verdict"), Verdict::Relaunch);
    // A relaunch that still lacks it (its keychain item is gone) asks again, and is not
    // relaunched once more (review 12, G5: it was, in a loop, with no card).
    let b = launch(2, b"v1");
    let mut again = deploy(&b);
    again.request.credentials = ["inventory-api".to_owned()].into();
    again.withheld = vec!["inventory-api".to_owned()];
    let (_card, _rx) = gate.carded(again);
}

#[tokio::test]
async fn every_use_on_the_tool_asks_despite_a_run_grant_and_offers_this_call_only() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let a = launch(1, b"v1");
    gate.approve(deploy(&a), GrantChoice::UntilRunEnds);
    let target = SettingTarget::Tool {
        server: label(),
        tool: "deploy".into(),
    };
    gate.authority
        .set_every_use(
            EveryUseSetting {
                target: target.clone(),
                level: EveryUse::Confirm,
            },
            Some(&gate.proven),
        )
        .expect("every-use");

    let (card, mut rx) = gate.carded(deploy(&a));
    assert_eq!(card.what, AskFor::Call);
    assert_eq!(card.choices, [GrantChoice::ThisCall]);
    assert_eq!(card.every_use, [target]);
    let standing = Reply::Approve {
        choice: Some(GrantChoice::UntilRunEnds),
    };
    assert!(matches!(
        gate.authority.answer(
            card.id,
            standing,
            Some(&gate.proven),
            postern_domain::AnswerChannel::Window
        ),
        Err(AnswerError::Unacceptable(_))
    ));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "still waiting");
    let once = Reply::Approve {
        choice: Some(GrantChoice::ThisCall),
    };
    gate.authority
        .answer(
            card.id,
            once,
            Some(&gate.proven),
            postern_domain::AnswerChannel::Window,
        )
        .expect("answer taken");
    assert!(matches!(
        rx.try_recv(),
        Ok(Verdict::Allow(decision::Authority::Grant(_)))
    ));
    // The next call asks again.
    assert_eq!(gate.carded(deploy(&a)).0.choices, [GrantChoice::ThisCall]);
}

#[tokio::test]
async fn an_answer_after_the_card_expired_by_the_clock_is_not_taken() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let (card, mut rx) = gate.carded(deploy(&a));
    // The gate's clock passed the card's end (a suspended laptop, a late timer) before the
    // timeout task woke: the human's approval comes too late and must not read as taken.
    gate.clock.advance(card.expires_at - card.asked_at);
    let reply = Reply::Approve {
        choice: Some(GrantChoice::UntilRunEnds),
    };
    let late = gate.authority.answer(
        card.id,
        reply,
        Some(&gate.proven),
        postern_domain::AnswerChannel::Window,
    );
    assert_eq!(
        denied(rx.try_recv().expect("decided")).code,
        DenyCode::ApprovalTimeout
    );
    assert!(gate.authority.grants().is_empty());
    assert_eq!(late, Err(AnswerError::NotOpen(card.id.to_string())));
}

/// A secret an imported configuration left in a server's environment moves into the keychain:
/// an env credential bound to the server, sealed, the plain value gone from the server's
/// configuration; a second move, or a variable the server does not set, changes nothing.
#[tokio::test]
async fn a_plain_environment_secret_moves_into_the_keychain_bound_to_its_server() {
    let gate = Gate::new();
    gate.configure(&label(), &["GITHUB_TOKEN=ghp-plain-value-1", "TZ=UTC"]);

    let name = gate
        .authority
        .move_env_to_keychain(&gate.proven, &label(), "GITHUB_TOKEN")
        .expect("moved");
    assert_eq!(name.as_str(), "deployer-github_token");

    let store = Store::open(gate.home.path()).expect("store");
    let config = store.server(&label()).expect("read").expect("configured");
    let env: Vec<&str> = config.env.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(env, ["TZ"], "the plain value left the configuration");
    let bound: Vec<String> = store
        .bindings(&label())
        .expect("bindings")
        .into_iter()
        .map(|c| c.name.to_string())
        .collect();
    assert_eq!(bound, [name.to_string()]);
    // Nor in the database's files: not in a free part of a page, not in an older page in
    // the write-ahead log.
    for file in ["postern.db", "postern.db-wal"] {
        let bytes = std::fs::read(gate.home.path().join(file)).unwrap_or_default();
        assert!(
            !bytes
                .windows(b"ghp-plain-value-1".len())
                .any(|w| w == b"ghp-plain-value-1"),
            "{file} still holds the moved value"
        );
    }
    let item = postern_domain::credential::keychain_item(&name, 1);
    let stored = gate.secrets.get(&item).expect("get").expect("an item");
    assert!(
        !String::from_utf8_lossy(stored.expose()).contains("ghp-plain-value-1"),
        "the keychain holds the value sealed, never in the clear"
    );

    for (var, why) in [
        ("GITHUB_TOKEN", "sets no environment variable"),
        ("TZ_X", "sets no"),
    ] {
        let err = gate
            .authority
            .move_env_to_keychain(&gate.proven, &label(), var)
            .expect_err("refused");
        assert!(err.to_string().contains(why), "{err}");
    }
    // A credential of that name already there: the configuration keeps its variable.
    gate.configure(&label(), &["GITHUB_TOKEN=ghp-plain-value-2"]);
    let err = gate
        .authority
        .move_env_to_keychain(&gate.proven, &label(), "GITHUB_TOKEN")
        .expect_err("the name is taken");
    assert!(err.to_string().contains("exists"), "{err}");
    let kept = store.server(&label()).expect("read").expect("configured");
    assert_eq!(kept.env.len(), 1, "nothing changed");
}
