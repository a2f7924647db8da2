//! Rewiring an agent's own MCP configuration to go through Postern (issue 18, first run): the
//! entries of servers Postern has configured (the same command, imported from this file or
//! added by hand) are replaced by `postern mcp <label>`, after a preview of each change and with
//! a backup of the file as it was. And the coverage of a file: how many of its servers go
//! through Postern, which are remote (not gated) and which the agent still runs directly.
//!
//! The file keeps its other keys and their order (serde_json's `preserve_order`); only the
//! rewired entries change, and they lose their `env` and `cwd`, which Postern holds now. The
//! write is atomic (a sibling file renamed over the original, its permissions kept), and it is
//! refused when the file changed since the preview.

use std::io::Write;
use std::path::{Path, PathBuf};

use postern_domain::ServerConfig;
use serde::Serialize;
use serde_json::{Map, Value, json};
use ts_rs::TS;

use crate::Home;
use crate::import::{ImportError, Route, entry, shim_args};

/// How a configuration file's servers are reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Coverage {
    /// Server entries in the file (each name once).
    pub servers: usize,
    /// Those that run `postern mcp`.
    pub through_postern: usize,
    /// Remote servers, by name: Postern does not gate them.
    pub remote: Vec<String>,
    /// Servers the agent runs itself, by name: nothing gates them.
    pub direct: Vec<String>,
    /// The coverage in one sentence: "1 of 3 servers through Postern; linear is remote, not
    /// gated; notes runs directly".
    pub sentence: String,
}

impl Coverage {
    /// The coverage of the entries of one file.
    pub fn of(entries: &[crate::import::Entry]) -> Self {
        let named = |route: Route| -> Vec<String> {
            entries
                .iter()
                .filter(|e| e.route == route)
                .map(|e| e.name.clone())
                .collect()
        };
        let (remote, direct) = (named(Route::Remote), named(Route::Direct));
        let through_postern = entries.iter().filter(|e| e.route == Route::Postern).count();
        let mut sentence = format!(
            "{through_postern} of {} server{} through Postern",
            entries.len(),
            if entries.len() == 1 { "" } else { "s" }
        );
        let list = |names: &[String], one: &str, many: &str| {
            format!(
                "; {} {}",
                names.join(", "),
                if names.len() == 1 { one } else { many }
            )
        };
        if !remote.is_empty() {
            sentence += &list(&remote, "is remote, not gated", "are remote, not gated");
        }
        if !direct.is_empty() {
            sentence += &list(&direct, "runs directly", "run directly");
        }
        Self {
            servers: entries.len(),
            through_postern,
            remote,
            direct,
            sentence,
        }
    }
}

/// One entry a rewire changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Change {
    /// The entry's name in the file.
    pub name: String,
    /// The Postern server it goes through.
    pub label: String,
    /// Its command and arguments now.
    pub before: Vec<String>,
    /// Its command and arguments after.
    pub after: Vec<String>,
    /// The environment variable names it loses (Postern holds them), never their values.
    pub env_names: Vec<String>,
}

/// What rewiring one file would do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// The file.
    pub path: String,
    /// The entries it changes (empty: nothing to rewire).
    pub changes: Vec<Change>,
    /// The file's text as read.
    #[serde(skip)]
    #[ts(skip)]
    before: String,
    /// Its text after.
    #[serde(skip)]
    #[ts(skip)]
    after: String,
}

/// Why a rewire was not written.
#[derive(Debug, thiserror::Error)]
pub enum RewireError {
    /// The file could not be read or parsed.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// It changed since the preview.
    #[error("{path} changed since the preview: look at the changes again")]
    Changed {
        /// The file.
        path: String,
    },
    /// There was nothing to rewire.
    #[error("nothing in {path} to rewire: no entry runs a server Postern has configured")]
    Nothing {
        /// The file.
        path: String,
    },
    /// Writing the backup or the file failed (the file is as it was).
    #[error("cannot write {path}: {error}")]
    Write {
        /// The file.
        path: String,
        /// Why.
        error: std::io::Error,
    },
}

