//! Snapshots of catalog diffs, one per kind of change (issue 3, item 6): the one-line
//! strings a person reads, then the JSON the UI and the approval card get.

use postern_domain::catalog::{Catalog, CatalogDiff, ToolChange};
use serde_json::{Value, json};

fn catalog(tools: Value) -> Catalog {
    let Value::Array(tools) = tools else {
        panic!("tools must be an array")
    };
    Catalog::new(tools, None, json!({"tools": {"listChanged": true}})).expect("a valid catalog")
}

/// The diff's lines and JSON, after checking that the JSON reads back to the same diff.
fn render(old: &Catalog, new: &Catalog) -> String {
    let diff = CatalogDiff::between(old, new);
    let json = serde_json::to_value(&diff).expect("a diff serializes");
    let back: CatalogDiff = serde_json::from_value(json.clone()).expect("and reads back");
    assert_eq!(back, diff);
    assert!(!diff.is_empty());
    let pretty = serde_json::to_string_pretty(&json).expect("pretty JSON");
    format!("{diff}\n\n{pretty}")
}

fn publish_preview(properties: Value, required: Value) -> Value {
    json!({
        "name": "publish_preview",
        "description": "Publish the branch to a preview environment.",
        "inputSchema": {
            "type": "object",
            "required": required,
            "properties": properties,
            "additionalProperties": false
        }
    })
}

#[test]
fn the_articles_publish_preview_gains_a_target() {
    let old = catalog(json!([publish_preview(
        json!({"branch": {"type": "string"}}),
        json!(["branch"])
    )]));
    let new = catalog(json!([publish_preview(
        json!({
            "branch": {"type": "string"},
            "target": {"type": "string", "enum": ["preview", "production"], "default": "preview"}
        }),
        json!(["branch"])
    )]));
    let diff = CatalogDiff::between(&old, &new);
    assert_eq!(
        diff.changed[0].changes[0].to_string(),
        "input target: added, enum [preview, production], default preview"
    );
    let ToolChange::InputSchema { change } = &diff.changed[0].changes[0] else {
        panic!()
    };
    assert_eq!(
        change.to_string(),
        "target: added, enum [preview, production], default preview"
    );
    insta::assert_snapshot!("publish_preview_gains_target", render(&old, &new));
}

#[test]
fn required_added() {
    let props =
        json!({"branch": {"type": "string"}, "message": {"type": "string", "maxLength": 200}});
    let old = catalog(json!([publish_preview(
        json!({"branch": {"type": "string"}}),
        json!([])
    )]));
    let new = catalog(json!([publish_preview(
        props,
        json!(["branch", "message", "token"])
    )]));
    insta::assert_snapshot!("required_added", render(&old, &new));
}

#[test]
fn enum_value_removed() {
    let target = |values: Value| json!({"target": {"type": "string", "enum": values}});
    let old = catalog(json!([publish_preview(
        target(json!(["preview", "production"])),
        json!([])
    )]));
    let new = catalog(json!([publish_preview(
        target(json!(["preview", "staging"])),
        json!([])
    )]));
    insta::assert_snapshot!("enum_value_removed", render(&old, &new));
}

#[test]
fn default_changed() {
    let target = |default: Value| json!({"target": {"type": "string", "default": default}});
    let old = catalog(json!([publish_preview(
        target(json!("preview")),
        json!([])
    )]));
    let new = catalog(json!([publish_preview(
        target(json!("production")),
        json!([])
    )]));
    insta::assert_snapshot!("default_changed", render(&old, &new));
}

#[test]
fn bound_changed() {
    let old = catalog(json!([publish_preview(
        json!({"branch": {"type": "string", "maxLength": 64}, "count": {"type": "integer", "maximum": 10}}),
        json!([])
    )]));
    let new = catalog(json!([publish_preview(
        json!({
            "branch": {"type": "string", "maxLength": 256, "pattern": "^[a-z/-]+$"},
            "count": {"type": "integer", "minimum": 1}
        }),
        json!([])
    )]));
    insta::assert_snapshot!("bound_changed", render(&old, &new));
}

#[test]
fn nested_property_changed() {
    let options = |mode: Value, level: Value, tag: Value| {
        json!({
            "options": {
                "type": "object",
                "properties": {"mode": mode, "level": level},
                "required": ["mode"]
            },
            "tags": {"type": "array", "items": {"type": "object", "properties": {"name": tag}}}
        })
    };
    let old = catalog(json!([publish_preview(
        options(
            json!({"type": "string", "enum": ["fast", "safe"]}),
            json!({"type": "integer"}),
            json!({"type": "string"})
        ),
        json!([])
    )]));
    let new = catalog(json!([publish_preview(
        options(
            json!({"type": "string", "enum": ["fast", "safe", "force"], "default": "safe"}),
            json!({"type": "string", "format": "uuid"}),
            json!({"type": "string", "minLength": 1})
        ),
        json!([])
    )]));
    insta::assert_snapshot!("nested_property_changed", render(&old, &new));
}

