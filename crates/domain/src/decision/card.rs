//! The approval card: everything a reviewer needs to decide, as one serializable value
//! (issue 5 item 5). Built from values the engine already holds; no I/O.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::risk::{RiskLine, risks};
use super::{Ask, AskFor, GrantChoice, SettingTarget};
use crate::catalog::{Catalog, CatalogDiff, CatalogDigest};
use crate::grant::{ApprovalId, Request};
use crate::{AgentIdentity, Digest, ExecutionEpoch, ExecutionRecord, Pinning, ServerLabel};

/// What a reviewer sees.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalCard {
    /// The request's id.
    pub id: ApprovalId,
    /// When it was asked (unix ms).
    pub asked_at: u64,
    /// When it times out (unix ms).
    pub expires_at: u64,
    /// What the reviewer decides.
    pub what: AskFor,
    /// The every-use settings that require this decision (empty: none).
    pub every_use: Vec<SettingTarget>,
    /// The agent by the name people know it by: its client's own name and version (from its
    /// `initialize`, self-reported), else its program's file name.
    pub agent_name: String,
    /// The client's own name and version, as it said them (`None`: it said none).
    #[serde(default)]
    pub client: Option<String>,
    /// The agent process asking: the verified evidence behind the name.
    pub agent: AgentIdentity,
    /// The server.
    pub server: ServerLabel,
    /// The code that would run the call, and how it differs from the last approved code.
    pub epoch: EpochView,
    /// The catalog now, and how it differs from the last approved revision.
    pub catalog: CatalogSince,
    /// The tool.
    pub tool: ToolView,
    /// The arguments, JSON-Schema defaults filled in and marked.
    pub arguments: Vec<Argument>,
    /// The tool's annotations, labelled as the server's unverified claims.
    pub annotations: Option<UntrustedHints>,
    /// The credential scopes the call would use (names).
    pub credentials: BTreeSet<String>,
    /// Those the running launch was not given (its identity was not approved for them):
    /// approving releases them, and the server restarts with them.
    #[serde(default)]
    pub withheld_credentials: Vec<String>,
    /// The grant ends the reviewer may choose.
    pub choices: Vec<GrantChoice>,
    /// The short name of each of `choices`, in order ([`GrantChoice::label`]).
    pub choice_labels: Vec<String>,
    /// The agent stopped waiting for this call (its client's timeout cancelled it): the
    /// request stays open, and the answer decides the agent's identical retry
    /// (refresh-contract §8).
    #[serde(default)]
    pub agent_stopped_waiting: bool,
    /// What to weigh before allowing, most severe first (empty: a calm card).
    #[serde(default)]
    pub risks: Vec<RiskLine>,
}

/// Everything [`ApprovalCard::new`] reads.
#[derive(Clone, Copy, Debug)]
pub struct CardInputs<'a> {
    /// The request's id.
    pub id: ApprovalId,
    /// When it is asked (unix ms).
    pub asked_at: u64,
    /// How long the reviewer has.
    pub timeout_ms: u64,
    /// The ladder's question.
    pub ask: &'a Ask,
    /// The agent process.
    pub agent: &'a AgentIdentity,
    /// The client's name and version from its `initialize` (self-reported).
    pub client: Option<&'a str>,
    /// The call.
    pub request: &'a Request,
    /// The execution record of the current epoch.
    pub record: &'a ExecutionRecord,
    /// The execution record of the last epoch of this server a human approved, if any.
    pub last_approved_record: Option<&'a ExecutionRecord>,
    /// The current catalog.
    pub catalog: &'a Catalog,
    /// The last catalog revision of this server a human approved under, if any.
    pub last_approved_catalog: Option<&'a Catalog>,
    /// The call's `arguments` as the agent sent them.
    pub arguments: &'a Value,
    /// Bound credentials the running launch was not given.
    pub withheld: &'a [String],
}

/// The epoch a call would run under.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EpochView {
    /// The epoch.
    pub epoch: ExecutionEpoch,
    /// The identity digest of its execution record.
    pub identity: Digest,
    /// The command it was launched with.
    pub launch_command: Vec<String>,
    /// When it was launched (unix ms).
    #[serde(default)]
    pub started_at_ms: i64,
    /// Which launch of its server this is, counted from 1 ("launch 7"): filled by the engine,
    /// which reads it from the journal (`None`: not known).
    #[serde(default)]
    pub launch: Option<u32>,
    /// Whether the digests cover the code that runs.
    pub pinning: Pinning,
    /// The OS sandbox it runs in; `None`: unconfined (issue 16).
    #[serde(default)]
    pub sandbox: Option<crate::Sandbox>,
    /// How it differs from the last approved epoch.
    pub since: IdentitySince,
}

