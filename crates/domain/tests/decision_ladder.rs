//! The decision ladder (issue 5): every combination of the states it reads, against an
//! independent statement of the expected outcome, and properties over random inputs.

use std::collections::BTreeSet;

use postern_domain::catalog::{CatalogDigest, ToolDrift};
use postern_domain::decision::{
    APPROVAL_TIMEOUT_MS, Ask, AskFor, Authority, CardState, Decision, DenyCode, EveryUse,
    EveryUseSetting, GrantChoice, Inputs, Reply, SessionMode, SessionStatus, SettingTarget,
    Settlement, VaultState, authorization_stale, decide, decide_operation, known_catalog,
    strictest,
};
use postern_domain::{
    AgentRun, CallId, Caller, CatalogView, Coverage, Digest, ExecutionEpoch, Grant, GrantEnd,
    GrantId, Presented, Request, ServerLabel, ToolScope,
};
use proptest::prelude::*;
use serde_json::json;

const NOW: u64 = 1_800_000_000_000;
const RUN: AgentRun = AgentRun {
    pid: 4242,
    start_time: 77,
};

fn epoch(n: u128) -> ExecutionEpoch {
    ExecutionEpoch::new(1_700_000_000_000 + n as u64, n)
}

fn revision(n: u8) -> CatalogDigest {
    Digest::of(&[n]).to_string().parse().expect("a digest")
}

fn label(s: &str) -> ServerLabel {
    s.parse().expect("a label")
}

fn call_id() -> CallId {
    CallId::new(NOW, 1)
}