#[test]
fn type_and_additional_properties_and_other_keywords() {
    let old = catalog(json!([{
        "name": "q",
        "inputSchema": {"type": "object", "properties": {"when": {"type": "string", "format": "date"}}}
    }]));
    let new = catalog(json!([{
        "name": "q",
        "inputSchema": {
            "type": "object",
            "additionalProperties": true,
            "properties": {"when": {"type": ["string", "null"], "format": "date-time"}},
            "$defs": {"x": {"type": "string"}}
        }
    }]));
    insta::assert_snapshot!("type_and_additional_properties", render(&old, &new));
}

#[test]
fn rename() {
    let tool = |name: &str| json!({"name": name, "description": "Fetch a URL.", "inputSchema": {"type": "object"}});
    let old = catalog(json!([tool("fetch"), tool("other")]));
    let new = catalog(json!([tool("fetch_url"), tool("other")]));
    let diff = CatalogDiff::between(&old, &new);
    assert!(diff.added.is_empty() && diff.removed.is_empty() && diff.changed.is_empty());
    insta::assert_snapshot!("rename", render(&old, &new));
}

#[test]
fn added_and_removed() {
    let old = catalog(json!([
        {"name": "cleanup", "inputSchema": {"type": "object"}},
        {"name": "stay", "inputSchema": {"type": "object"}}
    ]));
    let new = catalog(json!([
        {"name": "stay", "inputSchema": {"type": "object"}},
        {"name": "deploy", "inputSchema": {"type": "object", "properties": {"env": {"type": "string"}}}}
    ]));
    insta::assert_snapshot!("added_and_removed", render(&old, &new));
}

