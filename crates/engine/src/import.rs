//! Importing servers from an agent's existing MCP configuration (Claude Desktop, Claude Code,
//! Cursor), and the snippet that points the agent at Postern instead (issue 7, first run).
//!
//! All three use the same shape: `{"mcpServers": {"<name>": {"command": "...", "args": [...],
//! "env": {...}, "cwd": "..."}}}` (Claude Code also nests per-project maps under `projects`).
//! Entries that are not stdio servers (`url`/`type: "http"|"sse"`) cannot be gated yet and are
//! reported as skipped, as are entries already pointing at `postern mcp`.

use std::path::{Path, PathBuf};

use postern_domain::{EnvVar, ServerConfig, ServerLabel};
use serde::Serialize;
use serde_json::{Map, Value, json};
use ts_rs::TS;

/// An agent whose configuration Postern can read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub enum Client {
    /// Claude Desktop's `claude_desktop_config.json`.
    ClaudeDesktop,
    /// Claude Code's `~/.claude.json`.
    ClaudeCode,
    /// Cursor's `~/.cursor/mcp.json`.
    Cursor,
}

/// A configuration file found on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Found {
    /// Whose file it is.
    pub client: Client,
    /// Where it is.
    pub path: String,
}

/// One server entry read from a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The entry's name in the file (the label Postern would use, when valid).
    pub name: String,
    /// The command and its arguments (empty when skipped for lack of one).
    pub command: Vec<String>,
    /// Environment variable names it sets (values are imported, never shown).
    pub env_names: Vec<String>,
    /// Why it cannot be imported, if so.
    pub skipped: Option<String>,
    #[serde(skip)]
    #[ts(skip)]
    config: Option<ServerConfig>,
}

impl Entry {
    /// The configuration to add, unless skipped.
    pub fn config(&self) -> Option<&ServerConfig> {
        self.config.as_ref()
    }
}

/// Why a configuration file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    /// It is not the JSON shape agents use.
    #[error("{path} is not an MCP configuration: {why}")]
    Shape { path: String, why: String },
}

/// The configuration files of known agents that exist under `home` (the user's home
/// directory), in a fixed order.
pub fn find(home: &Path) -> Vec<Found> {
    let candidates = [
        (
            Client::ClaudeDesktop,
            home.join("Library/Application Support/Claude/claude_desktop_config.json"),
        ),
        (
            Client::ClaudeDesktop,
            home.join(".config/Claude/claude_desktop_config.json"),
        ),
        (Client::ClaudeCode, home.join(".claude.json")),
        (Client::Cursor, home.join(".cursor/mcp.json")),
    ];
    candidates
        .into_iter()
        .filter(|(_, path)| path.is_file())
        .map(|(client, path)| Found {
            client,
            path: path.display().to_string(),
        })
        .collect()
}

/// The server entries of one configuration file.
pub fn read(path: &Path) -> Result<Vec<Entry>, ImportError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: shown.clone(),
        source,
    })?;
    let json: Value = serde_json::from_str(&text).map_err(|e| ImportError::Shape {
        path: shown.clone(),
        why: e.to_string(),
    })?;
    let mut maps: Vec<&Map<String, Value>> = Vec::new();
    if let Some(servers) = json.get("mcpServers").and_then(Value::as_object) {
        maps.push(servers);
    }
    // Claude Code: per-project servers under projects.<dir>.mcpServers.
    if let Some(projects) = json.get("projects").and_then(Value::as_object) {
        maps.extend(
            projects
                .values()
                .filter_map(|p| p.get("mcpServers").and_then(Value::as_object)),
        );
    }
    if maps.is_empty() {
        return Err(ImportError::Shape {
            path: shown,
            why: "no `mcpServers` object".into(),
        });
    }
    let mut entries: Vec<Entry> = Vec::new();
    for (name, spec) in maps.into_iter().flatten() {
        if entries.iter().any(|e| &e.name == name) {
            continue;
        }
        entries.push(entry(name, spec));
    }
    Ok(entries)
}

