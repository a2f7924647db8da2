//! Servers from the window: restart one, add one (the first-run guide's form), import those of
//! an agent's existing configuration, and the snippet that points the agent at Postern.
//!
//! Restart is a management request (`ControlCommand::Restart`). Adding goes through the store, as the CLI's
//! `postern server add` does, then the engine in this process records the change in the audit
//! log at once (`Engine::config_changed`): the app never talks to its engine over the socket.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use postern_domain::{AnswerChannel, ServerConfig};
use postern_engine::Home;
use postern_engine::answer::{ControlAnswer, ControlCommand};
use postern_engine::import::{self, Entry, Found};
use postern_engine::rewire::{self, Coverage};
use postern_engine::servers::{self, Existing, ServerError, ServerForm};
use postern_store::Store;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::Desk;
use crate::commands::{CommandError, ErrorCode, blocking, request, running_home, unexpected};

/// Restarts every running process of `label`: each gets a new execution epoch, and calls in
/// flight fail explicitly (refresh-contract §5). Returns how many were running.
pub async fn restart(desk: &Arc<Desk>, label: String) -> Result<u32, CommandError> {
    let command = ControlCommand::Restart { server: label };
    match request(desk, command, None, AnswerChannel::Window).await? {
        ControlAnswer::Restart { restarted } => Ok(u32::try_from(restarted).unwrap_or(u32::MAX)),
        other => Err(unexpected(&other)),
    }
}

/// A server to add, as the first-run form gives it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct NewServer {
    /// The label agents will use (`postern mcp <label>`).
    pub label: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The working directory (absolute; must exist), if any.
    pub cwd: Option<String>,
    /// Environment variables, `NAME=value` each.
    pub env: Vec<String>,
}

/// Adds a server; refuses a label that is configured already (the window never replaces one
/// silently). Returns the label.
pub async fn add_server(desk: &Arc<Desk>, server: NewServer) -> Result<String, CommandError> {
    let home = running_home(desk)?;
    let config = config(server)?;
    let label = config.label.to_string();
    let store_home = home.clone();
    blocking(move || {
        let store = open_store(&store_home)?;
        servers::add(&store, &config, Existing::Refuse).map_err(refused)?;
        Ok(())
    })
    .await?;
    config_changed(desk);
    Ok(label)
}

/// An agent configuration file found on this machine (or named by the user), and its servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct ImportSource {
    /// Whose file it is and where, when it is a known agent's.
    pub found: Option<Found>,
    /// The file.
    pub path: String,
    /// Its server entries (each says why it would be skipped, if so).
    pub entries: Vec<Entry>,
    /// Why the file could not be read.
    pub error: Option<String>,
    /// How its servers are reached now (`null` when it could not be read).
    pub coverage: Option<Coverage>,
}

/// The configuration files of Claude Desktop, Claude Code and Cursor under the user's home
/// directory, or the one file at `path`, with their servers (names, commands, variable names;
/// never values).
pub async fn import_sources(path: Option<String>) -> Vec<ImportSource> {
    let found: Vec<(Option<Found>, PathBuf)> = match path {
        Some(path) => vec![(None, PathBuf::from(path))],
        None => user_home()
            .map(|home| import::find(&home))
            .unwrap_or_default()
            .into_iter()
            .map(|f| {
                let path = PathBuf::from(&f.path);
                (Some(f), path)
            })
            .collect(),
    };
    found
        .into_iter()
        .map(|(found, path)| {
            let (entries, error) = match import::read(&path) {
                Ok(entries) => (entries, None),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
            ImportSource {
                found,
                path: path.display().to_string(),
                coverage: error.is_none().then(|| Coverage::of(&entries)),
                entries,
                error,
            }
        })
        .collect()
}

/// What became of one entry the user chose to import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Imported {
    /// The entry's name in the file.
    pub name: String,
    /// The label it was added under.
    pub label: Option<String>,
    /// Why it was not added.
    pub skipped: Option<String>,
    /// Its environment variables whose names say they hold a secret: imported in plain text,
    /// as the file had them, better moved into the keychain.
    pub secrets: Vec<String>,
}

