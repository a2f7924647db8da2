//! Importing servers from an agent's existing MCP configuration (Claude Desktop, Claude Code,
//! Cursor), and the snippet that points the agent at Postern instead (issue 7, first run).
//!
//! All three use the same shape: `{"mcpServers": {"<name>": {"command": "...", "args": [...],
//! "env": {...}, "cwd": "..."}}}` (Claude Code also nests per-project maps under `projects`).
//! Entries that are not stdio servers (`url`/`type: "http"|"sse"`) cannot be gated yet and are
//! reported as skipped, as are entries already pointing at `postern mcp`, entries without a
//! `command` and entries whose environment has a name no shell could set. An entry whose name
//! is not a label (`Time Server`) is imported under its normalized label (`time-server`) when
//! that one is valid and no other entry of the file has it.

use std::path::{Path, PathBuf};

use postern_domain::{EnvName, EnvVar, LabelError, ServerConfig, ServerLabel};

use crate::Home;
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

/// How an agent reaches the server an entry describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub enum Route {
    /// The agent runs the command itself: nothing gates its calls.
    Direct,
    /// The entry runs `postern mcp <label>`: the gate decides its calls.
    Postern,
    /// A remote (HTTP) server: Postern gates stdio servers only.
    Remote,
    /// Not a server the agent can start (no command).
    Unusable,
}

/// One server entry read from a configuration file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The entry's name in the file (the label Postern would use, when valid).
    pub name: String,
    /// How the agent reaches it today.
    pub route: Route,
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
    #[error("cannot read {path}: {error}")]
    Read {
        path: String,
        // Not a `source`: the sentence already says it, and a chain would say it twice.
        error: std::io::Error,
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
    let text = std::fs::read_to_string(path).map_err(|error| ImportError::Read {
        path: shown.clone(),
        error,
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
        let mut entry = entry(name, spec);
        let taken = entry.config().and_then(|c| {
            entries
                .iter()
                .find(|e| e.config().is_some_and(|o| o.label == c.label))
        });
        if let Some(first) = taken {
            entry.skipped = Some(format!(
                "its label '{}' is taken by the entry {:?} of the same file",
                first.config().map(|c| c.label.as_str()).unwrap_or_default(),
                first.name
            ));
            entry.config = None;
        }
        entries.push(entry);
    }
    Ok(entries)
}

impl Entry {
    /// The names of its environment variables that look like secrets (a name with TOKEN,
    /// SECRET, PASSWORD, KEY, ... in it): imported in plain text, as the file had them, but
    /// better kept in the OS keychain as env credentials.
    pub fn secret_env_names(&self) -> Vec<&str> {
        self.env_names
            .iter()
            .map(String::as_str)
            .filter(|n| looks_secret(n))
            .collect()
    }
}

/// Whether an environment variable's name says it holds a secret.
pub fn looks_secret(name: &str) -> bool {
    const ANYWHERE: [&str; 7] = [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PRIVATE",
        "APIKEY",
    ];
    let upper = name.to_ascii_uppercase();
    ANYWHERE.iter().any(|part| upper.contains(part))
        || upper.split('_').any(|word| {
            word.ends_with("KEY")
                || word.ends_with("KEYS")
                || word.starts_with("AUTHORIZ")
                || matches!(word, "AUTH" | "PASS" | "PAT" | "COOKIE")
        })
}

/// The entry `name` of a configuration file, as `spec` describes it.
pub(crate) fn entry(name: &str, spec: &Value) -> Entry {
    let program = spec.get("command").and_then(Value::as_str);
    let command: Vec<String> = program
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
    let mut env: Vec<EnvVar> = Vec::new();
    let mut bad_env = None;
    for (key, value) in spec
        .get("env")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let Some(value) = value.as_str() else {
            continue;
        };
        match key.parse::<EnvName>() {
            Ok(_) if !value.contains('\0') => env.push(EnvVar {
                name: key.clone(),
                value: value.to_owned(),
            }),
            Ok(_) => bad_env = Some(format!("the value of its env {key} has a NUL byte")),
            Err(e) => bad_env = Some(format!("its env: {e}")),
        }
    }
    let remote = spec.get("url").is_some()
        || matches!(
            spec.get("type").and_then(Value::as_str),
            Some("http" | "sse")
        );
    let route = if remote {
        Route::Remote
    } else if program.is_none_or(str::is_empty) {
        Route::Unusable
    } else if is_postern(&command) {
        Route::Postern
    } else {
        Route::Direct
    };
    let mut out = Entry {
        name: name.to_owned(),
        route,
        command: command.clone(),
        env_names: env.iter().map(|v| v.name.clone()).collect(),
        skipped: None,
        config: None,
    };
    let skip = match route {
        Route::Remote => Some("a remote (HTTP) server: Postern gates stdio servers".to_owned()),
        Route::Unusable => Some(
            "no \"command\" to run (its \"args\" are only the arguments; Postern does not guess the program)"
                .to_owned(),
        ),
        Route::Postern => Some("already goes through Postern".to_owned()),
        Route::Direct => bad_env,
    };
    if skip.is_some() {
        out.skipped = skip;
        return out;
    }
    let label = match label_for(name) {
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

/// The label for an entry named `name`: the name itself when it is one, else the name in
/// lower case with each run of other characters made one '-' (`Time Server` is
/// `time-server`), when that is a label a user may configure.
fn label_for(name: &str) -> Result<ServerLabel, LabelError> {
    let refused = match ServerLabel::parse_configurable(name) {
        Ok(label) => return Ok(label),
        Err(e) => e,
    };
    let mut normalized = String::with_capacity(name.len());
    for c in name.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.') {
            normalized.push(c);
        } else if !normalized.is_empty() && !normalized.ends_with('-') {
            normalized.push('-');
        }
    }
    let punctuation = ['-', '_', '.'];
    let mut normalized = normalized.trim_start_matches(punctuation).to_owned();
    normalized.truncate(ServerLabel::MAX_LEN);
    match ServerLabel::parse_configurable(normalized.trim_end_matches(punctuation)) {
        Err(LabelError::Empty) => Err(refused),
        parsed => parsed,
    }
}

