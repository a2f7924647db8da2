//! Comparisons between what an agent sees directly and through Postern, with failure messages
//! that show exactly what differs.

use anyhow::{Result, bail};
use serde_json::Value;

/// Fails unless `gated` is the same tool list as `direct`: the same tools in the same order,
/// each equal as JSON (every field kept, none added).
pub fn same_tools(direct: &[Value], gated: &[Value]) -> Result<()> {
    let names = |tools: &[Value]| -> Vec<String> {
        tools
            .iter()
            .map(|t| t["name"].as_str().unwrap_or("?").to_owned())
            .collect()
    };
    let mut problems = Vec::new();
    if names(direct) != names(gated) {
        problems.push(format!(
            "tool names differ:\n  direct: {:?}\n  gated:  {:?}",
            names(direct),
            names(gated)
        ));
    }
    for d in direct {
        let Some(g) = gated.iter().find(|g| g["name"] == d["name"]) else {
            continue;
        };
        if d != g {
            problems.push(format!(
                "tool {} differs:\n  direct: {d}\n  gated:  {g}\n  {}",
                d["name"],
                field_diff(d, g)
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        bail!(
            "the tool list through Postern is not the server's own:\n{}",
            problems.join("\n")
        )
    }
}

/// Which top-level fields of two JSON objects are missing, extra or different.
pub fn field_diff(direct: &Value, gated: &Value) -> String {
    let (Some(d), Some(g)) = (direct.as_object(), gated.as_object()) else {
        return "(not both objects)".to_owned();
    };
    let missing: Vec<&String> = d.keys().filter(|k| !g.contains_key(*k)).collect();
    let extra: Vec<&String> = g.keys().filter(|k| !d.contains_key(*k)).collect();
    let changed: Vec<&String> = d
        .keys()
        .filter(|k| g.get(*k).is_some_and(|v| v != &d[*k]))
        .collect();
    format!("dropped fields: {missing:?}; added fields: {extra:?}; changed fields: {changed:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<Value> {
        vec![
            json!({"name": "a", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "forbidden"}}),
            json!({"name": "b", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": true}}),
        ]
    }

    #[test]
    fn equal_lists_pass_whatever_the_key_order() {
        let reordered = vec![
            json!({"execution": {"taskSupport": "forbidden"}, "inputSchema": {"type": "object"}, "name": "a"}),
            tools()[1].clone(),
        ];
        same_tools(&tools(), &reordered).unwrap();
    }

    #[test]
    fn a_dropped_field_fails_and_is_named() {
        let mut gated = tools();
        gated[0].as_object_mut().unwrap().remove("execution");
        let err = same_tools(&tools(), &gated).unwrap_err().to_string();
        assert!(err.contains("dropped fields: [\"execution\"]"), "{err}");
    }

    #[test]
    fn a_changed_annotation_a_missing_tool_or_another_order_fails() {
        let mut changed = tools();
        changed[1]["annotations"]["readOnlyHint"] = json!(false);
        assert!(same_tools(&tools(), &changed).is_err());
        assert!(same_tools(&tools(), &tools()[..1]).is_err());
        let mut swapped = tools();
        swapped.reverse();
        assert!(same_tools(&tools(), &swapped).is_err());
    }
}