/// Adds the entries `names` of the configuration file at `path` (read again here: the window
/// never holds their environment values). Entries that cannot be imported, or whose label is
/// configured already, are skipped with the reason.
pub async fn import_servers(
    desk: &Arc<Desk>,
    path: String,
    names: Vec<String>,
) -> Result<Vec<Imported>, CommandError> {
    let home = running_home(desk)?;
    let store_home = home.clone();
    let out = blocking(move || {
        let entries = import::read(Path::new(&path))
            .map_err(|e| CommandError::new(ErrorCode::BadRequest, e.to_string()))?;
        let store = open_store(&store_home)?;
        let mut out = Vec::new();
        for name in names {
            let entry = entries.iter().find(|e| e.name == name);
            let outcome = match entry.map(|e| (e, e.config())) {
                None => skipped(name, "not in the file".into()),
                Some((e, None)) => skipped(name, e.skipped.clone().unwrap_or_default()),
                Some((entry, Some(config))) => match servers::add(&store, config, Existing::Refuse)
                {
                    Err(e @ (ServerError::Exists(_) | ServerError::EnvSetByCredential { .. })) => {
                        skipped(name, e.to_string())
                    }
                    Err(e) => return Err(refused(e)),
                    Ok(_) => Imported {
                        name,
                        label: Some(config.label.to_string()),
                        skipped: None,
                        secrets: entry
                            .secret_env_names()
                            .into_iter()
                            .map(str::to_owned)
                            .collect(),
                    },
                },
            };
            out.push(outcome);
        }
        Ok(out)
    })
    .await?;
    if out.iter().any(|i| i.label.is_some()) {
        config_changed(desk);
    }
    Ok(out)
}

/// What rewiring the agent configuration at `path` would change: each entry that runs a
/// server Postern has configured (the same command) would run `postern mcp <label>`.
pub async fn rewire_preview(desk: &Arc<Desk>, path: String) -> Result<rewire::Plan, CommandError> {
    let home = running_home(desk)?;
    blocking(move || plan(&home, &path)).await
}

/// A rewired agent configuration: where the file as it was is kept, and its coverage now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct Rewired {
    /// The backup of the file as it was, beside it.
    pub backup: String,
    /// How its servers are reached now.
    pub coverage: Coverage,
}

/// Rewires the agent configuration at `path` as its preview showed (`names`: the entries the
/// preview listed); refused when the file or Postern's servers changed since.
pub async fn rewire(
    desk: &Arc<Desk>,
    path: String,
    names: Vec<String>,
) -> Result<Rewired, CommandError> {
    let home = running_home(desk)?;
    blocking(move || {
        let plan = plan(&home, &path)?;
        let planned: Vec<&str> = plan.changes.iter().map(|c| c.name.as_str()).collect();
        if planned != names {
            return Err(CommandError::new(
                ErrorCode::Refused,
                format!("{path} or Postern's servers changed since the preview: look at the changes again"),
            ));
        }
        let backup = rewire::apply(&plan).map_err(|e| match e {
            rewire::RewireError::Changed { .. } | rewire::RewireError::Nothing { .. } => {
                CommandError::new(ErrorCode::Refused, e.to_string())
            }
            other => failed(other),
        })?;
        let entries = import::read(Path::new(&path))
            .map_err(|e| CommandError::new(ErrorCode::BadRequest, e.to_string()))?;
        Ok(Rewired {
            backup: backup.display().to_string(),
            coverage: Coverage::of(&entries),
        })
    })
    .await
}

fn plan(home: &Home, path: &str) -> Result<rewire::Plan, CommandError> {
    let configured = open_store(home)?.servers().map_err(failed)?;
    rewire::plan(Path::new(path), &configured, &postern_cli(), home)
        .map_err(|e| CommandError::new(ErrorCode::BadRequest, e.to_string()))
}

/// The configuration that points an agent at Postern for some servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct AgentSnippet {
    /// The `postern` program the snippet runs (an absolute path when one was found).
    pub postern: String,
    /// The `mcpServers` JSON that Claude Desktop, Claude Code and Cursor read, pretty-printed.
    pub json: String,
    /// The same for Claude Code's CLI, one command per server.
    pub claude_code: Vec<String>,
}

/// The snippet for `labels`, with the absolute path of the `postern` CLI, on the app's home.
pub fn agent_snippet(desk: &Desk, labels: Vec<String>) -> Result<AgentSnippet, CommandError> {
    Ok(snippet(&labels, &postern_cli(), &running_home(desk)?))
}