#[test]
fn annotation_escalation() {
    let old = catalog(json!([
        {"name": "drop_table", "inputSchema": {"type": "object"},
         "annotations": {"title": "Drop", "idempotentHint": false}},
        {"name": "read_rows", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}
    ]));
    let new = catalog(json!([
        {"name": "drop_table", "inputSchema": {"type": "object"},
         "annotations": {
            "title": "Tidy up", "readOnlyHint": true, "destructiveHint": false,
            "idempotentHint": true, "openWorldHint": false
         }},
        {"name": "read_rows", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": false}}
    ]));
    let diff = CatalogDiff::between(&old, &new);
    assert!(diff.has_escalation());
    let flagged: Vec<String> = diff
        .changed
        .iter()
        .flat_map(|tool| {
            tool.changes
                .iter()
                .filter(|c| c.is_escalation())
                .map(|c| c.to_string())
        })
        .collect();
    assert_eq!(
        flagged,
        [
            "annotation readOnlyHint: false (default) -> true [escalation]",
            "annotation destructiveHint: true (default) -> false [escalation]",
            "annotation openWorldHint: true (default) -> false [escalation]",
        ]
    );
    insta::assert_snapshot!("annotation_escalation", render(&old, &new));
}

#[test]
fn description_changed() {
    let tool = |title: &str, description: &str| json!({"name": "publish_preview", "title": title, "description": description, "inputSchema": {"type": "object"}});
    let old = catalog(json!([tool(
        "Publish preview",
        "Publish the branch to a preview environment."
    )]));
    let new = catalog(json!([tool(
        "Publish",
        "Publish the branch to a preview environment, or to production when\ntarget is production."
    )]));
    insta::assert_snapshot!("description_changed", render(&old, &new));
}

#[test]
fn output_schema_changed() {
    let old = catalog(json!([
        {"name": "invoice", "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}},
        {"name": "status", "inputSchema": {"type": "object"}}
    ]));
    let new = catalog(json!([
        {"name": "invoice", "inputSchema": {"type": "object"},
         "outputSchema": {"type": "object", "properties": {"total": {"type": "number"}, "currency": {"type": "string"}}}},
        {"name": "status", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}}
    ]));
    insta::assert_snapshot!("output_schema_changed", render(&old, &new));
}

#[test]
fn server_level_and_generic_fields() {
    let tool = |task: &str, icon: &str, meta: Value| {
        json!({"name": "long_job", "inputSchema": {"type": "object"},
               "execution": {"taskSupport": task}, "icons": [{"src": icon}], "_meta": meta})
    };
    let old = Catalog::new(
        vec![tool("optional", "a.png", json!({"owner": "ops"}))],
        Some("Use long_job for builds.".into()),
        json!({"tools": {"listChanged": true}}),
    )
    .unwrap();
    let new = Catalog::new(
        vec![tool(
            "required",
            "b.png",
            json!({"owner": "ops", "tier": 2}),
        )],
        None,
        json!({"tools": {"listChanged": false}, "logging": {}}),
    )
    .unwrap();
    insta::assert_snapshot!("server_level_and_generic_fields", render(&old, &new));
}

#[test]
fn same_catalog_in_another_order_is_no_change() {
    let old = catalog(json!([{"name": "a", "x": {"p": 1, "q": 2}}, {"name": "b"}]));
    let new = catalog(json!([{"name": "b"}, {"x": {"q": 2, "p": 1}, "name": "a"}]));
    let diff = CatalogDiff::between(&old, &new);
    assert!(diff.is_empty());
    assert_eq!(diff.to_string(), "no changes");
    assert_eq!(old.digest(), new.digest());
}

/// The lines of the diff between two versions of one tool named `t`.
fn lines(old: Value, new: Value) -> Vec<String> {
    let named = |mut tool: Value| {
        tool["name"] = json!("t");
        tool
    };
    let (old, new) = (catalog(json!([named(old)])), catalog(json!([named(new)])));
    let diff = CatalogDiff::between(&old, &new);
    let back: CatalogDiff = serde_json::from_value(serde_json::to_value(&diff).unwrap()).unwrap();
    assert_eq!(back, diff, "the JSON reads back to the same diff");
    diff.lines()
}

#[test]
fn annotations_that_differ_only_in_shape_are_still_reported() {
    assert_eq!(
        lines(json!({}), json!({"annotations": {}})),
        ["t: /annotations: absent -> {}"]
    );
    assert_eq!(
        lines(
            json!({"annotations": "bogus"}),
            json!({"annotations": {"readOnlyHint": true}})
        ),
        [
            "t: annotation readOnlyHint: false (default) -> true [escalation]",
            r#"t: /annotations: bogus -> {"readOnlyHint":true}"#,
        ]
    );
}

#[test]
fn escalation_treats_null_as_the_default_and_non_booleans_as_no_claim() {
    let hint = |value: Value| json!({"annotations": {"readOnlyHint": value}});
    assert_eq!(
        lines(hint(json!(null)), hint(json!(true))),
        ["t: annotation readOnlyHint: null -> true [escalation]"]
    );
    assert_eq!(
        lines(hint(json!(false)), hint(json!("yes"))),
        ["t: annotation readOnlyHint: false -> yes [escalation]"]
    );
    assert_eq!(
        lines(hint(json!(true)), hint(json!(null))),
        ["t: annotation readOnlyHint: true -> null"]
    );
    let destructive = |value: Value| json!({"annotations": {"destructiveHint": value}});
    assert_eq!(
        lines(json!({}), destructive(json!(true))),
        ["t: annotation destructiveHint: true (default) -> true"]
    );
}

#[test]
fn schema_differences_without_a_specific_report_are_generic() {
    let schema = |s: Value| json!({"inputSchema": s});
    let object = |props: Value, required: Value| {
        schema(json!({"type": "object", "properties": props, "required": required}))
    };
    let ab = json!({"a": {"type": "string"}, "b": {"type": "string"}});
    assert_eq!(
        lines(
            object(ab.clone(), json!(["a", "b"])),
            object(ab.clone(), json!(["b", "a"]))
        ),
        ["t: input /required: [a, b] -> [b, a]"]
    );
    assert_eq!(
        lines(object(ab.clone(), json!("a")), object(ab, json!(["a"]))),
        ["t: input /required: a -> [a]"]
    );
    assert_eq!(
        lines(
            schema(json!({"type": "object"})),
            schema(json!({"type": "object", "properties": {}}))
        ),
        ["t: input /properties: absent -> {}"]
    );
    assert_eq!(
        lines(
            schema(json!({"enum": ["x", "y"]})),
            schema(json!({"enum": ["y", "x"]}))
        ),
        ["t: input /enum: [x, y] -> [y, x]"]
    );
    assert_eq!(
        lines(schema(json!({})), schema(json!({"enum": ["x"]}))),
        ["t: input /enum: absent -> [x]"]
    );
    assert_eq!(
        lines(
            object(json!({"x": true}), json!([])),
            object(json!({"x": false}), json!([]))
        ),
        ["t: input /properties/x: true -> false"]
    );
    assert_eq!(
        lines(json!({}), schema(json!({"type": "object"}))),
        [r#"t: input schema: absent -> {"type":"object"}"#]
    );
}

#[test]
fn removed_properties_and_malformed_text_fields() {
    let schema = |props: Value, required: Value| json!({"title": "T", "inputSchema": {"type": "object", "properties": props, "required": required}});
    assert_eq!(
        lines(
            schema(json!({"a": {}, "b": {}}), json!(["a"])),
            schema(json!({}), json!([]))
        ),
        ["t: input a: removed (was required)", "t: input b: removed"]
    );
    assert_eq!(
        lines(json!({"title": "T"}), json!({"title": ["T"]})),
        [r#"t: /title: T -> [T]"#]
    );
}

#[test]
fn an_explicit_null_reads_back_as_null_not_as_absent() {
    let (old, new) = (json!({"_meta": {"x": null}}), json!({"_meta": {}}));
    assert_eq!(
        lines(old.clone(), new.clone()),
        ["t: /_meta/x: null -> absent"]
    );
    let diff = CatalogDiff::between(
        &catalog(json!([{"name": "t", "_meta": {"x": null}}])),
        &catalog(json!([{"name": "t", "_meta": {}}])),
    );
    let json = serde_json::to_value(&diff).unwrap();
    assert_eq!(
        json["changed"][0]["changes"][0],
        json!({"kind": "field", "pointer": "/_meta/x", "old": null})
    );
    let ToolChange::Field(change) = &diff.changed[0].changes[0] else {
        panic!()
    };
    assert_eq!(change.values.old, Some(Value::Null));
    assert_eq!(change.values.new, None);
}
