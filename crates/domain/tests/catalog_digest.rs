//! Property tests of the catalog revision (issue 3, Tests): the digest ignores the order
//! of tools and of object keys, and changes when any single leaf value changes; the diff
//! then reports that tool, and only that tool, with at least one one-line change.

use postern_domain::catalog::{Catalog, CatalogDiff, ToolDrift};
use proptest::prelude::*;
use serde_json::{Map, Value};

proptest! {
    #[test]
    fn digest_ignores_tool_order_and_key_order(tools in tools(), seed in any::<u64>()) {
        let catalog = build(tools.clone());
        let mut rng = SplitMix(seed);
        let mut shuffled: Vec<Value> = tools.iter().map(|tool| shuffle_keys(tool, &mut rng)).collect();
        rng.shuffle(&mut shuffled);
        let reordered = build(shuffled);
        prop_assert_eq!(catalog.digest(), reordered.digest());
        for tool in catalog.tools() {
            prop_assert_eq!(Some(tool.digest()), reordered.tool(tool.name()).map(|t| t.digest()));
        }
        prop_assert!(CatalogDiff::between(&catalog, &reordered).is_empty());
    }

    #[test]
    fn any_leaf_change_changes_the_digest_and_shows_in_the_diff(
        tools in tools(),
        pick in any::<prop::sample::Index>(),
    ) {
        let before = build(tools.clone());
        let mut all = Value::Array(tools);
        let mut leaves = Vec::new();
        leaf_pointers(&all, String::new(), &mut leaves);
        let at = &leaves[pick.index(leaves.len())];
        let leaf = all.pointer_mut(at).expect("a leaf found by leaf_pointers");
        *leaf = mutated(leaf);
        let Value::Array(tools) = all else { unreachable!() };
        let after = build(tools.clone());
        prop_assert_ne!(before.digest(), after.digest());

        let diff = CatalogDiff::between(&before, &after);
        prop_assert!(!diff.is_empty());
        for line in diff.lines() {
            prop_assert!(!line.contains('\n'), "one line: {:?}", line);
        }
        let json = serde_json::to_value(&diff).unwrap();
        prop_assert_eq!(&serde_json::from_value::<CatalogDiff>(json).unwrap(), &diff);

        let index: usize = at.split('/').nth(1).unwrap().parse().unwrap();
        let name = before.tools()[index].name().to_owned();
        if at.ends_with("/name") && at.matches('/').count() == 2 {
            // The name itself changed: a rename (or a removal and an addition).
            prop_assert_eq!(before.tool_drift(&name, &after), ToolDrift::Removed);
        } else {
            prop_assert_eq!(diff.changed.len(), 1);
            prop_assert_eq!(&diff.changed[0].name, &name);
            prop_assert!(!diff.changed[0].changes.is_empty());
            prop_assert!(diff.added.is_empty() && diff.removed.is_empty() && diff.renamed.is_empty());
            for tool in before.tools() {
                let expected = if tool.name() == name { ToolDrift::Changed } else { ToolDrift::Unchanged };
                prop_assert_eq!(before.tool_drift(tool.name(), &after), expected);
            }
        }
    }

    #[test]
    fn removing_any_member_changes_the_digest_and_shows_in_the_diff(
        tools in tools(),
        pick in any::<prop::sample::Index>(),
    ) {
        let before = build(tools.clone());
        let mut all = Value::Array(tools);
        let mut members = Vec::new();
        member_pointers(&all, String::new(), &mut members);
        members.retain(|(parent, key)| !(key == "name" && parent.matches('/').count() == 1));
        prop_assume!(!members.is_empty());
        let (parent, key) = &members[pick.index(members.len())];
        let Some(Value::Object(map)) = all.pointer_mut(parent) else { unreachable!() };
        map.remove(key);
        let Value::Array(tools) = all else { unreachable!() };
        let after = build(tools);
        prop_assert_ne!(before.digest(), after.digest());
        let diff = CatalogDiff::between(&before, &after);
        prop_assert_eq!(diff.changed.len(), 1);
        prop_assert!(!diff.changed[0].changes.is_empty());
    }
}

fn build(tools: Vec<Value>) -> Catalog {
    Catalog::new(
        tools,
        Some("instructions".into()),
        serde_json::json!({"tools": {}}),
    )
    .expect("generated tools have unique names")
}

/// One to four tools with distinct names, each with a schema-shaped `inputSchema`,
/// sometimes annotations, and some arbitrary fields.
fn tools() -> impl Strategy<Value = Vec<Value>> {
    let body = (
        schema(),
        prop::option::of(annotations()),
        prop::option::of("[a-z .\n]{0,12}"),
        prop::collection::btree_map(key(), json(), 0..3),
    );
    prop::collection::btree_map("[a-z]{1,6}", body, 1..5).prop_map(|tools| {
        tools
            .into_iter()
            .map(|(name, (schema, annotations, description, extra))| {
                let mut tool: Map<String, Value> = extra.into_iter().collect();
                tool.insert("name".into(), Value::String(name));
                tool.insert("inputSchema".into(), schema);
                if let Some(annotations) = annotations {
                    tool.insert("annotations".into(), annotations);
                }
                if let Some(description) = description {
                    tool.insert("description".into(), Value::String(description));
                }
                Value::Object(tool)
            })
            .collect()
    })
}