fn snippet(labels: &[String], postern: &str, home: &Home) -> AgentSnippet {
    let json =
        serde_json::to_string_pretty(&import::snippet(labels, postern, home)).unwrap_or_default();
    AgentSnippet {
        postern: postern.to_owned(),
        json,
        claude_code: labels
            .iter()
            .map(|l| import::claude_code_command(l, postern, home))
            .collect(),
    }
}

/// The `postern` CLI agents should run ([`postern_engine::postern_program`]: beside this app,
/// else on PATH), else the bare name.
pub fn postern_cli() -> String {
    postern_engine::postern_program().map_or_else(|_| "postern".into(), |p| p.display().to_string())
}

fn config(server: NewServer) -> Result<ServerConfig, CommandError> {
    let form = ServerForm {
        label: server.label,
        command: server.command,
        cwd: server
            .cwd
            .map(|c| PathBuf::from(c.trim()))
            .filter(|c| !c.as_os_str().is_empty()),
        env: server.env,
    };
    form.config().map_err(refused)
}

/// A server not added: bad input, or refused (a taken label).
fn refused(e: ServerError) -> CommandError {
    match e {
        ServerError::Invalid(_) => CommandError::new(ErrorCode::BadRequest, e.to_string()),
        ServerError::Exists(_) | ServerError::EnvSetByCredential { .. } => {
            CommandError::new(ErrorCode::Refused, e.to_string())
        }
        ServerError::Store(e) => failed(e),
    }
}

fn skipped(name: String, why: String) -> Imported {
    Imported {
        name,
        label: None,
        skipped: Some(why),
        secrets: Vec::new(),
    }
}

fn open_store(home: &Home) -> Result<Store, CommandError> {
    Store::open(home.path()).map_err(failed)
}

fn failed(e: impl std::fmt::Display) -> CommandError {
    CommandError::new(ErrorCode::Failed, e.to_string())
}

/// The change is queued in the database; the engine (in this process) records it in the
/// audit log now. Then the window is told too.
fn config_changed(desk: &Desk) {
    if desk
        .shell
        .with_engine(postern_engine::Engine::config_changed)
        .is_none()
    {
        tracing::warn!(
            "no engine runs to record the configuration change; it is recorded at its next start"
        );
    }
    desk.notify();
}

