//! What agents may do now, as shells show it (issue 18 item 5): every live grant, under the
//! agent run it was given to, named by the agent's own client name and version (from its
//! `initialize`) and its working directory; and where every call asks a human (the every-use
//! settings). Built from the gate's grants and the sessions' snapshot; nothing here decides.
//! Like [`crate::api`], these types cross the app's IPC boundary and have TypeScript twins.

use std::collections::BTreeMap;

use postern_domain::decision::{EveryUseSetting, SettingTarget};
use postern_domain::{AgentRun, Grant, GrantEnd, ToolScope};
use postern_gateway::SessionInfo;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::api::Launches;

/// The Permissions page: live grants by agent run, and the every-use settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Permissions {
    /// Agent runs holding at least one live grant, the longest-held grant's run first.
    pub runs: Vec<RunGrants>,
    /// Where every call asks a human, whatever was granted (in the store's order).
    pub every_use: Vec<EveryUseTarget>,
}

/// One agent run and what it was granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunGrants {
    /// The run, as the revoke-all command takes it back.
    pub run: RunKey,
    /// The agent's own name and version from its `initialize` ("claude-code 2.1.3";
    /// self-reported), when one of its sessions is connected and said it.
    pub client: Option<String>,
    /// The agent process's working directory, when known.
    pub cwd: Option<String>,
    /// Whether a session of this run is connected now (a grant until the run ends outlives
    /// its session while the agent process lives).
    pub connected: bool,
    /// Its live grants, oldest first.
    pub grants: Vec<GrantView>,
}

/// An agent run: its process id and the kernel's start time for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunKey {
    /// The process id.
    pub pid: u32,
    /// The process start time as the process table reports it (compared, never shown).
    #[ts(type = "number")]
    pub start_time: u64,
}

/// One live grant, as a person reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct GrantView {
    /// The grant's id (what revoke takes).
    pub id: String,
    /// The server.
    pub server: String,
    /// The launch (execution epoch) it covers, and no other.
    pub epoch: String,
    /// Which launch of its server that is, counted from 1 ("launch 7"; `None`: not known).
    pub launch: Option<u32>,
    /// When that launch started (unix ms; the epoch's own time).
    #[ts(type = "number")]
    pub launched_at_ms: u64,
    /// Whether that launch still runs for the grant's agent run: once it ended the grant
    /// covers nothing (the next launch asks again).
    pub launch_running: bool,
    /// The tools it covers.
    pub tools: GrantTools,
    /// The credentials (names) calls under it may use.
    pub credentials: Vec<String>,
    /// When a human gave it (unix ms).
    #[ts(type = "number")]
    pub issued_at_ms: u64,
    /// When it ends (besides its launch ending).
    pub end: GrantEndView,
}

/// The tools a grant covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum GrantTools {
    /// These tools, by name.
    Named {
        /// The names, sorted.
        names: Vec<String>,
    },
    /// Every tool of one catalog revision: a changed catalog ends it.
    EveryToolOfCatalog {
        /// The revision.
        revision: String,
        /// Its tools' names, when a connected session holds that revision (else empty).
        names: Vec<String>,
    },
}

/// How a grant ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum GrantEndView {
    /// With the one call it was given for.
    ThisCall,
    /// At a time (unix ms).
    Until {
        /// The end.
        #[ts(type = "number")]
        unix_ms: u64,
    },
    /// When the agent run ends.
    RunEnds,
}

/// Where an every-use setting is set: the TypeScript twin of the domain's `SettingTarget`,
/// serialized the same way (the app reads that type straight from the same JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "on", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum EveryUseTarget {
    /// One tool of one server.
    Tool {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// Every tool of a server.
    Server {
        /// The server.
        server: String,
    },
    /// Every call that would use a credential.
    Credential {
        /// The credential's name.
        name: String,
    },
}

