//! The difference between two catalog revisions, as data (serde, camelCase) for the UI
//! and the approval card, and as one-line strings for people.
//!
//! Every difference that changes a digest is reported: specifically where a reviewer
//! cares (names, text, schemas, annotations), generically with a JSON pointer elsewhere.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use super::canonical::{self, pointer, same_opt};
use super::schema::{self, SchemaChange};
use super::{Catalog, CatalogDigest, Tool, ToolDigest, render};

/// What changed from one catalog revision to another. Tools are in name order; within a
/// tool, changes follow the order of [`ToolChange`]'s variants.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogDiff {
    /// The revision before.
    pub from: CatalogDigest,
    /// The revision after.
    pub to: CatalogDigest,
    /// Names of tools that appeared (and are not renames).
    pub added: Vec<String>,
    /// Names of tools that disappeared (and are not renames).
    pub removed: Vec<String>,
    /// Tools whose definition is unchanged but for the name.
    pub renamed: Vec<Rename>,
    /// Tools in both revisions whose definition changed.
    pub changed: Vec<ToolDiff>,
    /// The server's instructions, when they changed.
    pub instructions: Option<TextChange>,
    /// The server's capabilities, leaf by leaf.
    pub capabilities: Vec<ValueChange>,
}

/// A tool that only changed its name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Rename {
    /// The old name.
    pub from: String,
    /// The new name.
    pub to: String,
}

/// How one tool's definition changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDiff {
    /// The tool's name.
    pub name: String,
    /// Its digest before.
    pub from: ToolDigest,
    /// Its digest after.
    pub to: ToolDigest,
    /// What changed, never empty.
    pub changes: Vec<ToolChange>,
}

/// One change in a tool definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ToolChange {
    /// The top-level `title`.
    Title(TextChange),
    /// The `description`.
    Description(TextChange),
    /// A change in `inputSchema`.
    InputSchema {
        /// What changed.
        change: SchemaChange,
    },
    /// A change in `outputSchema`.
    OutputSchema {
        /// What changed.
        change: SchemaChange,
    },
    /// One entry of `annotations` changed, compared with the spec's defaults applied
    /// (`readOnlyHint` false, `destructiveHint` true, `idempotentHint` false,
    /// `openWorldHint` true). Annotations are untrusted hints and never decide anything.
    Annotation {
        /// The annotation's key (`readOnlyHint`, `title`, ...).
        annotation: String,
        /// Before.
        old: AnnotationValue,
        /// After.
        new: AnnotationValue,
        /// The tool now looks safer: `readOnlyHint` false -> true, `destructiveHint`
        /// true -> false, or `openWorldHint` true -> false. A reviewer should look again.
        escalation: bool,
    },
    /// Any other field (`execution`, `icons`, `_meta`, fields unknown today, or a
    /// malformed title, description or annotations), at a JSON pointer from the tool.
    Field(ValueChange),
}

/// An annotation's value on one side of a change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "source", content = "value", rename_all = "camelCase")]
pub enum AnnotationValue {
    /// The server sent this value.
    Explicit(Value),
    /// The server sent nothing; the spec's default applies.
    Default(bool),
    /// The server sent nothing and the annotation has no default.
    Absent,
}

/// A text that changed (`null`: absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextChange {
    /// Before.
    pub old: Option<String>,
    /// After.
    pub new: Option<String>,
}

/// A JSON value that changed at `pointer` (RFC 6901; `""` is the whole value).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ValueChange {
    /// Where.
    pub pointer: String,
    /// Before and after.
    #[serde(flatten)]
    pub values: Transition,
}

/// A value before and after. Serialized as `old` and `new` keys; a missing key means
/// absent on that side, `null` an explicit null.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Before.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub old: Option<Value>,
    /// After.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub new: Option<Value>,
}

