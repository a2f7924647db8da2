//! What changed between two JSON Schemas (a tool's `inputSchema` or `outputSchema`),
//! reported specifically where a reviewer cares: properties added or removed, required
//! fields, types, enum values, defaults, bounds, `additionalProperties`, nested objects
//! and array items. Anything else is reported generically with its JSON pointer, so no
//! difference goes unreported.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::canonical::{pointer, same, same_opt};
use super::diff::{self, Transition, ValueChange};
use super::render;

/// One change in a schema. `path` is the dotted property path from the schema's root
/// (`target`, `options.mode`, `tags[]` for array items, `tags[].name`), empty for the
/// root itself. Absent `old`/`new` keys mean the keyword was absent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum SchemaChange {
    /// A property appeared; `schema` is its whole schema.
    PropertyAdded {
        /// Where.
        path: String,
        /// Whether the parent lists it in `required`.
        required: bool,
        /// The new property's schema.
        schema: Value,
    },
    /// A property disappeared.
    PropertyRemoved {
        /// Where.
        path: String,
        /// Whether the parent listed it in `required`.
        required: bool,
    },
    /// An existing (or undescribed) property became required.
    RequiredAdded {
        /// Where.
        path: String,
    },
    /// A property stopped being required.
    RequiredRemoved {
        /// Where.
        path: String,
    },
    /// `type` changed.
    TypeChanged {
        /// Where.
        path: String,
        /// Before and after.
        #[serde(flatten)]
        values: Transition,
    },
    /// Values were added to an existing `enum`.
    EnumValuesAdded {
        /// Where.
        path: String,
        /// The new values, in the new schema's order.
        values: Vec<Value>,
    },
    /// Values were removed from an existing `enum`.
    EnumValuesRemoved {
        /// Where.
        path: String,
        /// The values gone, in the old schema's order.
        values: Vec<Value>,
    },
    /// `default` changed, appeared or disappeared.
    DefaultChanged {
        /// Where.
        path: String,
        /// Before and after.
        #[serde(flatten)]
        values: Transition,
    },
    /// A bound (`minimum`, `maxLength`, `pattern`, ...) changed, appeared or disappeared.
    BoundChanged {
        /// Where.
        path: String,
        /// Which bound.
        bound: Bound,
        /// Before and after.
        #[serde(flatten)]
        values: Transition,
    },
    /// `additionalProperties` changed, appeared or disappeared.
    AdditionalPropertiesChanged {
        /// Where.
        path: String,
        /// Before and after.
        #[serde(flatten)]
        values: Transition,
    },
    /// Any other difference, at a JSON pointer from the schema's root (`""` is the root).
    Other(ValueChange),
}

/// The schema keywords reported as [`SchemaChange::BoundChanged`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Bound {
    /// `minimum`
    Minimum,
    /// `maximum`
    Maximum,
    /// `exclusiveMinimum`
    ExclusiveMinimum,
    /// `exclusiveMaximum`
    ExclusiveMaximum,
    /// `multipleOf`
    MultipleOf,
    /// `minLength`
    MinLength,
    /// `maxLength`
    MaxLength,
    /// `pattern`
    Pattern,
    /// `minItems`
    MinItems,
    /// `maxItems`
    MaxItems,
    /// `minProperties`
    MinProperties,
    /// `maxProperties`
    MaxProperties,
}

impl SchemaChange {
    /// The dotted property path (or, for [`SchemaChange::Other`], the JSON pointer).
    pub fn path(&self) -> &str {
        match self {
            Self::PropertyAdded { path, .. }
            | Self::PropertyRemoved { path, .. }
            | Self::RequiredAdded { path }
            | Self::RequiredRemoved { path }
            | Self::TypeChanged { path, .. }
            | Self::EnumValuesAdded { path, .. }
            | Self::EnumValuesRemoved { path, .. }
            | Self::DefaultChanged { path, .. }
            | Self::BoundChanged { path, .. }
            | Self::AdditionalPropertiesChanged { path, .. } => path,
            Self::Other(change) => &change.pointer,
        }
    }

