//! Tool catalogs: what one server process claims it can do (docs/refresh-contract.md §3).
//!
//! A [`Catalog`] keeps every tool exactly as the server sent it, with the server's
//! `instructions` and `capabilities`. Its [`CatalogDigest`] is the catalog revision: it
//! ignores the order of tools and of object keys, and changes with any field value,
//! annotations and `_meta` included. Each tool has its own [`ToolDigest`], so the engine
//! can tell which tools changed ([`Catalog::tool_drift`]), and [`CatalogDiff`] says how,
//! as data a UI and an approval card can show.
//!
//! A catalog is a claim, never evidence: it says nothing about which code answers a call
//! (that is the execution epoch), and annotations are untrusted hints.

mod canonical;
mod diff;
mod render;
mod schema;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Digest, DigestError};

pub use diff::{
    AnnotationValue, CatalogDiff, Rename, TextChange, ToolChange, ToolDiff, Transition, ValueChange,
};
pub use schema::{Bound, SchemaChange};

/// Everything one server process claims: its tools, instructions and capabilities.
///
/// Two catalogs are equal when their digests are: the order of tools and of object keys
/// does not count.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(try_from = "CatalogParts", into = "CatalogParts")]
pub struct Catalog {
    /// The tools in the order the server listed them.
    tools: Vec<Tool>,
    /// Tool name to index in `tools`; names are unique.
    by_name: BTreeMap<String, usize>,
    instructions: Option<String>,
    capabilities: Value,
    digest: CatalogDigest,
}

/// One tool definition as the server sent it, every field kept.
#[derive(Clone, Debug)]
pub struct Tool {
    name: String,
    definition: Map<String, Value>,
    digest: ToolDigest,
}

/// The catalog revision: a SHA-256 over the canonical JSON of
/// `{"capabilities": C, "instructions": I or null, "tools": [T, ...]}`, the tools sorted
/// by name. Displayed as `sha256:<64 hex>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CatalogDigest(Digest);

/// A SHA-256 over the canonical JSON of one tool definition (name included).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ToolDigest(Digest);

/// How one tool's definition moved between the revision an agent was shown and now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ToolDrift {
    /// The tool is in both revisions with the same definition.
    Unchanged,
    /// The tool is in both revisions and its definition changed.
    Changed,
    /// The tool was not in the revision shown, and is now.
    Added,
    /// The tool was in the revision shown, and is gone now.
    Removed,
    /// The tool is in neither revision.
    Unknown,
}

/// Why a server's tool list cannot become a catalog.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// A `tools/list` result without a `tools` array.
    #[error("tools/list page {page} has no `tools` array")]
    PageWithoutTools {
        /// The page's position, from 0.
        page: usize,
    },
    /// A tool that is not a JSON object.
    #[error("tool #{index} is not a JSON object")]
    ToolNotObject {
        /// The tool's position across all pages, from 0.
        index: usize,
    },
    /// A tool without a string `name`.
    #[error("tool #{index} has no string `name`")]
    ToolWithoutName {
        /// The tool's position across all pages, from 0.
        index: usize,
    },
    /// Two tools with one name: a revision in which a name means two things cannot be
    /// pinned, so it is refused rather than guessed at.
    #[error("the tool name {0:?} is listed twice")]
    DuplicateName(String),
}

impl Catalog {
    /// A catalog from the tools of every `tools/list` page concatenated, and the
    /// `instructions` and `capabilities` of the server's initialize result.
    pub fn new(
        tools: Vec<Value>,
        instructions: Option<String>,
        capabilities: Value,
    ) -> Result<Self, CatalogError> {
        let tools = tools
            .into_iter()
            .enumerate()
            .map(|(index, tool)| Tool::parse(index, tool));
        let tools = tools.collect::<Result<Vec<_>, _>>()?;
        let mut by_name = BTreeMap::new();
        for (index, tool) in tools.iter().enumerate() {
            if by_name.insert(tool.name.clone(), index).is_some() {
                return Err(CatalogError::DuplicateName(tool.name.clone()));
            }
        }
        let digest = catalog_digest(&tools, &by_name, instructions.as_deref(), &capabilities);
        Ok(Self {
            tools,
            by_name,
            instructions,
            capabilities,
            digest,
        })
    }

