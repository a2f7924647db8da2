//! The risk strip of an approval card (issue 18): what a person should weigh before allowing a
//! call, as typed lines in severity order, each with the one sentence the app, the tray and
//! the notification show. A card with no line is a calm one: the same code, tools and agent a
//! person approved before, no credential, no per-call rule. The tray offers its one-step
//! Approve only for a calm card; anything else goes through Review.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::SettingTarget;
use super::card::{ApprovalCard, ArgumentSource, CatalogSince, IdentitySince};
use crate::AgentIdentity;
use crate::catalog::{CatalogDiff, ToolChange};

/// How much a line weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Severity {
    /// The code, the agent's claim or the tools' claims moved: look before allowing.
    Danger,
    /// Worth a reader's second: a credential, a changed tool, a per-call rule, a new context.
    Caution,
}

/// One line of the strip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RiskLine {
    /// How much it weighs.
    pub severity: Severity,
    /// The sentence people read.
    pub text: String,
    /// What it is, for a reader that wants the parts.
    #[serde(flatten)]
    pub risk: Risk,
}

/// What a line is about, in severity order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum Risk {
    /// Other code would run than the code last approved: these files, or the launch itself.
    CodeChanged {
        /// Artifacts whose digest changed, or that only one launch has.
        files: Vec<PathBuf>,
        /// `launchCommand`, `runtime` when they changed.
        facts: Vec<String>,
    },
    /// Some tool's annotations now claim it is safer than before.
    Escalation {
        /// Those tools.
        tools: Vec<String>,
    },
    /// The agent names itself as a known client whose program this is not.
    ClientMismatch {
        /// What it says it is.
        client: String,
        /// The program it runs as.
        program: String,
    },
    /// The called tool's definition changed since the last approval.
    ToolChanged {
        /// The tool.
        tool: String,
        /// Defaults the tool's schema fills in for this call (pointer and value).
        defaults: Vec<(String, Value)>,
    },
    /// Approving hands these credentials to the server's code (it restarts with them).
    ReleasesCredentials {
        /// Their names.
        names: Vec<String>,
    },
    /// The call acts with these credentials.
    UsesCredentials {
        /// Their names.
        names: Vec<String>,
    },
    /// A person asked to approve each use of this.
    EveryUse {
        /// Where the setting is.
        targets: Vec<SettingTarget>,
    },
    /// Other tools of the catalog changed (added, removed, renamed, redefined).
    CatalogChanged {
        /// One short phrase per change, at most a few.
        changes: Vec<String>,
        /// How many changes in all.
        count: usize,
    },
    /// The same code, started in another context (working directory, environment names,
    /// sandbox).
    ContextChanged {
        /// `workingDirectory`, `envNames`, `sandbox`.
        facts: Vec<String>,
    },
    /// The server runs outside the OS sandbox (a person opted it out): it can read every file
    /// the user can and connect anywhere (issue 16).
    Unconfined,
}

/// Clients people know by name, and the program names they run as (the executable's file
/// name, or a process name in the agent's chain, contains one of them).
const KNOWN_CLIENTS: [(&str, &[&str]); 6] = [
    ("claude-code", &["claude", "node"]),
    ("claude-ai", &["claude"]),
    ("codex", &["codex", "node"]),
    ("cursor", &["cursor"]),
    ("gemini-cli", &["gemini", "node"]),
    ("visual studio code", &["code", "electron"]),
];

/// Facts that change the context a launch runs in, not its code.
const CONTEXT_FACTS: [&str; 3] = ["workingDirectory", "envNames", "sandbox"];

/// How many changed files or tools a sentence names before "and N more".
const NAMED: usize = 3;