/// JSON Schemas: typed leaves with enums, defaults and bounds; objects with properties
/// and a `required` list drawn from them; arrays with `items`.
fn schema() -> impl Strategy<Value = Value> {
    let kind = prop::sample::select(vec!["string", "integer", "number", "boolean"]);
    let leaf = (
        prop::option::of(kind),
        prop::option::of(prop::collection::vec("[a-d]", 1..4)),
        prop::option::of(leaf()),
        prop::option::of((
            prop::sample::select(vec!["minimum", "maxLength", "pattern"]),
            leaf(),
        )),
    )
        .prop_map(|(kind, values, default, bound)| {
            let mut s = Map::new();
            if let Some(kind) = kind {
                s.insert("type".into(), kind.into());
            }
            if let Some(values) = values {
                s.insert("enum".into(), values.into());
            }
            if let Some(default) = default {
                s.insert("default".into(), default);
            }
            if let Some((keyword, value)) = bound {
                s.insert(keyword.into(), value);
            }
            Value::Object(s)
        });
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (
                prop::collection::btree_map("[a-d]", inner.clone(), 0..4),
                prop::collection::vec(any::<bool>(), 4),
                prop::option::of(any::<bool>()),
            )
                .prop_map(|(properties, required, additional)| {
                    let names: Vec<Value> = properties
                        .keys()
                        .zip(required)
                        .filter(|(_, required)| *required)
                        .map(|(name, _)| Value::String(name.clone()))
                        .collect();
                    let mut s = Map::new();
                    s.insert("type".into(), "object".into());
                    s.insert(
                        "properties".into(),
                        Value::Object(properties.into_iter().collect()),
                    );
                    s.insert("required".into(), Value::Array(names));
                    if let Some(additional) = additional {
                        s.insert("additionalProperties".into(), additional.into());
                    }
                    Value::Object(s)
                }),
            inner.prop_map(|items| serde_json::json!({"type": "array", "items": items})),
        ]
    })
}

fn annotations() -> impl Strategy<Value = Value> {
    let key = prop::sample::select(vec![
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
        "title",
        "x",
    ]);
    prop::collection::btree_map(key, leaf(), 0..5)
        .prop_map(|map| Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
}

/// Arbitrary JSON, keys including `~` and `/` to exercise pointer escaping.
fn json() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "type",
            "enum",
            "default",
            "_meta",
            "execution",
            "icons"
        ])
        .prop_map(String::from),
        "[a-c~/]{1,3}",
    ]
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-c \"\\\\\n]{0,4}".prop_map(Value::String),
    ]
}

/// JSON pointers of every scalar and every empty array or object.
fn leaf_pointers(value: &Value, at: String, out: &mut Vec<String>) {
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    match value {
        Value::Array(items) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                leaf_pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) if !map.is_empty() => {
            for (key, item) in map {
                leaf_pointers(item, format!("{at}/{}", escape(key)), out);
            }
        }
        _ => out.push(at),
    }
}

/// (JSON pointer of an object, key) for every member of every object.
fn member_pointers(value: &Value, at: String, out: &mut Vec<(String, String)>) {
    let escape = |key: &str| key.replace('~', "~0").replace('/', "~1");
    match value {
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                member_pointers(item, format!("{at}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                out.push((at.clone(), key.clone()));
                member_pointers(item, format!("{at}/{}", escape(key)), out);
            }
        }
        _ => {}
    }
}

/// A different value of the same kind where there is one.
fn mutated(leaf: &Value) -> Value {
    match leaf {
        Value::Null => Value::Bool(false),
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i.checked_add(1).unwrap_or(i - 1))
            } else if let Some(u) = n.as_u64() {
                Value::from(u - 1)
            } else {
                Value::from(n.as_f64().unwrap() + 1.0)
            }
        }
        Value::String(s) => Value::String(format!("{s}_m")),
        Value::Array(_) => Value::Array(vec![Value::Null]),
        Value::Object(_) => serde_json::json!({"m": null}),
    }
}

/// The same value with every object's keys in another order.
fn shuffle_keys(value: &Value, rng: &mut SplitMix) -> Value {
    match value {
        Value::Array(items) => {
            Value::Array(items.iter().map(|item| shuffle_keys(item, rng)).collect())
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            rng.shuffle(&mut entries);
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), shuffle_keys(v, rng)))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// A tiny deterministic generator (SplitMix64), seeded by proptest.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}