fn is_postern(command: &[String]) -> bool {
    let program = Path::new(&command[0])
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    program.starts_with("postern") && command.iter().any(|a| a == "mcp")
}

/// The configuration an agent needs to reach `labels` through Postern (the `mcpServers`
/// shape all three clients read), with `postern` as the program to run, on `home`.
pub fn snippet(labels: &[String], postern: &str, home: &Home) -> Value {
    let servers: Map<String, Value> = labels
        .iter()
        .map(|l| {
            (
                l.clone(),
                json!({"command": postern, "args": shim_args(l, home)}),
            )
        })
        .collect();
    json!({ "mcpServers": servers })
}

/// The arguments of `postern` that carry an agent to `label` on `home`: `mcp <label>`, after
/// `--home <dir>` unless it is the default home (an agent does not inherit the shell's
/// `POSTERN_HOME`, so a snippet without it would reach another home).
pub fn shim_args(label: &str, home: &Home) -> Vec<String> {
    let mut args = Vec::new();
    if !home.is_default() {
        // Absolute: the agent resolves a relative one against its own directory.
        let path = std::path::absolute(home.path()).unwrap_or_else(|_| home.path().to_owned());
        args.extend(["--home".to_owned(), path.display().to_string()]);
    }
    args.extend(["mcp".to_owned(), label.to_owned()]);
    args
}

/// The Claude Code command that points it at `label` through Postern, quoted for a shell.
pub fn claude_code_command(label: &str, postern: &str, home: &Home) -> String {
    let mut shim = vec![postern.to_owned()];
    shim.extend(shim_args(label, home));
    format!(
        "claude mcp add {} -- {}",
        shell_words(&[label.to_owned()]),
        shell_words(&shim)
    )
}