    /// Writes the one-line form, naming the schema's root `root` when the path is empty.
    pub(crate) fn write(&self, f: &mut fmt::Formatter<'_>, root: &str) -> fmt::Result {
        let subject = if self.path().is_empty() {
            root
        } else {
            self.path()
        };
        match self {
            Self::PropertyAdded {
                required, schema, ..
            } => {
                let required = if *required { " (required)" } else { "" };
                write!(f, "{subject}: added{required}{}", summary(schema))
            }
            Self::PropertyRemoved { required, .. } => {
                let required = if *required { " (was required)" } else { "" };
                write!(f, "{subject}: removed{required}")
            }
            Self::RequiredAdded { .. } => write!(f, "{subject}: now required"),
            Self::RequiredRemoved { .. } => write!(f, "{subject}: no longer required"),
            Self::TypeChanged { values, .. } => write!(f, "{subject}: type {values}"),
            Self::EnumValuesAdded { values, .. } => {
                write!(f, "{subject}: enum values added {}", render::list(values))
            }
            Self::EnumValuesRemoved { values, .. } => {
                write!(f, "{subject}: enum values removed {}", render::list(values))
            }
            Self::DefaultChanged { values, .. } => write!(f, "{subject}: default {values}"),
            Self::BoundChanged { bound, values, .. } => {
                write!(f, "{subject}: {} {values}", bound.keyword())
            }
            Self::AdditionalPropertiesChanged { values, .. } => {
                write!(f, "{subject}: additionalProperties {values}")
            }
            Self::Other(change) => write!(f, "{subject}: {}", change.values),
        }
    }
}

impl fmt::Display for SchemaChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write(f, "(root)")
    }
}

impl Bound {
    /// Every bound, in the order changes are reported.
    pub const ALL: [Bound; 12] = [
        Self::Minimum,
        Self::Maximum,
        Self::ExclusiveMinimum,
        Self::ExclusiveMaximum,
        Self::MultipleOf,
        Self::MinLength,
        Self::MaxLength,
        Self::Pattern,
        Self::MinItems,
        Self::MaxItems,
        Self::MinProperties,
        Self::MaxProperties,
    ];

    /// The JSON Schema keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            Self::Minimum => "minimum",
            Self::Maximum => "maximum",
            Self::ExclusiveMinimum => "exclusiveMinimum",
            Self::ExclusiveMaximum => "exclusiveMaximum",
            Self::MultipleOf => "multipleOf",
            Self::MinLength => "minLength",
            Self::MaxLength => "maxLength",
            Self::Pattern => "pattern",
            Self::MinItems => "minItems",
            Self::MaxItems => "maxItems",
            Self::MinProperties => "minProperties",
            Self::MaxProperties => "maxProperties",
        }
    }
}

/// Every change from `old` to `new` (either may be absent), in a stable order: at each
/// schema node `type`, `enum`, `default`, bounds, `additionalProperties`, then the
/// properties by name (each followed by its own nested changes), required fields that no
/// `properties` entry describes, `items`, and the remaining keywords by name.
pub(crate) fn changes(old: Option<&Value>, new: Option<&Value>) -> Vec<SchemaChange> {
    let mut out = Vec::new();
    match (old, new) {
        (Some(old), Some(new)) => node(&mut out, "", "", old, new),
        _ if same_opt(old, new) => {}
        _ => out.push(SchemaChange::Other(ValueChange::new("", old, new))),
    }
    out
}

/// Keywords with a specific report; every other keyword is compared generically.
const SPECIFIC: [&str; 7] = [
    "type",
    "enum",
    "default",
    "additionalProperties",
    "required",
    "properties",
    "items",
];

