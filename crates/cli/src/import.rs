//! `postern server import`: the stdio servers of an agent's MCP configuration (Claude Desktop,
//! Claude Code, Cursor) into Postern, each entry added or skipped with the reason, then the
//! configuration that points the agent at Postern instead. Environment variables that look like
//! secrets are imported as the file had them (in plain text), with a warning naming them (never
//! their values) and the commands that move them to the OS keychain.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use postern_domain::{CredentialName, ServerConfig, ServerLabel};
use postern_engine::servers::{self, Existing, ServerError};
use postern_engine::{Home, import};
use postern_store::Store;

use crate::{shell_words, tell_engine_config_changed};

/// `postern server import`.
pub fn import(
    home: &Home,
    store: &Store,
    file: Option<PathBuf>,
    dry_run: bool,
    out: &mut impl Write,
) -> Result<()> {
    let files: Vec<PathBuf> = match file {
        Some(file) => vec![file],
        None => {
            let user =
                dirs_home().context("no home directory to look for agent configurations in")?;
            let found = import::find(&user);
            if found.is_empty() {
                bail!(
                    "no Claude Desktop, Claude Code or Cursor configuration found under {}; name the file",
                    user.display()
                );
            }
            found.into_iter().map(|f| PathBuf::from(f.path)).collect()
        }
    };
    let mut labels = Vec::new();
    for path in files {
        writeln!(out, "{}:", path.display())?;
        for entry in import::read(&path)? {
            let Some(config) = entry.config() else {
                writeln!(
                    out,
                    "  skipped {}: {}",
                    entry.name,
                    entry.skipped.as_deref().unwrap_or("?")
                )?;
                continue;
            };
            let added = if dry_run {
                servers::check(store, config, Existing::Refuse)
            } else {
                servers::add(store, config, Existing::Refuse).map(drop)
            };
            match added {
                Ok(()) => {}
                Err(e @ (ServerError::Exists(_) | ServerError::EnvSetByCredential { .. })) => {
                    writeln!(out, "  skipped {}: {e}", entry.name)?;
                    continue;
                }
                Err(e) => return Err(e.into()),
            }
            let renamed = if config.label.as_str() == entry.name {
                String::new()
            } else {
                format!(" (named {:?} in the file, not a label)", entry.name)
            };
            writeln!(
                out,
                "  {} {}{renamed}: {}",
                if dry_run { "would add" } else { "added" },
                config.label,
                shell_words(&config.command)
            )?;
            let secrets = entry.secret_env_names();
            if !secrets.is_empty() {
                keychain_advice(out, config, &secrets, dry_run)?;
            }
            labels.push(config.label.to_string());
        }
    }
    if labels.is_empty() {
        return Ok(());
    }
    if !dry_run {
        tell_engine_config_changed(home);
    }
    let postern = postern_engine::postern_program()
        .map_or_else(|_| "postern".into(), |p| p.display().to_string());
    writeln!(
        out,
        "\nPoint the agent at Postern instead (replace these entries in its configuration):"
    )?;
    writeln!(
        out,
        "{}",
        serde_json::to_string_pretty(&import::snippet(&labels, &postern, home))?
    )?;
    writeln!(out, "Claude Code:")?;
    for label in &labels {
        let add = import::claude_code_command(label, &postern, home);
        writeln!(out, "  claude mcp remove {label}; {add}")?;
    }
    Ok(())
}

/// The warning for imported variables that look like secrets (`vars`, never their values):
/// they are stored in plain text, as the file had them, and how to move them to the keychain.
fn keychain_advice(
    out: &mut impl Write,
    config: &ServerConfig,
    vars: &[&str],
    dry_run: bool,
) -> Result<()> {
    let label = &config.label;
    writeln!(
        out,
        "    warning: {} {} like {}: {} in plain text in Postern's configuration, as in this file. To keep {} in the OS keychain instead, released only to code you approved:",
        vars.join(", "),
        if vars.len() == 1 { "looks" } else { "look" },
        if vars.len() == 1 {
            "a secret"
        } else {
            "secrets"
        },
        if dry_run {
            "it would be stored"
        } else {
            "stored"
        },
        if vars.len() == 1 { "it" } else { "them" },
    )?;
    let mut readd: Vec<String> = vec!["postern server add".into(), label.to_string()];
    if let Some(cwd) = &config.cwd {
        readd.push(format!(
            "--cwd {}",
            shell_words(&[cwd.display().to_string()])
        ));
    }
    for var in config
        .env
        .iter()
        .filter(|v| !vars.contains(&v.name.as_str()))
    {
        readd.push(format!("--env {}=<its value>", var.name));
    }
    readd.push(format!("-- {}", shell_words(&config.command)));
    writeln!(
        out,
        "      {}   (again, without {})",
        readd.join(" "),
        vars.join(", ")
    )?;
    for var in vars {
        let name = credential_name_for(label, var);
        writeln!(
            out,
            "      postern credential add {name} --kind env --env {var} < value-file"
        )?;
        writeln!(out, "      postern server bind {label} {name}")?;
    }
    Ok(())
}