/// How an epoch's identity differs from the last approved epoch of the same server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum IdentitySince {
    /// Nothing of this server was approved before.
    FirstApproval,
    /// The approved epoch itself.
    SameEpoch,
    /// A new launch of the same code (equal identity digests).
    Unchanged {
        /// The last approved epoch.
        approved_epoch: ExecutionEpoch,
    },
    /// A new launch of other code.
    Changed {
        /// The last approved epoch.
        approved_epoch: ExecutionEpoch,
        /// Artifacts whose digest changed, or that only one launch has.
        changed_artifacts: Vec<PathBuf>,
        /// Other identity facts that changed: `launchCommand`, `runtime`,
        /// `workingDirectory`, `envNames`, `loaderEnv`, `sandbox`.
        changed_facts: Vec<String>,
    },
}

/// The catalog against the last approved revision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum CatalogSince {
    /// Nothing of this server was approved before.
    FirstApproval {
        /// The revision now.
        revision: CatalogDigest,
    },
    /// The approved revision.
    Unchanged {
        /// The revision.
        revision: CatalogDigest,
    },
    /// What changed.
    Changed {
        /// The diff from the approved revision to now.
        diff: Box<CatalogDiff>,
    },
}

/// The tool as the current catalog describes it (`None`: not in the catalog).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolView {
    /// Its name.
    pub name: String,
    /// Its title.
    pub title: Option<String>,
    /// Its description.
    pub description: Option<String>,
}

/// One argument as the server will see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Argument {
    /// Where (RFC 6901 pointer into the arguments).
    pub pointer: String,
    /// The value.
    pub value: Value,
    /// Sent by the agent, or a default from the tool's input schema.
    pub source: ArgumentSource,
}

/// Where an argument's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ArgumentSource {
    /// The agent sent it.
    Sent,
    /// The agent left it out; the schema's `default` applies (if the server honours it).
    Default,
}

/// Annotations, labelled for what they are.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UntrustedHints {
    /// Says the hints are the server's unverified claims.
    pub note: String,
    /// The annotations as the server sent them.
    pub hints: Map<String, Value>,
}

const HINTS_NOTE: &str =
    "untrusted hints from the server: they describe what it claims, and decide nothing";

impl ApprovalCard {
    /// The narrowest grant end this card allows, which is what an approval that names none
    /// means (the tray's Approve, `postern approve ID`): this call only when offered, else the
    /// first choice offered; none for a card that asks about the agent run alone.
    pub fn narrowest(&self) -> Option<GrantChoice> {
        if self.what == AskFor::Session {
            return None;
        }
        if self.choices.contains(&GrantChoice::ThisCall) {
            return Some(GrantChoice::ThisCall);
        }
        self.choices.first().copied()
    }