/// What rewiring the file at `path` would change: each entry whose command is that of a
/// server in `configured` (by its label) becomes `postern mcp <label>` on `home`, run as
/// `postern`.
pub fn plan(
    path: &Path,
    configured: &[ServerConfig],
    postern: &str,
    home: &Home,
) -> Result<Plan, ImportError> {
    let shown = path.display().to_string();
    let before = std::fs::read_to_string(path).map_err(|error| ImportError::Read {
        path: shown.clone(),
        error,
    })?;
    let mut json: Value = serde_json::from_str(&before).map_err(|e| ImportError::Shape {
        path: shown.clone(),
        why: e.to_string(),
    })?;
    let mut changes = Vec::new();
    for servers in server_maps(&mut json) {
        for (name, spec) in servers.iter_mut() {
            let found = entry(name, spec);
            let Some(config) = found.config().filter(|_| found.route == Route::Direct) else {
                continue;
            };
            let Some(ours) = configured
                .iter()
                .find(|c| c.label == config.label && c.command == config.command)
            else {
                continue;
            };
            let args = shim_args(ours.label.as_str(), home);
            let mut rewired = Map::new();
            if let Some(kind) = spec.get("type") {
                rewired.insert("type".into(), kind.clone());
            }
            rewired.insert("command".into(), json!(postern));
            rewired.insert("args".into(), json!(args));
            changes.push(Change {
                name: name.clone(),
                label: ours.label.to_string(),
                before: found.command.clone(),
                after: std::iter::once(postern.to_owned()).chain(args).collect(),
                env_names: found.env_names.clone(),
            });
            *spec = Value::Object(rewired);
        }
    }
    let mut after = serde_json::to_string_pretty(&json).map_err(|e| ImportError::Shape {
        path: shown.clone(),
        why: e.to_string(),
    })?;
    if before.ends_with('\n') {
        after.push('\n');
    }
    Ok(Plan {
        path: shown,
        changes,
        before,
        after,
    })
}

/// Writes `plan`: the file as it was goes to a backup beside it (returned), then the
/// rewired text replaces it. Refused when the file changed since `plan` read it.
pub fn apply(plan: &Plan) -> Result<PathBuf, RewireError> {
    let path = Path::new(&plan.path);
    if plan.changes.is_empty() {
        return Err(RewireError::Nothing {
            path: plan.path.clone(),
        });
    }
    let now = std::fs::read_to_string(path).map_err(|error| ImportError::Read {
        path: plan.path.clone(),
        error,
    })?;
    if now != plan.before {
        return Err(RewireError::Changed {
            path: plan.path.clone(),
        });
    }
    let write_err = |error| RewireError::Write {
        path: plan.path.clone(),
        error,
    };
    // A file reached through a symlink (dotfile managers) is rewritten where it lives.
    let target = std::fs::canonicalize(path).map_err(write_err)?;
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let backup = sibling(&target, &format!("postern-backup-{stamp}"));
    // `copy` keeps the permissions: the backup holds what the file held (its env values).
    std::fs::copy(&target, &backup).map_err(write_err)?;
    let staged = sibling(&target, "postern-rewire");
    let written = (|| {
        let mut file = std::fs::File::create(&staged)?;
        file.set_permissions(std::fs::metadata(&target)?.permissions())?;
        file.write_all(plan.after.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&staged, &target)
    })();
    if let Err(error) = written {
        let _ = std::fs::remove_file(&staged);
        return Err(write_err(error));
    }
    Ok(backup)
}

/// `<file>.<suffix>` beside `file`.
fn sibling(file: &Path, suffix: &str) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{suffix}"));
    file.with_file_name(name)
}