    /// A catalog from `tools/list` results (each `{"tools": [...], "nextCursor": ...}`),
    /// in the order they were fetched.
    pub fn from_pages(
        pages: impl IntoIterator<Item = Value>,
        instructions: Option<String>,
        capabilities: Value,
    ) -> Result<Self, CatalogError> {
        let mut tools = Vec::new();
        for (page, result) in pages.into_iter().enumerate() {
            match result {
                Value::Object(mut map) => match map.remove("tools") {
                    Some(Value::Array(items)) => tools.extend(items),
                    _ => return Err(CatalogError::PageWithoutTools { page }),
                },
                _ => return Err(CatalogError::PageWithoutTools { page }),
            }
        }
        Self::new(tools, instructions, capabilities)
    }

    /// The catalog revision.
    pub fn digest(&self) -> CatalogDigest {
        self.digest
    }

    /// The tools in the order the server listed them.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The tools sorted by name.
    pub fn tools_by_name(&self) -> impl Iterator<Item = &Tool> {
        self.by_name.values().map(|&index| &self.tools[index])
    }

    /// The tool called `name`.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.by_name.get(name).map(|&index| &self.tools[index])
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the server lists no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The server's instructions from its initialize result.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// The server's capabilities from its initialize result.
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// How the tool `name` moved from this revision (the one an agent was shown) to
    /// `current`. The engine refuses a call with `catalog_stale` when this
    /// [`is_stale`](ToolDrift::is_stale).
    pub fn tool_drift(&self, name: &str, current: &Catalog) -> ToolDrift {
        ToolDrift::between(
            self.tool(name).map(Tool::digest),
            current.tool(name).map(Tool::digest),
        )
    }

    /// What changed from this revision to `newer`.
    pub fn diff(&self, newer: &Catalog) -> CatalogDiff {
        CatalogDiff::between(self, newer)
    }
}

impl PartialEq for Catalog {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for Catalog {}

impl Tool {
    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The whole definition as the server sent it, `name` included.
    pub fn definition(&self) -> &Map<String, Value> {
        &self.definition
    }

    /// One top-level field of the definition (`inputSchema`, `annotations`, ...).
    pub fn field(&self, key: &str) -> Option<&Value> {
        self.definition.get(key)
    }

    /// The digest of this definition.
    pub fn digest(&self) -> ToolDigest {
        self.digest
    }

    fn parse(index: usize, tool: Value) -> Result<Self, CatalogError> {
        let Value::Object(definition) = tool else {
            return Err(CatalogError::ToolNotObject { index });
        };
        let Some(Value::String(name)) = definition.get("name") else {
            return Err(CatalogError::ToolWithoutName { index });
        };
        let name = name.clone();
        let mut bytes = Vec::new();
        canonical::write_object(&definition, &mut bytes);
        let digest = ToolDigest(Digest::of(&bytes));
        Ok(Self {
            name,
            definition,
            digest,
        })
    }
}

impl PartialEq for Tool {
    fn eq(&self, other: &Self) -> bool {
        self.digest == other.digest
    }
}

impl Eq for Tool {}

impl CatalogDigest {
    /// The digest as a plain SHA-256 value.
    pub fn digest(&self) -> Digest {
        self.0
    }

    /// The first 12 hex digits, for compact display.
    pub fn short(&self) -> String {
        self.0.short()
    }
}

impl fmt::Display for CatalogDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for CatalogDigest {
    type Err = DigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Self)
    }
}

impl ToolDigest {
    /// The digest as a plain SHA-256 value.
    pub fn digest(&self) -> Digest {
        self.0
    }

    /// The first 12 hex digits, for compact display.
    pub fn short(&self) -> String {
        self.0.short()
    }
}

impl fmt::Display for ToolDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl FromStr for ToolDigest {
    type Err = DigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        s.parse().map(Self)
    }
}

impl ToolDrift {
    /// The drift between a tool's digest in the revision shown and now (`None`: absent).
    pub fn between(shown: Option<ToolDigest>, current: Option<ToolDigest>) -> Self {
        match (shown, current) {
            (Some(a), Some(b)) if a == b => Self::Unchanged,
            (Some(_), Some(_)) => Self::Changed,
            (None, Some(_)) => Self::Added,
            (Some(_), None) => Self::Removed,
            (None, None) => Self::Unknown,
        }
    }