/// `words` as a shell would need them typed: each quoted unless it is plainly safe.
pub fn shell_words(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:@+,".contains(c))
            {
                w.clone()
            } else {
                format!("'{}'", w.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
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
        assert_eq!(
            by("bad name!").config().map(|c| c.label.as_str()),
            Some("bad-name"),
            "a name that is not a label is imported under its normalized label"
        );
        assert!(
            by("proj").config().is_some(),
            "Claude Code project servers too"
        );
        let json = serde_json::to_string(&entries).expect("json");
        assert!(!json.contains("UTC"), "env values are never shown: {json}");
    }

    /// The entries of a configuration file holding `text`.
    fn read_text(text: &str) -> Vec<Entry> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mcp.json");
        std::fs::write(&path, text).expect("write");
        read(&path).expect("read")
    }

    #[test]
    fn an_entry_without_a_command_or_with_a_bad_env_name_is_skipped_with_the_reason() {
        let entries = read_text(
            r#"{"mcpServers": {
                "args-only": {"args": ["mcp-server-time", "--local-timezone", "UTC"]},
                "spaced-env": {"command": "node", "env": {"BAD NAME": "x-secret-value"}}
            }}"#,
        );
        assert!(entries.iter().all(|e| e.config().is_none()), "{entries:?}");
        assert_eq!(
            entries[0].skipped.as_deref(),
            Some(
                "no \"command\" to run (its \"args\" are only the arguments; Postern does not guess the program)"
            )
        );
        let env = entries[1].skipped.as_deref().unwrap_or_default();
        assert!(
            env.contains("\"BAD NAME\" is not an environment variable name"),
            "{env}"
        );
        assert!(!env.contains("x-secret-value"), "{env}");
    }

    #[test]
    fn a_name_that_is_not_a_label_is_imported_under_its_normalized_label_once() {
        let entries = read_text(
            r#"{"mcpServers": {
                "Time Server": {"command": "uvx", "args": ["mcp-server-time"]},
                "time-server": {"command": "uvx", "args": ["other"]},
                "  My  Files (RO) ": {"command": "files"},
                "Postern": {"command": "x"},
                "日本": {"command": "x"}
            }}"#,
        );
        let label = |i: usize| entries[i].config().map(|c| c.label.to_string());
        assert_eq!(label(0).as_deref(), Some("time-server"));
        assert_eq!(
            entries[1].skipped.as_deref(),
            Some("its label 'time-server' is taken by the entry \"Time Server\" of the same file")
        );
        assert_eq!(label(2).as_deref(), Some("my-files-ro"));
        assert!(
            entries[3]
                .skipped
                .as_deref()
                .is_some_and(|s| s.contains("reserved")),
            "{:?}",
            entries[3]
        );
        assert!(entries[4].skipped.is_some(), "{:?}", entries[4]);
    }

    #[test]
    fn secret_looking_variables_are_named() {
        for secret in [
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "ApiKey",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_PAT",
            "SLACK_AUTH",
            "PRIVATE_KEY_PEM",
        ] {
            assert!(looks_secret(secret), "{secret}");
        }
        for plain in ["TZ", "PATH", "NODE_ENV", "LOG_LEVEL", "PWD", "AUTHOR"] {
            assert!(!looks_secret(plain), "{plain}");
        }
    }

    #[test]
    fn a_missing_file_says_why_once() {
        let err = read(Path::new("/nonexistent/postern/mcp.json")).expect_err("missing");
        let text = err.to_string();
        assert!(
            text.starts_with("cannot read /nonexistent/postern/mcp.json: "),
            "{text}"
        );
        assert!(
            std::error::Error::source(&err).is_none(),
            "the cause is in the sentence; a chain would print it twice"
        );
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
    fn the_snippet_points_each_label_at_the_shim_on_this_home() {
        let default = Home::at(dirs::data_dir().expect("a data directory").join("postern"));
        let s = snippet(&["time".into()], "/usr/local/bin/postern", &default);
        assert_eq!(
            s,
            json!({"mcpServers": {"time": {"command": "/usr/local/bin/postern", "args": ["mcp", "time"]}}})
        );
        // Another home must be named: the agent does not inherit the shell's POSTERN_HOME.
        let other = Home::at("/srv/postern-home");
        assert_eq!(
            snippet(&["time".into()], "postern", &other)["mcpServers"]["time"]["args"],
            json!(["--home", "/srv/postern-home", "mcp", "time"])
        );
        // A shell gets it quoted.
        assert_eq!(
            claude_code_command("time", "/opt/postern", &Home::at("/srv/my home")),
            "claude mcp add time -- /opt/postern --home '/srv/my home' mcp time"
        );
    }
}