/// The `mcpServers` maps of a configuration: the top-level one and, for Claude Code, each
/// project's.
fn server_maps(json: &mut Value) -> Vec<&mut Map<String, Value>> {
    let Some(root) = json.as_object_mut() else {
        return Vec::new();
    };
    let mut maps = Vec::new();
    let mut projects = None;
    for (key, value) in root.iter_mut() {
        match key.as_str() {
            "mcpServers" => maps.extend(value.as_object_mut()),
            "projects" => projects = value.as_object_mut(),
            _ => {}
        }
    }
    if let Some(projects) = projects {
        maps.extend(
            projects
                .values_mut()
                .filter_map(|p| p.get_mut("mcpServers").and_then(Value::as_object_mut)),
        );
    }
    maps
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::read;

    const CLAUDE_JSON: &str = r#"{
  "numStartups": 12,
  "mcpServers": {
    "time": {"type": "stdio", "command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC", "TIME_TOKEN": "s3cret-value"}},
    "linear": {"type": "http", "url": "https://mcp.linear.app/mcp"},
    "notes": {"command": "python3", "args": ["-m", "notes"]}
  },
  "projects": {"/work/app": {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}, "other": {"command": "node", "args": ["x.js"]}}}}
}
"#;

    fn configured(label: &str, command: &[&str]) -> ServerConfig {
        ServerConfig::new(
            label.parse().expect("label"),
            command.iter().map(|w| (*w).to_owned()).collect(),
            None,
            Vec::new(),
        )
        .expect("config")
    }

    #[test]
    fn rewires_what_postern_runs_keeps_the_rest_and_backs_the_file_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(".claude.json");
        std::fs::write(&path, CLAUDE_JSON).expect("write");
        let home = Home::at(dir.path().join("postern-home"));
        let before = Coverage::of(&read(&path).expect("read"));
        assert_eq!(
            before.sentence,
            "0 of 4 servers through Postern; linear is remote, not gated; time, notes, other run directly"
        );

        let ours = [configured("time", &["uvx", "mcp-server-time"])];
        let plan = plan(&path, &ours, "/opt/postern/bin/postern", &home).expect("plan");
        assert_eq!(
            plan.changes
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["time", "time"],
            "the user's entry and the project's, both the same command"
        );
        assert_eq!(plan.changes[0].before, ["uvx", "mcp-server-time"]);
        assert_eq!(plan.changes[0].after[0], "/opt/postern/bin/postern");
        assert_eq!(
            plan.changes[0].after.last().map(String::as_str),
            Some("time")
        );
        assert_eq!(plan.changes[0].env_names, ["TZ", "TIME_TOKEN"]);
        let shown = serde_json::to_string(&plan).expect("json");
        assert!(
            !shown.contains("s3cret-value"),
            "a preview never holds values: {shown}"
        );

        let backup = apply(&plan).expect("written");
        assert_eq!(
            std::fs::read_to_string(&backup).expect("backup"),
            CLAUDE_JSON
        );
        let after: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        assert_eq!(after["numStartups"], 12, "other keys stay");
        let time = &after["mcpServers"]["time"];
        assert_eq!(time["type"], "stdio");
        assert_eq!(time["command"], "/opt/postern/bin/postern");
        assert!(
            time.get("env").is_none(),
            "Postern holds the environment now"
        );
        assert_eq!(after["mcpServers"]["notes"]["command"], "python3");
        assert_eq!(
            after["mcpServers"]
                .as_object()
                .expect("servers")
                .keys()
                .collect::<Vec<_>>(),
            ["time", "linear", "notes"],
            "the entries keep their order"
        );
        let now = Coverage::of(&read(&path).expect("read"));
        assert_eq!(
            now.sentence,
            "1 of 4 servers through Postern; linear is remote, not gated; notes, other run directly"
        );
        assert!(
            std::fs::read_to_string(&path)
                .expect("read")
                .ends_with("}\n")
        );
    }

    #[test]
    fn a_file_changed_since_the_preview_is_left_alone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mcp.json");
        std::fs::write(&path, CLAUDE_JSON).expect("write");
        let home = Home::at(dir.path().join("postern-home"));
        let ours = [configured("notes", &["python3", "-m", "notes"])];
        let plan = plan(&path, &ours, "postern", &home).expect("plan");
        std::fs::write(&path, CLAUDE_JSON.replace("12", "13")).expect("the agent writes");

        let err = apply(&plan).expect_err("changed");
        assert!(matches!(err, RewireError::Changed { .. }), "{err}");
        assert!(std::fs::read_to_string(&path).expect("read").contains("13"));
        assert_eq!(
            std::fs::read_dir(dir.path()).expect("dir").count(),
            1,
            "no backup, no stray file"
        );

        let other = [configured("notes", &["python3", "-m", "other"])];
        let none = super::plan(&path, &other, "postern", &home).expect("plan");
        assert!(
            none.changes.is_empty(),
            "another command under the same name is not ours"
        );
        assert!(matches!(apply(&none), Err(RewireError::Nothing { .. })));
    }
}