#[derive(Clone, Copy, Debug)]
enum Listed {
    Never,
    OldEpoch,
    CurrentEpoch,
    StaleTool,
    UnknownTool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Held {
    Nothing,
    ForRun,
    OldEpoch,
    ThisCall,
    OtherCall,
    OtherRun,
    Expired,
}

fn request(identified: bool, listed: Listed) -> Request {
    let current = epoch(2);
    let (presented, drift) = match listed {
        Listed::Never => (None, ToolDrift::Unchanged),
        Listed::OldEpoch => (Some(epoch(1)), ToolDrift::Unchanged),
        Listed::CurrentEpoch => (Some(current), ToolDrift::Unchanged),
        Listed::StaleTool => (Some(epoch(1)), ToolDrift::Changed),
        Listed::UnknownTool => (Some(current), ToolDrift::Unknown),
    };
    Request {
        call: call_id(),
        caller: if identified {
            Caller::Identified { run: RUN }
        } else {
            Caller::Unidentifiable {
                reason: "the peer exited".into(),
            }
        },
        server: label("inventory"),
        epoch: current,
        tool: "inventory_adjust".into(),
        credentials: ["inventory-api-staging".to_owned()].into(),
        catalog: CatalogView {
            presented: presented.map(|epoch| Presented {
                revision: revision(1),
                epoch,
            }),
            current: revision(2),
            drift,
        },
    }
}

fn grant(held: Held) -> Option<Grant> {
    let base = Grant {
        id: GrantId::new(NOW - 1000, 5),
        agent_run: RUN,
        server_label: label("inventory"),
        execution_epoch: epoch(2),
        tool_scope: ToolScope::Tools(["inventory_adjust".to_owned()].into()),
        credential_scope: ["inventory-api-staging".to_owned()].into(),
        issued_at: NOW - 1000,
        end: GrantEnd::UntilRunEnds,
    };
    Some(match held {
        Held::Nothing => return None,
        Held::ForRun => base,
        Held::OldEpoch => Grant {
            execution_epoch: epoch(1),
            ..base
        },
        Held::ThisCall => Grant {
            end: GrantEnd::ThisCallOnly { call: call_id() },
            ..base
        },
        Held::OtherCall => Grant {
            end: GrantEnd::ThisCallOnly {
                call: CallId::new(NOW - 5000, 2),
            },
            ..base
        },
        Held::OtherRun => Grant {
            agent_run: AgentRun {
                pid: RUN.pid,
                start_time: RUN.start_time + 1,
            },
            ..base
        },
        Held::Expired => Grant {
            end: GrantEnd::Until { unix_ms: NOW },
            ..base
        },
    })
}

/// The outcome the ladder must reach, stated rung by rung without looking at its code.
fn expected(
    vault: VaultState,
    mode: SessionMode,
    session: SessionStatus,
    identified: bool,
    listed: Listed,
    held: Held,
    every_use: EveryUse,
) -> String {
    if vault == VaultState::Quarantined {
        return "deny audit_quarantined".into();
    }
    if vault != VaultState::Ready {
        return "deny vault_locked".into();
    }
    if !identified && mode == SessionMode::Prompt {
        return "deny session_unidentifiable".into();
    }
    let covered = identified && matches!(held, Held::ForRun | Held::ThisCall);
    let refreshed = matches!(listed, Listed::CurrentEpoch | Listed::UnknownTool);
    if identified && held == Held::OldEpoch && !refreshed {
        return "deny authorization_stale".into();
    }
    if matches!(listed, Listed::StaleTool) {
        return "deny catalog_stale".into();
    }
    if matches!(listed, Listed::UnknownTool) {
        return "deny unknown_tool".into();
    }
    let admitted = mode == SessionMode::Observe || session == SessionStatus::Approved;
    if every_use == EveryUse::Confirm {
        if !identified {
            return "deny session_unidentifiable".into();
        }
        return match (held == Held::ThisCall, admitted) {
            (true, true) => "allow grant",
            (true, false) => "ask session",
            (false, true) => "ask call once",
            (false, false) => "ask sessionAndCall once",
        }
        .into();
    }
    match (mode, covered, admitted) {
        (SessionMode::Observe, true, _) => "allow grant",
        (SessionMode::Observe, false, _) => "allow observed",
        (SessionMode::Prompt, true, true) => "allow grant",
        (SessionMode::Prompt, true, false) => "ask session",
        (SessionMode::Prompt, false, true) => "ask call any",
        (SessionMode::Prompt, false, false) => "ask sessionAndCall any",
    }
    .into()
}

fn describe(decision: &Decision) -> String {
    match decision {
        Decision::Allow {
            authority: Authority::Grant(_),
        } => "allow grant".into(),
        Decision::Allow {
            authority: Authority::Observed,
        } => "allow observed".into(),
        Decision::Allow {
            authority: Authority::Admitted,
        } => "allow admitted (never for a tool call)".into(),
        Decision::Deny(denial) => {
            assert_eq!(denial.detail["error"], denial.code.as_str());
            assert!(!denial.message.is_empty());
            format!("deny {}", denial.code.as_str())
        }
        Decision::AskHuman(ask) => {
            let what = match ask.what {
                AskFor::Session => return "ask session".into(),
                AskFor::Call => "call",
                AskFor::SessionAndCall => "sessionAndCall",
            };
            let choices = if ask.choices == [GrantChoice::ThisCall] {
                "once"
            } else {
                assert!(ask.choices.contains(&GrantChoice::UntilRunEnds));
                assert!(
                    ask.choices
                        .iter()
                        .any(|c| matches!(c, GrantChoice::ForMinutes { .. }))
                );
                "any"
            };
            format!("ask {what} {choices}")
        }
    }
}

#[test]
fn every_combination_follows_the_ladder() {
    let vaults = [
        VaultState::Locked,
        VaultState::Unlocking,
        VaultState::Ready,
        VaultState::Quarantined,
    ];
    let modes = [SessionMode::Prompt, SessionMode::Observe];
    let sessions = [SessionStatus::Approved, SessionStatus::NotApproved];
    let listings = [
        Listed::Never,
        Listed::OldEpoch,
        Listed::CurrentEpoch,
        Listed::StaleTool,
        Listed::UnknownTool,
    ];
    let holdings = [
        Held::Nothing,
        Held::ForRun,
        Held::OldEpoch,
        Held::ThisCall,
        Held::OtherCall,
        Held::OtherRun,
        Held::Expired,
    ];
    let levels = [EveryUse::Off, EveryUse::Confirm];
    let mut cases = 0;
    let mut outcomes = BTreeSet::new();
    for vault in vaults {
        for mode in modes {
            for session in sessions {
                for identified in [true, false] {
                    for listed in listings {
                        for held in holdings {
                            for level in levels {
                                let request = request(identified, listed);
                                let grants: Vec<Grant> = grant(held).into_iter().collect();
                                let settings = [EveryUseSetting {
                                    target: SettingTarget::Server {
                                        server: label("inventory"),
                                    },
                                    level,
                                }];
                                let inputs = Inputs {
                                    vault,
                                    mode,
                                    session,
                                    every_use: &settings,
                                    grants: &grants,
                                    request: &request,
                                    now: NOW,
                                };
                                let got = describe(&decide(&inputs));
                                let want =
                                    expected(vault, mode, session, identified, listed, held, level);
                                assert_eq!(
                                    got, want,
                                    "{vault:?} {mode:?} {session:?} identified={identified} {listed:?} {held:?} {level:?}"
                                );
                                outcomes.insert(got);
                                cases += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    assert_eq!(cases, 4 * 2 * 2 * 2 * 5 * 7 * 2);
    // Every outcome the ladder can reach was reached.
    assert_eq!(
        outcomes.into_iter().collect::<Vec<_>>(),
        [
            "allow grant",
            "allow observed",
            "ask call any",
            "ask call once",
            "ask session",
            "ask sessionAndCall any",
            "ask sessionAndCall once",
            "deny audit_quarantined",
            "deny authorization_stale",
            "deny catalog_stale",
            "deny session_unidentifiable",
            "deny unknown_tool",
            "deny vault_locked",
        ]
    );
}

#[test]
fn the_rebuild_test_in_miniature() {
    // Epoch 1: approved for the run, the call goes through under the grant.
    let mut old_call = request(true, Listed::CurrentEpoch);
    old_call.epoch = epoch(1);
    old_call.catalog.presented = Some(Presented {
        revision: revision(2),
        epoch: epoch(1),
    });
    let grants = vec![Grant {
        execution_epoch: epoch(1),
        ..grant(Held::ForRun).expect("a grant")
    }];
    let inputs = |request| Inputs {
        vault: VaultState::Ready,
        mode: SessionMode::Prompt,
        session: SessionStatus::Approved,
        every_use: &[],
        grants: &grants,
        request,
        now: NOW,
    };
    assert_eq!(
        decide(&inputs(&old_call)),
        Decision::Allow {
            authority: Authority::Grant(grants[0].id)
        }
    );
    // The server is replaced: the prepared call is refused with both epochs.
    let prepared = Request {
        epoch: epoch(2),
        ..old_call.clone()
    };
    let Decision::Deny(denial) = decide(&inputs(&prepared)) else {
        panic!("a stale call must be refused");
    };
    assert_eq!(denial.code, DenyCode::AuthorizationStale);
    assert_eq!(denial.detail, authorization_stale(epoch(1), epoch(2)));
    // The agent refreshes its catalog from epoch 2: a fresh approval is asked for.
    let refreshed = Request {
        catalog: CatalogView {
            presented: Some(Presented {
                revision: revision(2),
                epoch: epoch(2),
            }),
            ..prepared.catalog.clone()
        },
        ..prepared.clone()
    };
    let Decision::AskHuman(ask) = decide(&inputs(&refreshed)) else {
        panic!("a refreshed call must ask");
    };
    assert_eq!(ask.what, AskFor::Call);
    let new = ask
        .grant(
            GrantChoice::UntilRunEnds,
            GrantId::new(NOW, 9),
            &refreshed,
            NOW,
        )
        .expect("an offered choice makes a grant");
    assert_eq!(new.execution_epoch, epoch(2));
    let mut grants = grants.clone();
    grants.push(new.clone());
    let inputs = Inputs {
        grants: &grants,
        ..inputs(&refreshed)
    };
    assert_eq!(
        decide(&inputs),
        Decision::Allow {
            authority: Authority::Grant(new.id)
        }
    );
}

#[test]
fn a_grant_for_n_minutes_expires() {
    let request = request(true, Listed::CurrentEpoch);
    let ask = Ask {
        what: AskFor::Call,
        every_use: vec![],
        choices: vec![GrantChoice::ForMinutes { minutes: 15 }],
    };
    let g = ask
        .grant(
            GrantChoice::ForMinutes { minutes: 15 },
            GrantId::new(NOW, 1),
            &request,
            NOW,
        )
        .expect("offered");
    assert!(g.covers(&request, NOW + 15 * 60_000 - 1).is_covered());
    assert_eq!(
        g.covers(&request, NOW + 15 * 60_000),
        Coverage::Expired {
            ended_at: NOW + 15 * 60_000
        }
    );
    assert!(
        ask.grant(
            GrantChoice::UntilRunEnds,
            GrantId::new(NOW, 2),
            &request,
            NOW
        )
        .is_none(),
        "a choice that was not offered makes no grant"
    );
}

#[test]
fn answers_settle_into_grants_or_stable_refusals() {
    let ask = Ask {
        what: AskFor::SessionAndCall,
        every_use: vec![],
        choices: vec![GrantChoice::ThisCall, GrantChoice::UntilRunEnds],
    };
    let settle = |reply, now, card| ask.settle(reply, NOW, now, APPROVAL_TIMEOUT_MS, card);
    assert_eq!(settle(None, NOW + 1, CardState::Open), Settlement::Pending);
    let approve = |choice| Some(Reply::Approve { choice });
    assert_eq!(
        settle(
            approve(Some(GrantChoice::ThisCall)),
            NOW + 1,
            CardState::Open
        ),
        Settlement::Approved {
            admit_session: true,
            grant: Some(GrantChoice::ThisCall)
        }
    );
    assert_eq!(
        settle(approve(None), NOW + 1, CardState::Open),
        Settlement::Unacceptable
    );
    assert_eq!(
        settle(
            approve(Some(GrantChoice::ForMinutes { minutes: 5 })),
            NOW + 1,
            CardState::Open
        ),
        Settlement::Unacceptable
    );
    let code = |s: Settlement| match s {
        Settlement::Refused(d) => d.code,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(
        code(settle(Some(Reply::Deny), NOW + 1, CardState::Open)),
        DenyCode::ApprovalDenied
    );
    // A late approval is ignored.
    assert_eq!(
        code(settle(
            approve(Some(GrantChoice::ThisCall)),
            NOW + APPROVAL_TIMEOUT_MS,
            CardState::Open
        )),
        DenyCode::ApprovalTimeout
    );
    // A lock or unlock while the card was open.
    assert_eq!(
        code(settle(
            approve(Some(GrantChoice::ThisCall)),
            NOW + 1,
            CardState::Invalidated
        )),
        DenyCode::ApprovalExpired
    );
}

#[test]
fn authorization_stale_is_exactly_the_documented_object() {
    let approved: ExecutionEpoch = "01JQ7R4S4S0QJ7GZP1S2ABCDEF".parse().expect("epoch");
    let current: ExecutionEpoch = "01JQ7R9KQ6K2Y8W4JH0MABCDEF".parse().expect("epoch");
    let value = authorization_stale(approved, current);
    assert_eq!(
        value,
        json!({
            "error": "authorization_stale",
            "reason": "server execution epoch changed",
            "approvedEpoch": "01JQ7R4S4S0QJ7GZP1S2ABCDEF",
            "currentEpoch": "01JQ7R9KQ6K2Y8W4JH0MABCDEF",
            "retry": "refresh tool metadata and request authorization"
        })
    );
    // Exactly these keys, in this order.
    assert_eq!(
        serde_json::to_string(&value).expect("json"),
        concat!(
            r#"{"error":"authorization_stale","reason":"server execution epoch changed","#,
            r#""approvedEpoch":"01JQ7R4S4S0QJ7GZP1S2ABCDEF","currentEpoch":"01JQ7R9KQ6K2Y8W4JH0MABCDEF","#,
            r#""retry":"refresh tool metadata and request authorization"}"#
        )
    );
}

#[test]
fn settings_apply_by_tool_server_and_credential() {
    let request = request(true, Listed::CurrentEpoch);
    let confirm = |target| EveryUseSetting {
        target,
        level: EveryUse::Confirm,
    };
    let elsewhere = [
        confirm(SettingTarget::Server {
            server: label("other"),
        }),
        confirm(SettingTarget::Tool {
            server: label("inventory"),
            tool: "inventory_lookup".into(),
        }),
        confirm(SettingTarget::Tool {
            server: label("other"),
            tool: "inventory_adjust".into(),
        }),
        confirm(SettingTarget::Credential {
            name: "inventory-api-prod".into(),
        }),
    ];
    assert_eq!(strictest(&elsewhere, &request), (EveryUse::Off, vec![]));
    let on_credential = SettingTarget::Credential {
        name: "inventory-api-staging".into(),
    };
    let mut settings = elsewhere.to_vec();
    settings.push(EveryUseSetting {
        target: SettingTarget::Server {
            server: label("inventory"),
        },
        level: EveryUse::Off,
    });
    settings.push(confirm(on_credential.clone()));
    assert_eq!(
        strictest(&settings, &request),
        (EveryUse::Confirm, vec![on_credential])
    );
}

// ---- properties ---------------------------------------------------------------------

fn any_vault() -> impl Strategy<Value = VaultState> {
    prop_oneof![
        Just(VaultState::Locked),
        Just(VaultState::Unlocking),
        Just(VaultState::Ready),
        Just(VaultState::Quarantined),
    ]
}

fn any_end() -> impl Strategy<Value = GrantEnd> {
    prop_oneof![
        Just(GrantEnd::UntilRunEnds),
        (0u64..4).prop_map(|n| GrantEnd::ThisCallOnly {
            call: CallId::new(NOW, u128::from(n))
        }),
        (NOW - 10..NOW + 10).prop_map(|unix_ms| GrantEnd::Until { unix_ms }),
    ]
}

fn any_grant() -> impl Strategy<Value = Grant> {
    (
        0u32..3,
        0u64..2,
        prop_oneof![Just("inventory"), Just("other")],
        0u128..4,
        prop::collection::btree_set(prop_oneof![Just("a"), Just("b"), Just("c")], 0..3),
        prop::collection::btree_set(prop_oneof![Just("x"), Just("y")], 0..3),
        any_end(),
        any::<bool>(),
    )
        .prop_map(
            |(pid, start, server, e, tools, creds, end, all_tools)| Grant {
                id: GrantId::new(NOW, u128::from(pid) * 100 + e),
                agent_run: AgentRun {
                    pid,
                    start_time: start,
                },
                server_label: label(server),
                execution_epoch: epoch(e),
                tool_scope: if all_tools {
                    ToolScope::AllToolsOfCatalog(revision(e as u8))
                } else {
                    ToolScope::Tools(tools.into_iter().map(str::to_owned).collect())
                },
                credential_scope: creds.into_iter().map(str::to_owned).collect(),
                issued_at: NOW - 100,
                end,
            },
        )
}

fn any_request() -> impl Strategy<Value = Request> {
    (
        0u32..3,
        0u64..2,
        any::<bool>(),
        prop_oneof![Just("inventory"), Just("other")],
        0u128..4,
        prop_oneof![Just("a"), Just("b"), Just("c")],
        prop::collection::btree_set(prop_oneof![Just("x"), Just("y")], 0..3),
        0u64..4,
        prop::option::of(0u128..4),
        0u8..4,
        prop_oneof![
            Just(ToolDrift::Unchanged),
            Just(ToolDrift::Changed),
            Just(ToolDrift::Added),
            Just(ToolDrift::Removed),
            Just(ToolDrift::Unknown),
        ],
    )
        .prop_map(
            |(pid, start, identified, server, e, tool, creds, call, shown, rev, drift)| Request {
                call: CallId::new(NOW, u128::from(call)),
                caller: if identified {
                    Caller::Identified {
                        run: AgentRun {
                            pid,
                            start_time: start,
                        },
                    }
                } else {
                    Caller::Unidentifiable {
                        reason: "gone".into(),
                    }
                },
                server: label(server),
                epoch: epoch(e),
                tool: tool.into(),
                credentials: creds.into_iter().map(str::to_owned).collect(),
                catalog: CatalogView {
                    presented: shown.map(|s| Presented {
                        revision: revision(rev),
                        epoch: epoch(s),
                    }),
                    current: revision(rev),
                    drift,
                },
            },
        )
}

fn any_settings() -> impl Strategy<Value = Vec<EveryUseSetting>> {
    let target = prop_oneof![
        prop_oneof![Just("a"), Just("b")].prop_map(|t| SettingTarget::Tool {
            server: label("inventory"),
            tool: t.into()
        }),
        prop_oneof![Just("inventory"), Just("other")]
            .prop_map(|s| SettingTarget::Server { server: label(s) }),
        prop_oneof![Just("x"), Just("y")]
            .prop_map(|n| SettingTarget::Credential { name: n.into() }),
    ];
    let level = prop_oneof![Just(EveryUse::Off), Just(EveryUse::Confirm)];
    prop::collection::vec(
        (target, level).prop_map(|(target, level)| EveryUseSetting { target, level }),
        0..5,
    )
}

fn any_inputs() -> impl Strategy<
    Value = (
        VaultState,
        SessionMode,
        SessionStatus,
        Vec<EveryUseSetting>,
        Vec<Grant>,
        Request,
        u64,
    ),
> {
    (
        any_vault(),
        prop_oneof![Just(SessionMode::Prompt), Just(SessionMode::Observe)],
        prop_oneof![
            Just(SessionStatus::Approved),
            Just(SessionStatus::NotApproved)
        ],
        any_settings(),
        prop::collection::vec(any_grant(), 0..6).prop_map(|grants| {
            // Ids are unique on record.
            let ids = (0u128..).map(|n| GrantId::new(NOW, 1000 + n));
            grants
                .into_iter()
                .zip(ids)
                .map(|(g, id)| Grant { id, ..g })
                .collect()
        }),
        any_request(),
        NOW - 20..NOW + 20,
    )
}

proptest! {
    #[test]
    fn a_grant_never_matches_another_epoch(grant in any_grant(), request in any_request(), now in NOW - 20..NOW + 20) {
        prop_assume!(grant.execution_epoch != request.epoch);
        let coverage = grant.covers(&request, now);
        prop_assert!(!coverage.is_covered());
        if request.run() == Some(grant.agent_run) && request.server == grant.server_label {
            prop_assert_eq!(coverage, Coverage::StaleEpoch { approved: grant.execution_epoch, current: request.epoch });
        }
    }

    #[test]
    fn the_ladder_never_allows_under_a_grant_of_another_epoch(
        (vault, mode, session, settings, grants, request, now) in any_inputs()
    ) {
        let inputs = Inputs { vault, mode, session, every_use: &settings, grants: &grants, request: &request, now };
        if let Decision::Allow { authority: Authority::Grant(id) } = decide(&inputs) {
            let used = grants.iter().find(|g| g.id == id).expect("a grant on record");
            prop_assert_eq!(used.execution_epoch, request.epoch);
            prop_assert!(used.covers(&request, now).is_covered());
        }
    }

    #[test]
    fn a_locked_vault_always_denies(
        (_, mode, session, settings, grants, request, now) in any_inputs(),
        vault in prop_oneof![Just(VaultState::Locked), Just(VaultState::Unlocking)],
    ) {
        let inputs = Inputs { vault, mode, session, every_use: &settings, grants: &grants, request: &request, now };
        let Decision::Deny(denial) = decide(&inputs) else {
            return Err(TestCaseError::fail("a locked vault must deny"));
        };
        prop_assert_eq!(denial.code, DenyCode::VaultLocked);
        prop_assert!(!denial.detail.to_string().contains(request.server.as_str()), "nothing from the vault or config leaks");
    }

    #[test]
    fn the_strictest_every_use_setting_wins(
        (_, mode, session, settings, grants, request, now) in any_inputs()
    ) {
        let applicable: Vec<&EveryUseSetting> = settings.iter().filter(|s| match &s.target {
            SettingTarget::Tool { server, tool } => *server == request.server && *tool == request.tool,
            SettingTarget::Server { server } => *server == request.server,
            SettingTarget::Credential { name } => request.credentials.contains(name),
        }).collect();
        let max = applicable.iter().map(|s| s.level).max().unwrap_or(EveryUse::Off);
        let (level, sources) = strictest(&settings, &request);
        prop_assert_eq!(level, max);
        for source in &sources {
            prop_assert!(applicable.iter().any(|s| &s.target == source && s.level == max));
        }
        if max == EveryUse::Confirm {
            // However permissive the rest (an approved session, observe mode, standing
            // grants), the call needs its own decision.
            let inputs = Inputs { vault: VaultState::Ready, mode, session, every_use: &settings, grants: &grants, request: &request, now };
            match decide(&inputs) {
                Decision::Allow { authority: Authority::Grant(id) } => {
                    let used = grants.iter().find(|g| g.id == id).expect("on record");
                    prop_assert_eq!(used.end, GrantEnd::ThisCallOnly { call: request.call });
                }
                Decision::Allow { authority: Authority::Observed | Authority::Admitted } => {
                    return Err(TestCaseError::fail("every-use must never be passed without a grant"));
                }
                Decision::AskHuman(ask) => {
                    prop_assert!(ask.decides_call() || ask.what == AskFor::Session);
                    if ask.decides_call() {
                        prop_assert_eq!(ask.choices, vec![GrantChoice::ThisCall]);
                        prop_assert_eq!(ask.every_use, sources);
                    }
                }
                Decision::Deny(_) => {}
            }
        }
    }
}

/// A request other than a tool call (refresh-contract §10): every combination of the vault,
/// the caller, the mode and admission, against the rule stated independently.
#[test]
fn an_operation_needs_a_ready_vault_an_identified_caller_and_an_admitted_run() {
    let server = label("everything");
    let callers = [
        Caller::Identified { run: RUN },
        Caller::Unidentifiable {
            reason: "gone".into(),
        },
    ];
    for vault in [
        VaultState::Locked,
        VaultState::Unlocking,
        VaultState::Ready,
        VaultState::Quarantined,
    ] {
        for caller in &callers {
            for mode in [SessionMode::Prompt, SessionMode::Observe] {
                for session in [SessionStatus::Approved, SessionStatus::NotApproved] {
                    let decided =
                        decide_operation(vault, mode, session, caller, &server, "resources/read");
                    let identified = matches!(caller, Caller::Identified { .. });
                    let expected = match (vault, mode) {
                        (VaultState::Quarantined, _) => Err(DenyCode::AuditQuarantined),
                        (VaultState::Locked | VaultState::Unlocking, _) => {
                            Err(DenyCode::VaultLocked)
                        }
                        (_, SessionMode::Observe) => Ok(Authority::Observed),
                        _ if !identified => Err(DenyCode::SessionUnidentifiable),
                        _ if session == SessionStatus::Approved => Ok(Authority::Admitted),
                        _ => Err(DenyCode::SessionNotAdmitted),
                    };
                    assert_eq!(
                        decided.map_err(|d| d.code),
                        expected,
                        "{vault:?} {caller:?} {mode:?} {session:?}"
                    );
                }
            }
        }
    }
    let refused = decide_operation(
        VaultState::Ready,
        SessionMode::Prompt,
        SessionStatus::NotApproved,
        &callers[0],
        &server,
        "prompts/get",
    )
    .expect_err("not admitted");
    assert_eq!(refused.detail["error"], "session_not_admitted");
    assert_eq!(refused.detail["method"], "prompts/get");
    assert!(
        refused.message.contains("prompts/get"),
        "{}",
        refused.message
    );
}

/// A client that never re-lists (Codex) keeps calling after a rebuild: the ladder, fed what the
/// session knows ([`known_catalog`], the gateway's rule), refuses exactly one call as stale,
/// the one composed before the agent could know, and asks a human about every later one,
/// whether the tool's definition stayed (the code changed) or changed (its new schema).
#[test]
fn at_most_one_call_per_epoch_change_is_refused_as_stale() {
    for drift in [ToolDrift::Unchanged, ToolDrift::Changed] {
        let grants = vec![Grant {
            execution_epoch: epoch(1),
            ..grant(Held::ForRun).expect("a grant")
        }];
        // Shown at epoch 1; the server now runs epoch 2; nobody re-lists.
        let shown = Some((revision(1), epoch(1)));
        let current_revision = revision(if drift == ToolDrift::Changed { 2 } else { 1 });
        let current = Some((current_revision, epoch(2)));
        let mut told = None;
        let mut outcomes = Vec::new();
        for _ in 0..4 {
            let (presented, at) = known_catalog(shown, current, told).expect("a catalog");
            let request = Request {
                epoch: epoch(2),
                catalog: CatalogView {
                    presented: Some(Presented {
                        revision: presented,
                        epoch: at,
                    }),
                    current: current_revision,
                    drift: if at == epoch(2) {
                        ToolDrift::Unchanged
                    } else {
                        drift
                    },
                },
                ..request(true, Listed::CurrentEpoch)
            };
            let decision = decide(&Inputs {
                vault: VaultState::Ready,
                mode: SessionMode::Prompt,
                session: SessionStatus::Approved,
                every_use: &[],
                grants: &grants,
                request: &request,
                now: NOW,
            });
            if let Decision::Deny(denial) = &decision
                && matches!(
                    denial.code,
                    DenyCode::AuthorizationStale | DenyCode::CatalogStale
                )
            {
                told = Some(epoch(2));
            }
            outcomes.push(describe(&decision));
        }
        let stale = outcomes.iter().filter(|o| o.contains("stale")).count();
        assert_eq!(stale, 1, "{drift:?}: {outcomes:?}");
        assert!(
            outcomes[0].contains("stale"),
            "the first call: {outcomes:?}"
        );
        assert!(
            outcomes[1..].iter().all(|o| o.starts_with("ask")),
            "{drift:?}: every later call reaches a human: {outcomes:?}"
        );
    }
}