impl CatalogDiff {
    /// What changed from `old` to `new`.
    pub fn between(old: &Catalog, new: &Catalog) -> Self {
        let gone: Vec<&Tool> = old
            .tools_by_name()
            .filter(|t| new.tool(t.name()).is_none())
            .collect();
        let came: Vec<&Tool> = new
            .tools_by_name()
            .filter(|t| old.tool(t.name()).is_none())
            .collect();
        let (renamed, removed, added) = pair_renames(&gone, &came);
        let changed = old
            .tools_by_name()
            .filter_map(|before| {
                let after = new.tool(before.name())?;
                (before.digest() != after.digest()).then(|| ToolDiff {
                    name: before.name().to_owned(),
                    from: before.digest(),
                    to: after.digest(),
                    changes: tool_changes(before.definition(), after.definition()),
                })
            })
            .collect();
        let instructions = (old.instructions() != new.instructions()).then(|| TextChange {
            old: old.instructions().map(str::to_owned),
            new: new.instructions().map(str::to_owned),
        });
        Self {
            from: old.digest(),
            to: new.digest(),
            added,
            removed,
            renamed,
            changed,
            instructions,
            capabilities: value_changes("", Some(old.capabilities()), Some(new.capabilities())),
        }
    }

    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty()
            && self.removed.is_empty()
            && self.renamed.is_empty()
            && self.changed.is_empty()
            && self.instructions.is_none()
            && self.capabilities.is_empty()
    }

    /// Whether some annotation now makes a tool look safer than before.
    pub fn has_escalation(&self) -> bool {
        self.changed
            .iter()
            .flat_map(|tool| &tool.changes)
            .any(ToolChange::is_escalation)
    }

    /// One line per change, in the diff's order.
    pub fn lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        lines.extend(self.added.iter().map(|name| format!("added tool {name}")));
        lines.extend(
            self.removed
                .iter()
                .map(|name| format!("removed tool {name}")),
        );
        lines.extend(
            self.renamed
                .iter()
                .map(|r| format!("renamed tool {} -> {}", r.from, r.to)),
        );
        for tool in &self.changed {
            lines.extend(
                tool.changes
                    .iter()
                    .map(|change| format!("{}: {change}", tool.name)),
            );
        }
        if let Some(change) = &self.instructions {
            lines.push(format!("instructions: {change}"));
        }
        for change in &self.capabilities {
            let at = if change.pointer.is_empty() {
                String::new()
            } else {
                format!(" {}", change.pointer)
            };
            lines.push(format!("capabilities{at}: {}", change.values));
        }
        lines
    }
}

impl fmt::Display for CatalogDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("no changes");
        }
        f.write_str(&self.lines().join("\n"))
    }
}

impl ToolChange {
    /// Whether this is an annotation change that makes the tool look safer.
    pub fn is_escalation(&self) -> bool {
        matches!(
            self,
            Self::Annotation {
                escalation: true,
                ..
            }
        )
    }
}

impl fmt::Display for ToolChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Title(change) => write!(f, "title: {change}"),
            Self::Description(change) => write!(f, "description: {change}"),
            Self::InputSchema { change } => {
                f.write_str("input ")?;
                change.write(f, "schema")
            }
            Self::OutputSchema { change } => {
                f.write_str("output ")?;
                change.write(f, "schema")
            }
            Self::Annotation {
                annotation,
                old,
                new,
                escalation,
            } => {
                let flag = if *escalation { " [escalation]" } else { "" };
                write!(f, "annotation {annotation}: {old} -> {new}{flag}")
            }
            Self::Field(change) => change.fmt(f),
        }
    }
}

impl fmt::Display for AnnotationValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Explicit(value) => f.write_str(&render::value(value)),
            Self::Default(value) => write!(f, "{value} (default)"),
            Self::Absent => f.write_str("absent"),
        }
    }
}

impl fmt::Display for TextChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (old, new) = (
            render::text(self.old.as_deref()),
            render::text(self.new.as_deref()),
        );
        write!(f, "{old} -> {new}")
    }
}

impl ValueChange {
    pub(crate) fn new(pointer: &str, old: Option<&Value>, new: Option<&Value>) -> Self {
        Self {
            pointer: pointer.to_owned(),
            values: Transition::new(old, new),
        }
    }
}