/// The risk lines of `card`, most severe first (ties keep the order above).
pub fn risks(card: &ApprovalCard, client: Option<&str>) -> Vec<RiskLine> {
    let mut out = Vec::new();
    if let IdentitySince::Changed {
        changed_artifacts,
        changed_facts,
        ..
    } = &card.epoch.since
    {
        let (context, code): (Vec<String>, Vec<String>) = changed_facts
            .iter()
            .cloned()
            .partition(|f| CONTEXT_FACTS.contains(&f.as_str()));
        if !changed_artifacts.is_empty() || !code.is_empty() {
            out.push(Risk::CodeChanged {
                files: changed_artifacts.clone(),
                facts: code,
            });
        }
        if !context.is_empty() {
            out.push(Risk::ContextChanged { facts: context });
        }
    }
    if let CatalogSince::Changed { diff } = &card.catalog {
        out.extend(catalog_risks(diff, card));
    }
    if let Some(client) = client
        && let Some(program) = mismatch(client, &card.agent)
    {
        out.push(Risk::ClientMismatch {
            client: client.to_owned(),
            program,
        });
    }
    let (release, uses): (Vec<String>, Vec<String>) = card
        .credentials
        .iter()
        .cloned()
        .partition(|c| card.withheld_credentials.contains(c));
    if !release.is_empty() {
        out.push(Risk::ReleasesCredentials { names: release });
    }
    if !uses.is_empty() {
        out.push(Risk::UsesCredentials { names: uses });
    }
    if !card.every_use.is_empty() {
        out.push(Risk::EveryUse {
            targets: card.every_use.clone(),
        });
    }
    if card.epoch.sandbox.is_none() {
        out.push(Risk::Unconfined);
    }
    let mut lines: Vec<RiskLine> = out
        .into_iter()
        .map(|risk| RiskLine {
            severity: risk.severity(),
            text: risk.sentence(&card.tool.name),
            risk,
        })
        .collect();
    lines.sort_by_key(|line| (line.severity, line.risk.rank()));
    lines
}

fn catalog_risks(diff: &CatalogDiff, card: &ApprovalCard) -> Vec<Risk> {
    let mut out = Vec::new();
    let escalated: Vec<String> = diff
        .changed
        .iter()
        .filter(|t| t.changes.iter().any(ToolChange::is_escalation))
        .map(|t| t.name.clone())
        .collect();
    if !escalated.is_empty() {
        out.push(Risk::Escalation { tools: escalated });
    }
    let tool = &card.tool.name;
    if diff.changed.iter().any(|t| &t.name == tool)
        || diff.renamed.iter().any(|r| &r.to == tool)
        || diff.added.contains(tool)
    {
        out.push(Risk::ToolChanged {
            tool: tool.clone(),
            defaults: card
                .arguments
                .iter()
                .filter(|a| a.source == ArgumentSource::Default)
                .map(|a| (a.pointer.clone(), a.value.clone()))
                .collect(),
        });
    }
    let others: Vec<String> = diff
        .added
        .iter()
        .filter(|n| *n != tool)
        .map(|n| format!("added {n}"))
        .chain(
            diff.removed
                .iter()
                .filter(|n| *n != tool)
                .map(|n| format!("removed {n}")),
        )
        .chain(
            diff.renamed
                .iter()
                .filter(|r| &r.to != tool)
                .map(|r| format!("renamed {} to {}", r.from, r.to)),
        )
        .chain(
            diff.changed
                .iter()
                .filter(|t| &t.name != tool)
                .map(|t| format!("changed {}", t.name)),
        )
        .chain(
            diff.instructions
                .iter()
                .map(|_| "new instructions".to_owned()),
        )
        .chain((!diff.capabilities.is_empty()).then(|| "other capabilities".to_owned()))
        .collect();
    if !others.is_empty() {
        out.push(Risk::CatalogChanged {
            count: others.len(),
            changes: others.into_iter().take(NAMED).collect(),
        });
    }
    out
}

/// The program `agent` runs as, when `client` names a known client that is not it.
fn mismatch(client: &str, agent: &AgentIdentity) -> Option<String> {
    let name = client.to_lowercase();
    let (_, programs) = KNOWN_CLIENTS
        .iter()
        .find(|(known, _)| name.starts_with(known))?;
    // The whole path: Claude Code's native build runs as `~/.local/share/claude/versions/2.1.3`.
    let path = agent
        .executable
        .as_ref()
        .map(|e| e.path.to_string_lossy().to_lowercase());
    let exe = agent
        .executable
        .as_ref()
        .and_then(|e| e.path.file_name())
        .map(|f| f.to_string_lossy().to_lowercase());
    let agent_process = agent.chain.iter().rev().nth(1).map(|p| p.to_lowercase());
    let matches = |candidate: &Option<String>| {
        candidate
            .as_deref()
            .is_some_and(|c| programs.iter().any(|p| c.contains(p)))
    };
    if matches(&path) || matches(&agent_process) {
        return None;
    }
    Some(
        exe.or(agent_process)
            .unwrap_or_else(|| "an unknown program".into()),
    )
}

impl Risk {
    /// Its weight.
    pub fn severity(&self) -> Severity {
        match self {
            Self::CodeChanged { .. } | Self::Escalation { .. } | Self::ClientMismatch { .. } => {
                Severity::Danger
            }
            _ => Severity::Caution,
        }
    }