    /// Whether a call to the tool must be refused until the agent lists tools again:
    /// the definition it was shown is not the one that would run.
    pub fn is_stale(self) -> bool {
        matches!(self, Self::Changed | Self::Added | Self::Removed)
    }
}

/// The serialized form of a catalog: the server's own values, nothing derived.
#[derive(Serialize, Deserialize)]
struct CatalogParts {
    tools: Vec<Value>,
    instructions: Option<String>,
    capabilities: Value,
}

impl TryFrom<CatalogParts> for Catalog {
    type Error = CatalogError;

    fn try_from(parts: CatalogParts) -> Result<Self, Self::Error> {
        Self::new(parts.tools, parts.instructions, parts.capabilities)
    }
}

impl From<Catalog> for CatalogParts {
    fn from(catalog: Catalog) -> Self {
        let tools = catalog
            .tools
            .into_iter()
            .map(|tool| Value::Object(tool.definition));
        Self {
            tools: tools.collect(),
            instructions: catalog.instructions,
            capabilities: catalog.capabilities,
        }
    }
}

/// Hashes `{"capabilities":C,"instructions":I,"tools":[...]}` canonically (keys in
/// sorted order), tools sorted by name, without building the combined value.
fn catalog_digest(
    tools: &[Tool],
    by_name: &BTreeMap<String, usize>,
    instructions: Option<&str>,
    capabilities: &Value,
) -> CatalogDigest {
    let mut bytes = b"{\"capabilities\":".to_vec();
    canonical::write(capabilities, &mut bytes);
    bytes.extend_from_slice(b",\"instructions\":");
    match instructions {
        Some(text) => canonical::write_str(text, &mut bytes),
        None => bytes.extend_from_slice(b"null"),
    }
    bytes.extend_from_slice(b",\"tools\":[");
    for (i, &index) in by_name.values().enumerate() {
        if i > 0 {
            bytes.push(b',');
        }
        canonical::write_object(&tools[index].definition, &mut bytes);
    }
    bytes.extend_from_slice(b"]}");
    CatalogDigest(Digest::of(&bytes))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn catalog(tools: Value) -> Catalog {
        let Value::Array(tools) = tools else {
            panic!("tools must be an array")
        };
        Catalog::new(
            tools,
            Some("Be careful.".into()),
            json!({"tools": {"listChanged": true}}),
        )
        .unwrap()
    }

    #[test]
    fn digest_is_pinned_by_a_golden_vector() {
        // The exact bytes hashed: capabilities, instructions, tools sorted by name, every
        // object's keys sorted, no whitespace.
        let bytes = concat!(
            r#"{"capabilities":{"tools":{"listChanged":true}},"instructions":"Be careful.","#,
            r#""tools":[{"inputSchema":{"type":"object"},"name":"a"},{"name":"b","title":"B"}]}"#
        );
        let c = catalog(json!([
            {"title": "B", "name": "b"},
            {"name": "a", "inputSchema": {"type": "object"}},
        ]));
        assert_eq!(c.digest().digest(), Digest::of(bytes.as_bytes()));
        assert_eq!(
            c.tool("b").unwrap().digest().digest(),
            Digest::of(br#"{"name":"b","title":"B"}"#)
        );
        assert_eq!(
            c.digest().to_string(),
            "sha256:605341548e8fbec9b6422bd3b1ba6a827244cbd1dfe76cc01f41eae7f5528cbc"
        );
    }

    #[test]
    fn instructions_and_capabilities_are_part_of_the_revision() {
        let tools = vec![json!({"name": "a"})];
        let base = Catalog::new(tools.clone(), None, json!({})).unwrap();
        let with_text = Catalog::new(tools.clone(), Some(String::new()), json!({})).unwrap();
        let with_caps = Catalog::new(tools, None, json!({"tools": {}})).unwrap();
        assert_ne!(base.digest(), with_text.digest());
        assert_ne!(base.digest(), with_caps.digest());
        assert_ne!(with_text.digest(), with_caps.digest());
    }

    #[test]
    fn pages_are_concatenated_in_order() {
        let pages = [
            json!({"tools": [{"name": "a"}], "nextCursor": "2"}),
            json!({"tools": [{"name": "b"}]}),
        ];
        let c = Catalog::from_pages(pages, None, json!({})).unwrap();
        let names: Vec<&str> = c.tools().iter().map(Tool::name).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(
            c,
            Catalog::new(
                vec![json!({"name": "b"}), json!({"name": "a"})],
                None,
                json!({})
            )
            .unwrap()
        );
    }

    #[test]
    fn refuses_what_cannot_be_pinned() {
        let new = |tools: Value| {
            let Value::Array(tools) = tools else {
                unreachable!()
            };
            Catalog::new(tools, None, json!({}))
        };
        assert_eq!(
            new(json!([{"name": "a"}, 3])),
            Err(CatalogError::ToolNotObject { index: 1 })
        );
        assert_eq!(
            new(json!([{"title": "x"}])),
            Err(CatalogError::ToolWithoutName { index: 0 })
        );
        assert_eq!(
            new(json!([{"name": 7}])),
            Err(CatalogError::ToolWithoutName { index: 0 })
        );
        assert_eq!(
            new(json!([{"name": "a"}, {"name": "a", "title": "other"}])),
            Err(CatalogError::DuplicateName("a".into()))
        );
        let pages = [json!({"tools": []}), json!({"items": []})];
        assert_eq!(
            Catalog::from_pages(pages, None, json!({})),
            Err(CatalogError::PageWithoutTools { page: 1 })
        );
    }

    #[test]
    fn keeps_every_field_as_sent() {
        let tool = json!({
            "name": "t", "title": "T", "description": "d",
            "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}, "execution": {"taskSupport": "optional"},
            "icons": [{"src": "data:,"}], "_meta": {"x": 1}, "futureField": [null],
        });
        let c = catalog(json!([tool.clone()]));
        assert_eq!(
            Value::Object(c.tool("t").unwrap().definition().clone()),
            tool
        );
        assert_eq!(
            c.tool("t").unwrap().field("futureField"),
            Some(&json!([null]))
        );
    }

    #[test]
    fn drift_tells_the_engine_when_a_call_is_stale() {
        let shown = catalog(json!([{"name": "same"}, {"name": "edited"}, {"name": "gone"}]));
        let current = catalog(json!([
            {"name": "same"}, {"name": "edited", "description": "now"}, {"name": "new"},
        ]));
        let drift = |name| shown.tool_drift(name, &current);
        assert_eq!(drift("same"), ToolDrift::Unchanged);
        assert_eq!(drift("edited"), ToolDrift::Changed);
        assert_eq!(drift("new"), ToolDrift::Added);
        assert_eq!(drift("gone"), ToolDrift::Removed);
        assert_eq!(drift("never"), ToolDrift::Unknown);
        let stale: Vec<bool> = ["same", "edited", "new", "gone", "never"]
            .map(|name| drift(name).is_stale())
            .into();
        assert_eq!(stale, [false, true, true, true, false]);
    }

    #[test]
    fn digests_display_parse_and_serialize_as_strings() {
        let c = catalog(json!([{"name": "a"}]));
        let shown = c.digest().to_string();
        assert!(shown.starts_with("sha256:") && shown.len() == 71);
        assert_eq!(c.digest().short(), shown["sha256:".len()..][..12]);
        assert_eq!(shown.parse::<CatalogDigest>(), Ok(c.digest()));
        assert_eq!(serde_json::to_value(c.digest()).unwrap(), json!(shown));
        let tool = c.tool("a").unwrap().digest();
        assert_eq!(tool.to_string().parse::<ToolDigest>(), Ok(tool));
        assert!("sha256:zz".parse::<ToolDigest>().is_err());
    }

    #[test]
    fn serializes_the_server_values_and_validates_on_the_way_back() {
        let c = catalog(json!([{"name": "b", "x": {"z": 1, "a": 2}}, {"name": "a"}]));
        let stored = serde_json::to_value(&c).unwrap();
        assert_eq!(
            stored["tools"][0]["name"], "b",
            "the server's order is kept"
        );
        let back: Catalog = serde_json::from_value(stored).unwrap();
        assert_eq!(back.digest(), c.digest());
        let bad = json!({"tools": [{"name": "a"}, {"name": "a"}], "instructions": null, "capabilities": {}});
        assert!(serde_json::from_value::<Catalog>(bad).is_err());
    }
}