impl fmt::Display for ValueChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() {
            "(root)"
        } else {
            &self.pointer
        };
        write!(f, "{at}: {}", self.values)
    }
}

impl Transition {
    pub(crate) fn new(old: Option<&Value>, new: Option<&Value>) -> Self {
        Self {
            old: old.cloned(),
            new: new.cloned(),
        }
    }
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (old, new) = (
            render::opt(self.old.as_ref()),
            render::opt(self.new.as_ref()),
        );
        write!(f, "{old} -> {new}")
    }
}

/// The leaves at which `old` and `new` differ, under the pointer `at`: objects are
/// compared key by key (in key order), anything else as a whole.
pub(crate) fn value_changes(
    at: &str,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Vec<ValueChange> {
    let mut out = Vec::new();
    collect(&mut out, at, old, new);
    out
}

/// Deserializes a present field as `Some`, even when it is `null` (a missing field is
/// `None` through `#[serde(default)]`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn collect(out: &mut Vec<ValueChange>, at: &str, old: Option<&Value>, new: Option<&Value>) {
    match (old, new) {
        _ if same_opt(old, new) => {}
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys: BTreeSet<&str> = a.keys().chain(b.keys()).map(String::as_str).collect();
            for key in keys {
                collect(out, &pointer(at, key), a.get(key), b.get(key));
            }
        }
        _ => out.push(ValueChange::new(at, old, new)),
    }
}

/// Pairs each removed tool with the first added tool (both in name order) whose
/// definition, but for the name, is the same. Returns (renamed, removed, added).
fn pair_renames(gone: &[&Tool], came: &[&Tool]) -> (Vec<Rename>, Vec<String>, Vec<String>) {
    let came_rest: Vec<Vec<u8>> = came.iter().map(|tool| all_but_name(tool)).collect();
    let mut taken = vec![false; came.len()];
    let (mut renamed, mut removed) = (Vec::new(), Vec::new());
    for tool in gone {
        let rest = all_but_name(tool);
        match (0..came.len()).find(|&i| !taken[i] && came_rest[i] == rest) {
            Some(i) => {
                taken[i] = true;
                renamed.push(Rename {
                    from: tool.name().to_owned(),
                    to: came[i].name().to_owned(),
                });
            }
            None => removed.push(tool.name().to_owned()),
        }
    }
    let added = came
        .iter()
        .zip(taken)
        .filter(|(_, taken)| !taken)
        .map(|(t, _)| t.name().to_owned());
    (renamed, removed, added.collect())
}

fn all_but_name(tool: &Tool) -> Vec<u8> {
    let mut rest = tool.definition().clone();
    rest.remove("name");
    let mut bytes = Vec::new();
    canonical::write_object(&rest, &mut bytes);
    bytes
}