fn node(out: &mut Vec<SchemaChange>, path: &str, at: &str, old: &Value, new: &Value) {
    let (Value::Object(o), Value::Object(n)) = (old, new) else {
        if !same(old, new) {
            out.push(SchemaChange::Other(ValueChange::new(
                at,
                Some(old),
                Some(new),
            )));
        }
        return;
    };
    let changed = |key: &str| {
        let (old, new) = (o.get(key), n.get(key));
        (!same_opt(old, new)).then(|| Transition::new(old, new))
    };
    let owned = || path.to_owned();
    if let Some(values) = changed("type") {
        out.push(SchemaChange::TypeChanged {
            path: owned(),
            values,
        });
    }
    enum_values(out, path, at, o.get("enum"), n.get("enum"));
    if let Some(values) = changed("default") {
        out.push(SchemaChange::DefaultChanged {
            path: owned(),
            values,
        });
    }
    for bound in Bound::ALL {
        if let Some(values) = changed(bound.keyword()) {
            out.push(SchemaChange::BoundChanged {
                path: owned(),
                bound,
                values,
            });
        }
    }
    if let Some(values) = changed("additionalProperties") {
        out.push(SchemaChange::AdditionalPropertiesChanged {
            path: owned(),
            values,
        });
    }
    properties(out, path, at, o, n);
    match (o.get("items"), n.get("items")) {
        (Some(a @ Value::Object(_)), Some(b @ Value::Object(_))) => {
            node(out, &format!("{path}[]"), &pointer(at, "items"), a, b);
        }
        (a, b) => generic(out, &pointer(at, "items"), a, b),
    }
    let rest: BTreeSet<&str> = o.keys().chain(n.keys()).map(String::as_str).collect();
    let specific = |key: &str| {
        SPECIFIC.contains(&key) || Bound::ALL.iter().any(|bound| bound.keyword() == key)
    };
    for key in rest.into_iter().filter(|key| !specific(key)) {
        generic(out, &pointer(at, key), o.get(key), n.get(key));
    }
}

fn enum_values(
    out: &mut Vec<SchemaChange>,
    path: &str,
    at: &str,
    a: Option<&Value>,
    b: Option<&Value>,
) {
    let (Some(Value::Array(old)), Some(Value::Array(new))) = (a, b) else {
        return generic(out, &pointer(at, "enum"), a, b);
    };
    let missing_from = |from: &[Value], of: &[Value]| -> Vec<Value> {
        of.iter()
            .filter(|v| !from.iter().any(|w| same(v, w)))
            .cloned()
            .collect()
    };
    let (added, removed) = (missing_from(old, new), missing_from(new, old));
    if added.is_empty() && removed.is_empty() {
        // Same values, another order or another count of duplicates.
        return generic(out, &pointer(at, "enum"), a, b);
    }
    if !added.is_empty() {
        out.push(SchemaChange::EnumValuesAdded {
            path: path.to_owned(),
            values: added,
        });
    }
    if !removed.is_empty() {
        out.push(SchemaChange::EnumValuesRemoved {
            path: path.to_owned(),
            values: removed,
        });
    }
}