    /// The card for one question about one call.
    pub fn new(inputs: &CardInputs<'_>) -> Self {
        let request = inputs.request;
        let tool = inputs.catalog.tool(&request.tool);
        let text = |key: &str| {
            tool.and_then(|t| t.field(key))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let annotations = tool
            .and_then(|t| t.field("annotations"))
            .and_then(Value::as_object)
            .filter(|hints| !hints.is_empty())
            .map(|hints| UntrustedHints {
                note: HINTS_NOTE.to_owned(),
                hints: hints.clone(),
            });
        let mut card = Self {
            id: inputs.id,
            asked_at: inputs.asked_at,
            expires_at: inputs.asked_at.saturating_add(inputs.timeout_ms),
            what: inputs.ask.what,
            every_use: inputs.ask.every_use.clone(),
            agent_name: agent_name(inputs.client, inputs.agent),
            client: inputs.client.map(str::to_owned),
            agent: inputs.agent.clone(),
            server: request.server.clone(),
            epoch: EpochView {
                epoch: inputs.record.epoch,
                identity: inputs.record.identity_digest(),
                launch_command: inputs.record.launch_command.clone(),
                started_at_ms: inputs.record.started_at_ms,
                launch: None,
                pinning: inputs.record.pinning.clone(),
                sandbox: inputs.record.sandbox.clone(),
                since: identity_since(inputs.last_approved_record, inputs.record),
            },
            catalog: match inputs.last_approved_catalog {
                None => CatalogSince::FirstApproval {
                    revision: inputs.catalog.digest(),
                },
                Some(old) if old == inputs.catalog => CatalogSince::Unchanged {
                    revision: old.digest(),
                },
                Some(old) => CatalogSince::Changed {
                    diff: Box::new(old.diff(inputs.catalog)),
                },
            },
            tool: ToolView {
                name: request.tool.clone(),
                title: text("title"),
                description: text("description"),
            },
            arguments: arguments_with_defaults(
                tool.and_then(|t| t.field("inputSchema")),
                inputs.arguments,
            ),
            annotations,
            credentials: request.credentials.clone(),
            withheld_credentials: inputs.withheld.to_vec(),
            agent_stopped_waiting: false,
            choices: inputs.ask.choices.clone(),
            choice_labels: inputs.ask.choices.iter().map(|c| c.label()).collect(),
            risks: Vec::new(),
        };
        card.risks = risks(&card, inputs.client);
        card
    }

    /// Whether nothing on the card calls for a second look (no risk line).
    pub fn is_calm(&self) -> bool {
        self.risks.is_empty()
    }
}

/// The agent's name for people: its client's own name, else its program's file name, else
/// the process that started the shim, else its pid.
pub fn agent_name(client: Option<&str>, agent: &AgentIdentity) -> String {
    if let Some(client) = client.map(str::trim).filter(|c| !c.is_empty()) {
        return client.to_owned();
    }
    agent
        .executable
        .as_ref()
        .and_then(|e| e.path.file_name())
        .map(|f| f.to_string_lossy().into_owned())
        .or_else(|| agent.chain.iter().rev().nth(1).cloned())
        .unwrap_or_else(|| format!("pid {}", agent.pid))
}

/// The arguments a reviewer should see: every argument the agent sent (top level, in its
/// order), then every schema `default` for a property the agent left out, walking
/// `properties` into objects the agent sent, each marked [`ArgumentSource::Default`].
pub fn arguments_with_defaults(schema: Option<&Value>, arguments: &Value) -> Vec<Argument> {
    let empty = Map::new();
    let sent = arguments.as_object().unwrap_or(&empty);
    let mut out: Vec<Argument> = sent
        .iter()
        .map(|(key, value)| Argument {
            pointer: format!("/{}", escape(key)),
            value: value.clone(),
            source: ArgumentSource::Sent,
        })
        .collect();
    if let Some(schema) = schema {
        defaults(schema, sent, "", &mut out);
    }
    out
}

fn defaults(schema: &Value, sent: &Map<String, Value>, prefix: &str, out: &mut Vec<Argument>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        let pointer = format!("{prefix}/{}", escape(key));
        match sent.get(key) {
            Some(Value::Object(inner)) => defaults(property, inner, &pointer, out),
            Some(_) => {}
            None => {
                if let Some(value) = property.get("default") {
                    out.push(Argument {
                        pointer,
                        value: value.clone(),
                        source: ArgumentSource::Default,
                    });
                }
            }
        }
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn identity_since(approved: Option<&ExecutionRecord>, now: &ExecutionRecord) -> IdentitySince {
    let Some(approved) = approved else {
        return IdentitySince::FirstApproval;
    };
    if approved.epoch == now.epoch {
        return IdentitySince::SameEpoch;
    }
    let changed_artifacts = approved.changed_artifacts(now);
    let facts = [
        (
            "launchCommand",
            approved.launch_command != now.launch_command,
        ),
        ("runtime", approved.runtime != now.runtime),
        (
            "workingDirectory",
            approved.working_directory != now.working_directory,
        ),
        ("envNames", approved.env_names != now.env_names),
        ("loaderEnv", approved.loader_env != now.loader_env),
        ("sandbox", approved.sandbox != now.sandbox),
    ];
    let changed_facts: Vec<String> = facts
        .iter()
        .filter(|(_, changed)| *changed)
        .map(|(name, _)| (*name).to_owned())
        .collect();
    if changed_artifacts.is_empty()
        && changed_facts.is_empty()
        && approved.identity_digest() == now.identity_digest()
    {
        IdentitySince::Unchanged {
            approved_epoch: approved.epoch,
        }
    } else {
        IdentitySince::Changed {
            approved_epoch: approved.epoch,
            changed_artifacts,
            changed_facts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_filled_in_and_marked() {
        let schema = json!({
            "type": "object",
            "properties": {
                "branch": {"type": "string"},
                "target": {"type": "string", "default": "preview"},
                "opts": {"type": "object", "properties": {"dry": {"default": false}, "a/b": {"default": 1}}},
            },
        });
        let args = arguments_with_defaults(Some(&schema), &json!({"branch": "main", "opts": {}}));
        let seen: Vec<(&str, &Value, ArgumentSource)> = args
            .iter()
            .map(|a| (a.pointer.as_str(), &a.value, a.source))
            .collect();
        assert_eq!(
            seen,
            [
                ("/branch", &json!("main"), ArgumentSource::Sent),
                ("/opts", &json!({}), ArgumentSource::Sent),
                ("/target", &json!("preview"), ArgumentSource::Default),
                ("/opts/dry", &json!(false), ArgumentSource::Default),
                ("/opts/a~1b", &json!(1), ArgumentSource::Default),
            ]
        );
        let sent_target = arguments_with_defaults(Some(&schema), &json!({"target": "production"}));
        assert!(
            sent_target.iter().all(|a| a.source == ArgumentSource::Sent),
            "a value the agent sent is never shown as a default"
        );
    }
}