/// The fields with a specific report; the rest are compared generically.
const SPECIFIC: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// The changes between two definitions of one tool, in [`ToolChange`]'s variant order,
/// then the other fields in key order.
fn tool_changes(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<ToolChange> {
    let mut out = Vec::new();
    for key in ["title", "description"] {
        let (a, b) = (old.get(key), new.get(key));
        match (text(a), text(b)) {
            _ if same_opt(a, b) => {}
            (Some(old), Some(new)) if key == "title" => {
                out.push(ToolChange::Title(TextChange { old, new }));
            }
            (Some(old), Some(new)) => out.push(ToolChange::Description(TextChange { old, new })),
            _ => out.extend(
                value_changes(&pointer("", key), a, b)
                    .into_iter()
                    .map(ToolChange::Field),
            ),
        }
    }
    let input = schema::changes(old.get("inputSchema"), new.get("inputSchema"));
    out.extend(
        input
            .into_iter()
            .map(|change| ToolChange::InputSchema { change }),
    );
    let output = schema::changes(old.get("outputSchema"), new.get("outputSchema"));
    out.extend(
        output
            .into_iter()
            .map(|change| ToolChange::OutputSchema { change }),
    );
    annotations(&mut out, old.get("annotations"), new.get("annotations"));
    let rest: BTreeSet<&str> = old.keys().chain(new.keys()).map(String::as_str).collect();
    for key in rest.into_iter().filter(|key| !SPECIFIC.contains(key)) {
        let changes = value_changes(&pointer("", key), old.get(key), new.get(key));
        out.extend(changes.into_iter().map(ToolChange::Field));
    }
    out
}

/// `Some(None)` when absent, `Some(Some(text))` for a string, `None` for anything else.
fn text(value: Option<&Value>) -> Option<Option<String>> {
    match value {
        None => Some(None),
        Some(Value::String(s)) => Some(Some(s.clone())),
        Some(_) => None,
    }
}

/// One of the spec's boolean hints.
struct Hint {
    key: &'static str,
    /// The value when the server sends none.
    default: bool,
    /// The value whose loss makes the tool look safer (an escalation), if any.
    risky: Option<bool>,
}

/// The spec's hints, in the spec's order.
const HINTS: [Hint; 4] = [
    Hint {
        key: "readOnlyHint",
        default: false,
        risky: Some(false),
    },
    Hint {
        key: "destructiveHint",
        default: true,
        risky: Some(true),
    },
    Hint {
        key: "idempotentHint",
        default: false,
        risky: None,
    },
    Hint {
        key: "openWorldHint",
        default: true,
        risky: Some(true),
    },
];

/// Annotation changes, key by key: the hints first (in the spec's order), then `title`,
/// then any other key in order. A malformed `annotations` (not an object), or a change
/// that is not visible key by key (absent vs `{}`), is also reported as a field.
fn annotations(out: &mut Vec<ToolChange>, old: Option<&Value>, new: Option<&Value>) {
    if same_opt(old, new) {
        return;
    }
    let empty = Map::new();
    let (a, b) = (
        old.and_then(Value::as_object),
        new.and_then(Value::as_object),
    );
    let malformed = (old.is_some() && a.is_none()) || (new.is_some() && b.is_none());
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    let others: BTreeSet<&str> = a.keys().chain(b.keys()).map(String::as_str).collect();
    let others = others
        .into_iter()
        .filter(|key| *key != "title" && HINTS.iter().all(|hint| hint.key != *key));
    let keys = HINTS
        .iter()
        .map(|hint| hint.key)
        .chain(["title"])
        .chain(others);
    let before = out.len();
    for key in keys {
        let (was, is) = (a.get(key), b.get(key));
        if same_opt(was, is) {
            continue;
        }
        let hint = HINTS.iter().find(|hint| hint.key == key);
        let side = |value: Option<&Value>| match (value, hint) {
            (Some(value), _) => AnnotationValue::Explicit(value.clone()),
            (None, Some(hint)) => AnnotationValue::Default(hint.default),
            (None, None) => AnnotationValue::Absent,
        };
        let (old, new) = (side(was), side(is));
        let escalation = hint.is_some_and(|hint| hint.looks_risky(&old) && !hint.looks_risky(&new));
        let annotation = key.to_owned();
        out.push(ToolChange::Annotation {
            annotation,
            old,
            new,
            escalation,
        });
    }
    if malformed || out.len() == before {
        out.push(ToolChange::Field(ValueChange::new(
            "/annotations",
            old,
            new,
        )));
    }
}

impl Hint {
    /// Whether `value` claims the risky side. An explicit `null` counts as the default;
    /// a value that is not a boolean claims nothing, so moving to it from the risky value
    /// is flagged.
    fn looks_risky(&self, value: &AnnotationValue) -> bool {
        let Some(risky) = self.risky else {
            return false;
        };
        match value {
            AnnotationValue::Default(value) | AnnotationValue::Explicit(Value::Bool(value)) => {
                *value == risky
            }
            AnnotationValue::Explicit(Value::Null) => self.default == risky,
            AnnotationValue::Explicit(_) | AnnotationValue::Absent => false,
        }
    }
}