fn user_home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::testing::{invoke, running_desk, stop};

    fn labels(desk: &crate::Desk) -> Vec<String> {
        let status = desk.shell().with_engine(|e| e.status().unwrap()).unwrap();
        status.servers.into_iter().map(|s| s.label).collect()
    }

    #[test]
    fn a_server_added_from_the_window_is_configured_once() {
        let (desk, _surface, home) = running_desk();
        let server = json!({"server": {
            "label": "time", "command": ["uvx", "mcp-server-time"],
            "cwd": home.path().display().to_string(), "env": ["TZ=UTC", ""],
        }});

        assert_eq!(
            invoke(&desk, "add_server", server.clone()).unwrap(),
            json!("time")
        );
        assert_eq!(labels(&desk), ["time"]);
        let again = invoke(&desk, "add_server", server).unwrap_err();
        assert_eq!(again["code"], "refused", "{again}");

        for (bad, why) in [
            (
                json!({"label": "postern", "command": ["x"], "cwd": null, "env": []}),
                "reserved",
            ),
            (
                json!({"label": "x", "command": [], "cwd": null, "env": []}),
                "command",
            ),
            (
                json!({"label": "x", "command": ["x"], "cwd": "rel/dir", "env": []}),
                "absolute",
            ),
            (
                json!({"label": "x", "command": ["x"], "cwd": null, "env": ["NOVALUE"]}),
                "NOVALUE",
            ),
        ] {
            let refused = invoke(&desk, "add_server", json!({ "server": bad })).unwrap_err();
            assert_eq!(refused["code"], "bad_request", "{refused}");
            let message = refused["message"].as_str().unwrap();
            assert!(message.contains(why), "{why}: {message}");
        }
        stop(&desk);
    }

    #[test]
    fn restart_reports_how_many_processes_restart() {
        let (desk, _surface, _home) = running_desk();
        assert_eq!(
            invoke(&desk, "restart", json!({"label": "time"})).unwrap(),
            json!(0)
        );
        let bad = invoke(&desk, "restart", json!({"label": "not a label"})).unwrap_err();
        assert_eq!(bad["code"], "bad_request");
        stop(&desk);
    }

    #[test]
    fn servers_of_an_agent_configuration_are_listed_then_imported_by_name() {
        let (desk, _surface, home) = running_desk();
        let file = home.path().join("claude_desktop_config.json");
        std::fs::write(
            &file,
            r#"{"mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "secret-tz"}},
                "remote": {"type": "http", "url": "https://example.com/mcp"}
            }}"#,
        )
        .unwrap();
        let path = file.display().to_string();

        let sources = invoke(&desk, "import_sources", json!({"path": path})).unwrap();
        let entries = &sources[0]["entries"];
        assert_eq!(entries.as_array().unwrap().len(), 2, "{sources}");
        assert!(
            !sources.to_string().contains("secret-tz"),
            "values never reach the window"
        );

        let imported = invoke(
            &desk,
            "import_servers",
            json!({"path": path, "names": ["time", "remote", "nope"]}),
        )
        .unwrap();
        let by = |n: &str| -> Value {
            imported
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["name"] == n)
                .cloned()
                .unwrap()
        };
        assert_eq!(by("time")["label"], "time");
        assert!(by("remote")["skipped"].as_str().unwrap().contains("remote"));
        assert_eq!(by("nope")["skipped"], "not in the file");
        assert_eq!(labels(&desk), ["time"]);
        let twice = invoke(
            &desk,
            "import_servers",
            json!({"path": path, "names": ["time"]}),
        )
        .unwrap();
        assert!(
            twice[0]["skipped"]
                .as_str()
                .unwrap()
                .contains("configured already")
        );

        // The imported entry is rewired to go through Postern, as the preview says, with a
        // backup; the coverage says so.
        assert_eq!(
            sources[0]["coverage"]["sentence"],
            "0 of 2 servers through Postern; remote is remote, not gated; time runs directly"
        );
        let preview = invoke(&desk, "rewire_preview", json!({"path": path})).unwrap();
        assert_eq!(preview["changes"][0]["name"], "time");
        assert_eq!(preview["changes"][0]["envNames"], json!(["TZ"]));
        assert!(!preview.to_string().contains("secret-tz"), "{preview}");
        let stale = invoke(
            &desk,
            "rewire",
            json!({"path": path, "names": ["time", "remote"]}),
        );
        assert_eq!(
            stale.unwrap_err()["code"],
            "refused",
            "not what the preview showed"
        );
        let rewired = invoke(&desk, "rewire", json!({"path": path, "names": ["time"]})).unwrap();
        assert_eq!(
            rewired["coverage"]["sentence"],
            "1 of 2 servers through Postern; remote is remote, not gated"
        );
        let backup = rewired["backup"].as_str().unwrap();
        assert!(
            std::fs::read_to_string(backup)
                .unwrap()
                .contains("secret-tz")
        );
        let now: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let args = now["mcpServers"]["time"]["args"].as_array().unwrap();
        assert_eq!(args.last().unwrap(), "time");
        assert!(args.iter().any(|a| a == "mcp"), "{now}");

        let missing = invoke(
            &desk,
            "import_sources",
            json!({"path": "/nonexistent.json"}),
        )
        .unwrap();
        assert!(
            missing[0]["error"]
                .as_str()
                .unwrap()
                .contains("cannot read"),
            "{missing}"
        );
        stop(&desk);
    }

    #[test]
    fn the_snippet_runs_the_postern_cli_for_each_label_on_the_apps_home() {
        let home = postern_engine::Home::at("/srv/postern-home");
        let snippet = super::snippet(&["time".into()], "/opt/postern/bin/postern", &home);
        let json: Value = serde_json::from_str(&snippet.json).unwrap();
        assert_eq!(
            json,
            json!({"mcpServers": {"time": {"command": "/opt/postern/bin/postern",
                "args": ["--home", "/srv/postern-home", "mcp", "time"]}}})
        );
        assert_eq!(
            snippet.claude_code,
            ["claude mcp add time -- /opt/postern/bin/postern --home /srv/postern-home mcp time"]
        );
    }
}