    /// Its place among lines of one severity.
    fn rank(&self) -> u8 {
        match self {
            Self::CodeChanged { .. } => 0,
            Self::Escalation { .. } => 1,
            Self::ClientMismatch { .. } => 2,
            Self::ToolChanged { .. } => 3,
            Self::ReleasesCredentials { .. } => 4,
            Self::UsesCredentials { .. } => 5,
            Self::EveryUse { .. } => 6,
            Self::CatalogChanged { .. } => 7,
            Self::ContextChanged { .. } => 8,
            Self::Unconfined => 9,
        }
    }

    /// The sentence a person reads, for a call of `tool`.
    pub fn sentence(&self, tool: &str) -> String {
        match self {
            Self::CodeChanged { files, facts } => {
                let mut parts = Vec::new();
                if !files.is_empty() {
                    parts.push(named(
                        &files.iter().map(|f| file_name(f)).collect::<Vec<_>>(),
                    ));
                }
                parts.extend(facts.iter().map(|f| fact(f).to_owned()));
                format!(
                    "The code changed since you approved it: {}.",
                    parts.join("; ")
                )
            }
            Self::Escalation { tools } => format!(
                "The server now claims {} safer than before (its own unverified hint).",
                if tools.len() == 1 {
                    format!("{} is", tools[0])
                } else {
                    format!("{} are", named(tools))
                }
            ),
            Self::ClientMismatch { client, program } => {
                format!("It says it is {client}, but its program is {program}.")
            }
            Self::ToolChanged { tool, defaults } if defaults.is_empty() => {
                format!("{tool} changed since you approved it.")
            }
            Self::ToolChanged { tool, defaults } => format!(
                "{tool} changed since you approved it, and fills in {} by default.",
                defaults
                    .iter()
                    .map(|(pointer, value)| format!("{} = {value}", argument_name(pointer)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::ReleasesCredentials { names } => format!(
                "Allowing gives the server's code {} (it restarts with {}).",
                named(names),
                if names.len() == 1 { "it" } else { "them" }
            ),
            Self::UsesCredentials { names } => {
                format!("The call acts with {}.", named(names))
            }
            Self::EveryUse { targets } => format!(
                "You asked to approve every use of {}.",
                targets
                    .iter()
                    .map(|t| match t {
                        SettingTarget::Tool { tool: t, .. } if t == tool => tool.to_owned(),
                        SettingTarget::Tool { server, tool } => format!("{tool} on {server}"),
                        SettingTarget::Server { server } => format!("every tool of {server}"),
                        SettingTarget::Credential { name } => name.clone(),
                    })
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            Self::CatalogChanged { changes, count } => {
                let more = count.saturating_sub(changes.len());
                let tail = if more == 0 {
                    String::new()
                } else {
                    format!(" and {more} more")
                };
                format!("Other tools changed: {}{tail}.", changes.join(", "))
            }
            Self::ContextChanged { facts } => format!(
                "Started with {} than the launch you approved.",
                facts
                    .iter()
                    .map(|f| fact(f))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            Self::Unconfined => "It runs unconfined: it can read every file you can (~/.ssh, the Postern home) and connect anywhere.".to_owned(),
        }
    }
}

fn fact(name: &str) -> &str {
    match name {
        "launchCommand" => "a new launch command",
        "runtime" => "a new runtime version",
        "workingDirectory" => "another working directory",
        "envNames" => "other environment variables",
        "sandbox" => "another sandbox (confinement)",
        "loaderEnv" => {
            "new values of the variables that change what it loads (NODE_OPTIONS, PYTHONPATH, ...)"
        }
        other => other,
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |f| f.to_string_lossy().into(),
    )
}

/// "a, b, c and 2 more".
fn named(items: &[String]) -> String {
    let shown: Vec<&str> = items.iter().take(NAMED).map(String::as_str).collect();
    let more = items.len().saturating_sub(NAMED);
    match (shown.as_slice(), more) {
        ([], _) => String::new(),
        ([one], 0) => (*one).to_owned(),
        (all, 0) => format!(
            "{} and {}",
            all[..all.len() - 1].join(", "),
            all[all.len() - 1]
        ),
        (all, more) => format!("{} and {more} more", all.join(", ")),
    }
}

/// An argument's name from its RFC 6901 pointer: `/opts/dry` reads `opts.dry`.
pub fn argument_name(pointer: &str) -> String {
    pointer
        .split('/')
        .skip(1)
        .map(|part| part.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}