/// How many servers and agent runs there are: the tray's status line ([`crate::Engine::census`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Census {
    /// Servers configured.
    pub servers: usize,
    /// Agent runs connected through at least one session: as the Permissions page groups
    /// grants, one agent process by pid and start time (a pid reused by a new process is
    /// another run; an agent with sessions to three servers is one).
    pub agent_runs: usize,
}

/// How many agent runs `sessions` come from (unidentified agents not counted).
pub(crate) fn agent_runs(sessions: &[SessionInfo]) -> usize {
    sessions
        .iter()
        .filter_map(|s| s.agent.as_ref().map(AgentRun::of))
        .collect::<std::collections::BTreeSet<_>>()
        .len()
}

/// The Permissions page from the live grants, the sessions and the every-use settings.
pub(crate) fn permissions(
    grants: &[Grant],
    sessions: &[SessionInfo],
    every_use: &[EveryUseSetting],
    launches: &Launches,
) -> Permissions {
    let mut by_run: BTreeMap<AgentRun, Vec<&Grant>> = BTreeMap::new();
    for grant in grants {
        by_run.entry(grant.agent_run).or_default().push(grant);
    }
    let mut runs: Vec<RunGrants> = by_run
        .into_iter()
        .map(|(run, mut grants)| {
            grants.sort_by_key(|g| (g.issued_at, g.id));
            let of_run: Vec<&SessionInfo> = sessions
                .iter()
                .filter(|s| s.agent.as_ref().is_some_and(|a| AgentRun::of(a) == run))
                .collect();
            RunGrants {
                run: RunKey {
                    pid: run.pid,
                    start_time: run.start_time,
                },
                client: of_run.iter().find_map(|s| s.client.clone()),
                cwd: of_run
                    .iter()
                    .find_map(|s| s.agent.as_ref()?.cwd.as_ref())
                    .map(|p| p.display().to_string()),
                connected: !of_run.is_empty(),
                grants: grants
                    .iter()
                    .map(|g| grant_view(g, sessions, launches))
                    .collect(),
            }
        })
        .collect();
    runs.sort_by_key(|r| r.grants.first().map(|g| (g.issued_at_ms, g.id.clone())));
    let every_use = every_use.iter().map(|s| target_view(&s.target)).collect();
    Permissions { runs, every_use }
}

/// The live grants that cover a session's running launch: its agent run's, for its server,
/// at its epoch (what its card says it is allowed). None while its server is stopped: the
/// next launch is a new epoch.
pub(crate) fn session_grants(
    session: &SessionInfo,
    grants: &[Grant],
    launches: &Launches,
) -> Vec<GrantView> {
    let (Some(agent), Some(record), Some(_)) = (&session.agent, &session.record, session.pid())
    else {
        return Vec::new();
    };
    let run = AgentRun::of(agent);
    let mut covering: Vec<&Grant> = grants
        .iter()
        .filter(|g| {
            g.agent_run == run
                && g.server_label == session.server
                && g.execution_epoch == record.epoch
        })
        .collect();
    covering.sort_by_key(|g| (g.issued_at, g.id));
    covering
        .into_iter()
        .map(|g| grant_view(g, std::slice::from_ref(session), launches))
        .collect()
}

fn grant_view(grant: &Grant, sessions: &[SessionInfo], launches: &Launches) -> GrantView {
    let running = sessions.iter().any(|s| {
        s.server == grant.server_label
            && s.pid().is_some()
            && s.record.as_ref().map(|r| r.epoch) == Some(grant.execution_epoch)
            && s.agent.as_ref().map(AgentRun::of) == Some(grant.agent_run)
    });
    let tools = match &grant.tool_scope {
        ToolScope::Tools(names) => GrantTools::Named {
            names: names.iter().cloned().collect(),
        },
        ToolScope::AllToolsOfCatalog(revision) => GrantTools::EveryToolOfCatalog {
            revision: revision.to_string(),
            names: sessions
                .iter()
                .filter_map(|s| s.catalog.as_ref())
                .find(|c| c.digest() == *revision)
                .map(|c| c.tools_by_name().map(|t| t.name().to_owned()).collect())
                .unwrap_or_default(),
        },
    };
    GrantView {
        id: grant.id.to_string(),
        server: grant.server_label.to_string(),
        epoch: grant.execution_epoch.to_string(),
        launch: launches.get(&grant.execution_epoch).copied(),
        launched_at_ms: grant.execution_epoch.unix_ms(),
        launch_running: running,
        tools,
        credentials: grant.credential_scope.iter().cloned().collect(),
        issued_at_ms: grant.issued_at,
        end: match grant.end {
            GrantEnd::ThisCallOnly { .. } => GrantEndView::ThisCall,
            GrantEnd::Until { unix_ms } => GrantEndView::Until { unix_ms },
            GrantEnd::UntilRunEnds => GrantEndView::RunEnds,
        },
    }
}