/// A credential name for `var` of server `label`: `label-var` when it fits, else `var`.
fn credential_name_for(label: &ServerLabel, var: &str) -> String {
    let var = var.to_ascii_lowercase().replace('_', "-");
    [format!("{label}-{var}"), var]
        .into_iter()
        .find(|n| n.parse::<CredentialName>().is_ok())
        .unwrap_or_else(|| "NAME".into())
}

fn dirs_home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "ghp-canary-value-7f3a";

    /// Imports `file` into a fresh home: the result, what was printed, the store (and the
    /// directory holding it).
    fn run(
        file: &std::path::Path,
        dry_run: bool,
    ) -> (Result<()>, String, Store, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::at(dir.path().join("home"));
        home.prepare().expect("home");
        let store = Store::open(home.path()).expect("store");
        let mut out = Vec::new();
        let result = import(&home, &store, Some(file.to_owned()), dry_run, &mut out);
        (result, String::from_utf8(out).expect("utf8"), store, dir)
    }

    #[test]
    fn entries_are_added_under_a_valid_label_or_skipped_with_the_reason() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("claude_desktop_config.json");
        let config = format!(
            r#"{{"mcpServers": {{
                "Time Server": {{"command": "uvx", "args": ["mcp-server-time"],
                                 "env": {{"TZ": "Europe/Paris", "GITHUB_TOKEN": "{SECRET}"}}}},
                "args-only": {{"args": ["mcp-server-fetch"]}}
            }}}}"#
        );
        std::fs::write(&file, config).expect("write");
        let (result, out, store, _home) = run(&file, false);
        result.expect("import");
        for line in [
            "  added time-server (named \"Time Server\" in the file, not a label): uvx mcp-server-time",
            "    warning: GITHUB_TOKEN looks like a secret: stored in plain text in Postern's configuration, as in this file. To keep it in the OS keychain instead, released only to code you approved:",
            "      postern server add time-server --env TZ=<its value> -- uvx mcp-server-time   (again, without GITHUB_TOKEN)",
            "      postern credential add time-server-github-token --kind env --env GITHUB_TOKEN < value-file",
            "      postern server bind time-server time-server-github-token",
            "  skipped args-only: no \"command\" to run (its \"args\" are only the arguments; Postern does not guess the program)",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "missing {line:?} in:\n{out}"
            );
        }
        assert!(
            !out.contains(SECRET) && !out.contains("Europe/Paris"),
            "{out}"
        );
        let label: ServerLabel = "time-server".parse().expect("label");
        let added = store.server(&label).expect("read").expect("added");
        assert_eq!(added.env.len(), 2, "imported as the file had it");
        assert!(
            store
                .server(&"args-only".parse().expect("label"))
                .expect("read")
                .is_none()
        );

        // Again: now it is configured, and a dry run changes nothing either way.
        let again = {
            let mut out = Vec::new();
            let home = Home::at(dir.path().join("unused"));
            import(&home, &store, Some(file.clone()), true, &mut out).expect("again");
            String::from_utf8(out).expect("utf8")
        };
        assert!(
            again.contains("  skipped Time Server: a server 'time-server' is configured already"),
            "{again}"
        );
    }

    #[test]
    fn a_missing_file_says_why_once() {
        let missing = std::path::Path::new("/nonexistent/postern/claude_desktop_config.json");
        let (result, ..) = run(missing, true);
        let refused = format!("{:#}", result.expect_err("missing"));
        assert_eq!(
            refused,
            "cannot read /nonexistent/postern/claude_desktop_config.json: No such file or directory (os error 2)"
        );
    }
}