/// `properties` and `required` together, so that a property added as required is one
/// change, not two. Malformed `properties` or `required` are reported generically.
fn properties(
    out: &mut Vec<SchemaChange>,
    path: &str,
    at: &str,
    o: &Map<String, Value>,
    n: &Map<String, Value>,
) {
    let (old_required, new_required) = match (required(o), required(n)) {
        (Some(a), Some(b)) => {
            if a == b {
                // Same names, another order: still a difference in the bytes.
                generic(
                    out,
                    &pointer(at, "required"),
                    o.get("required"),
                    n.get("required"),
                );
            }
            (a, b)
        }
        _ => {
            generic(
                out,
                &pointer(at, "required"),
                o.get("required"),
                n.get("required"),
            );
            (BTreeSet::new(), BTreeSet::new())
        }
    };
    let before = out.len();
    let empty = Map::new();
    let (old_props, new_props) = match (o.get("properties"), n.get("properties")) {
        (None | Some(Value::Object(_)), None | Some(Value::Object(_))) => (
            o.get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty),
            n.get("properties")
                .and_then(Value::as_object)
                .unwrap_or(&empty),
        ),
        (a, b) => {
            generic(out, &pointer(at, "properties"), a, b);
            (&empty, &empty)
        }
    };
    let child = |name: &str| {
        if path.is_empty() {
            name.to_owned()
        } else {
            format!("{path}.{name}")
        }
    };
    let names: BTreeSet<&str> = old_props
        .keys()
        .chain(new_props.keys())
        .map(String::as_str)
        .collect();
    for &name in &names {
        let (was, is) = (old_required.contains(name), new_required.contains(name));
        match (old_props.get(name), new_props.get(name)) {
            (None, Some(schema)) => {
                let schema = schema.clone();
                out.push(SchemaChange::PropertyAdded {
                    path: child(name),
                    required: is,
                    schema,
                });
            }
            (Some(_), None) => out.push(SchemaChange::PropertyRemoved {
                path: child(name),
                required: was,
            }),
            (Some(a), Some(b)) => {
                required_change(out, child(name), was, is);
                node(
                    out,
                    &child(name),
                    &pointer(&pointer(at, "properties"), name),
                    a,
                    b,
                );
            }
            (None, None) => {}
        }
    }
    if out.len() == before {
        // Nothing differs property by property, yet something may: `{}` vs absent.
        generic(
            out,
            &pointer(at, "properties"),
            o.get("properties"),
            n.get("properties"),
        );
    }
    let undescribed = old_required
        .symmetric_difference(&new_required)
        .filter(|name| !names.contains(*name));
    for name in undescribed.collect::<BTreeSet<_>>() {
        required_change(
            out,
            child(name),
            old_required.contains(name),
            new_required.contains(name),
        );
    }
}

fn required_change(out: &mut Vec<SchemaChange>, path: String, was: bool, is: bool) {
    match (was, is) {
        (false, true) => out.push(SchemaChange::RequiredAdded { path }),
        (true, false) => out.push(SchemaChange::RequiredRemoved { path }),
        _ => {}
    }
}

/// The names in `required`, when it is absent or an array of distinct strings; `None`
/// when it is anything else.
fn required(schema: &Map<String, Value>) -> Option<BTreeSet<&str>> {
    let Some(value) = schema.get("required") else {
        return Some(BTreeSet::new());
    };
    let items = value.as_array()?;
    let names: BTreeSet<&str> = items.iter().map(Value::as_str).collect::<Option<_>>()?;
    (names.len() == items.len()).then_some(names)
}

fn generic(out: &mut Vec<SchemaChange>, at: &str, old: Option<&Value>, new: Option<&Value>) {
    out.extend(
        diff::value_changes(at, old, new)
            .into_iter()
            .map(SchemaChange::Other),
    );
}

/// What a reviewer needs to see of a new property: `, enum [a, b], default a`.
fn summary(schema: &Value) -> String {
    let Value::Object(s) = schema else {
        return format!(", schema {}", render::value(schema));
    };
    let mut parts = Vec::new();
    match (s.get("enum"), s.get("type")) {
        (Some(values), _) => parts.push(format!("enum {}", render::value(values))),
        (None, Some(kind)) => parts.push(format!("type {}", render::value(kind))),
        (None, None) => {}
    }
    for key in ["const", "default"] {
        if let Some(value) = s.get(key) {
            parts.push(format!("{key} {}", render::value(value)));
        }
    }
    for bound in Bound::ALL {
        if let Some(value) = s.get(bound.keyword()) {
            parts.push(format!("{} {}", bound.keyword(), render::value(value)));
        }
    }
    if let Some(Value::Object(props)) = s.get("properties") {
        let names: BTreeSet<&str> = props.keys().map(String::as_str).collect();
        parts.push(format!(
            "properties [{}]",
            names.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    parts.iter().map(|part| format!(", {part}")).collect()
}