fn target_view(target: &SettingTarget) -> EveryUseTarget {
    match target {
        SettingTarget::Tool { server, tool } => EveryUseTarget::Tool {
            server: server.to_string(),
            tool: tool.clone(),
        },
        SettingTarget::Server { server } => EveryUseTarget::Server {
            server: server.to_string(),
        },
        SettingTarget::Credential { name } => EveryUseTarget::Credential { name: name.clone() },
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use postern_domain::decision::EveryUse;
    use postern_domain::{
        AgentIdentity, Artifact, Digest, ExecutionEpoch, ExecutionRecord, GrantId, Pinning,
    };
    use postern_gateway::{Credentials, Phase};

    use super::*;

    fn grant(run: u32, tools: &[&str], issued_at: u64, end: GrantEnd) -> Grant {
        Grant {
            id: GrantId::new(issued_at, u128::from(run)),
            agent_run: AgentRun {
                pid: run,
                start_time: 7,
            },
            server_label: "ci-server".parse().unwrap(),
            execution_epoch: ExecutionEpoch::new(1_000, 1),
            tool_scope: ToolScope::Tools(tools.iter().map(|t| (*t).to_owned()).collect()),
            credential_scope: BTreeSet::from(["deploy-key".to_owned()]),
            issued_at,
            end,
        }
    }

    #[test]
    fn grants_are_grouped_by_run_in_the_order_they_were_given() {
        let grants = [
            grant(2, &["status"], 300, GrantEnd::UntilRunEnds),
            grant(1, &["deploy"], 200, GrantEnd::Until { unix_ms: 9_000 }),
            grant(2, &["deploy", "build"], 100, GrantEnd::UntilRunEnds),
        ];
        let every_use = [EveryUseSetting {
            target: SettingTarget::Credential {
                name: "deploy-key".into(),
            },
            level: EveryUse::Confirm,
        }];

        let launches = Launches::from([(ExecutionEpoch::new(1_000, 1), 7)]);
        let page = permissions(&grants, &[], &every_use, &launches);

        let runs: Vec<(u32, Vec<u64>)> = page
            .runs
            .iter()
            .map(|r| (r.run.pid, r.grants.iter().map(|g| g.issued_at_ms).collect()))
            .collect();
        assert_eq!(runs, [(2, vec![100, 300]), (1, vec![200])]);
        let first = &page.runs[0];
        assert!(!first.connected && first.client.is_none());
        assert_eq!(
            first.grants[0].tools,
            GrantTools::Named {
                names: vec!["build".into(), "deploy".into()]
            }
        );
        assert!(!first.grants[0].launch_running, "no session runs it");
        assert_eq!(first.grants[0].launched_at_ms, 1_000);
        assert_eq!(first.grants[0].launch, Some(7), "numbered from the journal");
        assert_eq!(
            page.runs[1].grants[0].end,
            GrantEndView::Until { unix_ms: 9_000 }
        );
        assert_eq!(
            serde_json::to_value(&page.every_use).unwrap(),
            serde_json::to_value([&every_use[0].target]).unwrap(),
            "the twin serializes as the domain's target"
        );
    }

    /// A connected session of agent run `run` on `ci-server`, running the launch `epoch`.
    fn session(run: u32, epoch: ExecutionEpoch, phase: Phase) -> SessionInfo {
        let exe = Artifact {
            path: "/usr/bin/node".into(),
            digest: Digest::of(b"node"),
        };
        SessionInfo {
            id: 1,
            server: "ci-server".parse().unwrap(),
            client: Some("claude-code 2.1.3".into()),
            agent: Some(AgentIdentity {
                pid: run,
                start_time: 7,
                executable: None,
                chain: vec!["claude".into()],
                cwd: Some("/home/me/shop".into()),
            }),
            connected_at_ms: 0,
            phase,
            record: Some(ExecutionRecord {
                server_label: "ci-server".parse().unwrap(),
                epoch,
                launch_command: vec!["/usr/bin/node".into()],
                executable: exe,
                wrappers: vec![],
                entry: None,
                lockfiles: vec![],
                extra_paths: vec![],
                runtime: None,
                working_directory: "/srv/ci".into(),
                env_names: vec![],
                loader_env: vec![],
                sandbox: None,
                pinning: Pinning::Pinned,
                pid: 4242,
                started_at_ms: 1_000,
            }),
            catalog: None,
            previous_catalog: None,
            presented: None,
            presented_epoch: None,
            artifacts_newer: vec![],
            last_exit: None,
            backoff_until_ms: None,
            credentials: Credentials::default(),
            unresponsive_since_ms: None,
        }
    }

    #[test]
    fn agent_runs_are_counted_by_pid_and_start_time_as_permissions_groups_them() {
        let epoch = ExecutionEpoch::new(1_000, 1);
        let one = session(2, epoch, Phase::CatalogReady);
        // The same run on another server: still one run.
        let same_run = SessionInfo {
            id: 2,
            server: "time".parse().unwrap(),
            ..one.clone()
        };
        // Pid 2 reused by a new process after the first exited: another run.
        let mut reused = session(2, epoch, Phase::CatalogReady);
        if let Some(agent) = reused.agent.as_mut() {
            agent.start_time = 99;
        }
        let unidentified = SessionInfo {
            agent: None,
            ..session(5, epoch, Phase::CatalogReady)
        };
        assert_eq!(agent_runs(&[one.clone(), same_run]), 1);
        assert_eq!(agent_runs(&[one, reused, unidentified]), 2);
        assert_eq!(agent_runs(&[]), 0);
    }

    #[test]
    fn a_run_is_named_by_its_client_and_a_session_shows_the_grants_of_its_launch() {
        let granted = ExecutionEpoch::new(1_000, 1);
        let none = Launches::new();
        let grants = [grant(2, &["deploy"], 100, GrantEnd::UntilRunEnds)];

        let live = session(2, granted, Phase::CatalogReady);
        let page = permissions(&grants, std::slice::from_ref(&live), &[], &none);
        let run = &page.runs[0];
        assert_eq!(run.client.as_deref(), Some("claude-code 2.1.3"));
        assert_eq!(run.cwd.as_deref(), Some("/home/me/shop"));
        assert!(run.connected && run.grants[0].launch_running);
        assert_eq!(
            run.grants[0].launch, None,
            "the journal has not numbered it"
        );
        assert_eq!(session_grants(&live, &grants, &none).len(), 1);

        // Another run's session, and the same run's next launch: not theirs to show.
        assert!(
            session_grants(&session(3, granted, Phase::CatalogReady), &grants, &none).is_empty()
        );
        let relaunched = session(2, ExecutionEpoch::new(2_000, 2), Phase::CatalogReady);
        assert!(session_grants(&relaunched, &grants, &none).is_empty());
        let page = permissions(&grants, &[relaunched], &[], &none);
        assert!(!page.runs[0].grants[0].launch_running, "its launch ended");
        // A stopped server: the grant's launch is over.
        let stopped = session(2, granted, Phase::Stopped);
        assert!(session_grants(&stopped, &grants, &none).is_empty());
        assert!(!permissions(&grants, &[stopped], &[], &none).runs[0].grants[0].launch_running);
    }
}