fn entry(name: &str, spec: &Value) -> Entry {
    let command: Vec<String> = spec
        .get("command")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .into_iter()
        .chain(
            spec.get("args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned),
        )
        .collect();
    let env: Vec<EnvVar> = spec
        .get("env")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| format!("{k}={}", v.as_str()?).parse().ok())
        .collect();
    let mut out = Entry {
        name: name.to_owned(),
        command: command.clone(),
        env_names: env.iter().map(|v| v.name.clone()).collect(),
        skipped: None,
        config: None,
    };
    let remote = spec.get("url").is_some()
        || matches!(
            spec.get("type").and_then(Value::as_str),
            Some("http" | "sse")
        );
    let skip = if remote {
        Some("a remote (HTTP) server: Postern gates stdio servers".to_owned())
    } else if command.is_empty() {
        Some("no command".to_owned())
    } else if is_postern(&command) {
        Some("already goes through Postern".to_owned())
    } else {
        None
    };
    if skip.is_some() {
        out.skipped = skip;
        return out;
    }
    let label = match ServerLabel::parse_configurable(&name.to_ascii_lowercase()) {
        Ok(label) => label,
        Err(e) => {
            out.skipped = Some(format!("its name cannot be a Postern label: {e}"));
            return out;
        }
    };
    let cwd = spec
        .get("cwd")
        .and_then(Value::as_str)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    match ServerConfig::new(label, command, cwd, env) {
        Ok(config) => out.config = Some(config),
        Err(e) => out.skipped = Some(e.to_string()),
    }
    out
}

fn is_postern(command: &[String]) -> bool {
    let program = Path::new(&command[0])
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    program.starts_with("postern") && command.iter().any(|a| a == "mcp")
}

/// The configuration an agent needs to reach `labels` through Postern (the `mcpServers`
/// shape all three clients read), with `postern` as the program to run.
pub fn snippet(labels: &[String], postern: &str) -> Value {
    let servers: Map<String, Value> = labels
        .iter()
        .map(|l| (l.clone(), json!({"command": postern, "args": ["mcp", l]})))
        .collect();
    json!({ "mcpServers": servers })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_stdio_servers_and_says_why_others_are_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mcp.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                "Inventory": {"command": "node", "args": ["dist/server.js"], "cwd": "/work/inventory"},
                "remote": {"type": "http", "url": "https://example.com/mcp"},
                "gated": {"command": "postern", "args": ["mcp", "time"]},
                "bad name!": {"command": "x"}
            },
            "projects": {"/w": {"mcpServers": {"proj": {"command": "python", "args": ["s.py"]}}}}}"#,
        )
        .expect("write");
        let entries = read(&path).expect("read");
        let by = |n: &str| entries.iter().find(|e| e.name == n).expect(n);
        let time = by("time").config().expect("time imports");
        assert_eq!(time.command, ["uvx", "mcp-server-time"]);
        assert_eq!(by("time").env_names, ["TZ"]);
        let inventory = by("Inventory").config().expect("lower-cased label");
        assert_eq!(inventory.label.as_str(), "inventory");
        assert_eq!(inventory.cwd.as_deref(), Some(Path::new("/work/inventory")));
        assert!(
            by("remote")
                .skipped
                .as_deref()
                .unwrap_or_default()
                .contains("remote")
        );
        assert!(
            by("gated")
                .skipped
                .as_deref()
                .unwrap_or_default()
                .contains("Postern")
        );
        assert!(by("bad name!").skipped.is_some());
        assert!(
            by("proj").config().is_some(),
            "Claude Code project servers too"
        );
        let json = serde_json::to_string(&entries).expect("json");
        assert!(!json.contains("UTC"), "env values are never shown: {json}");
    }

    #[test]
    fn a_file_without_servers_is_refused_clearly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x.json");
        std::fs::write(&path, "{}").expect("write");
        let err = read(&path).expect_err("no servers");
        assert!(err.to_string().contains("mcpServers"), "{err}");
    }

    #[test]
    fn the_snippet_points_each_label_at_the_shim() {
        let s = snippet(&["time".into()], "/usr/local/bin/postern");
        assert_eq!(
            s,
            json!({"mcpServers": {"time": {"command": "/usr/local/bin/postern", "args": ["mcp", "time"]}}})
        );
    }
}
