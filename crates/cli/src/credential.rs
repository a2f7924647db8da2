//! `postern credential ...` and `postern server bind|unbind`: credentials whose values live in
//! the OS keychain. A value is read from stdin, never from an argument, and no command shows
//! one back.

use std::io::{IsTerminal, Read, Write};

use anyhow::{Context, Result, bail};
use clap::{Subcommand, ValueEnum};
use postern_domain::credential::loosely_here;
use postern_domain::{Credential, CredentialSpec, Injection};
use postern_engine::Home;
use postern_engine::answer::{ControlAnswer, ControlCommand, SecretText};
use postern_store::Store;
use serde_json::Value;

use crate::gate::{ask, mismatch};

/// `postern credential`.
#[derive(Debug, Subcommand)]
pub enum CredentialCommand {
    /// Add a credential; its value is read from stdin (never from an argument).
    Add {
        /// Its scope name, e.g. inventory-api-staging.
        name: String,
        /// How it is injected: `env` (a server's environment variable at launch), or as an
        /// HTTP header on the built-in `http_request`: `bearer`, `header`, `basic`.
        #[arg(long, value_enum)]
        kind: Kind,
        /// The environment variable (kind env).
        #[arg(long, value_name = "VAR", required_if_eq("kind", "env"))]
        env: Option<String>,
        /// The header's name (kind header).
        #[arg(long, value_name = "NAME", required_if_eq("kind", "header"))]
        header: Option<String>,
        /// A host requests may carry it to (repeatable). For a header kind, through the built-in
        /// http_request; for an env credential, through the egress broker: the server then holds
        /// a placeholder and the broker puts the value in its requests to these hosts only. Any
        /// port, unless HOST names one (api.example.com:8443); this machine is named by its
        /// address and port (127.0.0.1:8080), not as localhost.
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
        /// Every call that would use it needs a human.
        #[arg(long)]
        every_use: bool,
    },
    /// List credentials (names, kinds, bindings; never values).
    List {
        /// As JSON.
        #[arg(long)]
        json: bool,
    },
    /// Replace a credential's value (read from stdin); servers holding the old one restart.
    Rotate {
        /// Its scope name.
        name: String,
    },
    /// Remove a credential and its value from the keychain.
    Remove {
        /// Its scope name.
        name: String,
    },
}

/// How a credential is injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// An environment variable of a stdio server, at launch.
    Env,
    /// `Authorization: Bearer <value>` on `http_request`.
    Bearer,
    /// A named header on `http_request`.
    Header,
    /// `Authorization: Basic` with the value `user:password`, on `http_request`.
    Basic,
}

/// Runs `postern credential ...`.
pub fn credential(home: &Home, command: CredentialCommand) -> Result<()> {
    let mut out = crate::terminal::out();
    match command {
        CredentialCommand::Add {
            name,
            kind,
            env,
            header,
            hosts,
            every_use,
        } => {
            // Checked before the value is read: nobody types a secret into a command that
            // was going to be refused anyway.
            let spec = spec(kind, env, header, &hosts)?;
            let value = read_value()?;
            let answer = ask(
                home,
                ControlCommand::CredentialAdd {
                    name: name.clone(),
                    injection: spec.injection().clone(),
                    hosts: spec.hosts(),
                    every_use,
                    value,
                },
            )?;
            let ControlAnswer::CredentialAdd(added) = answer else {
                return Err(mismatch(&answer));
            };
            writeln!(
                out,
                "added credential '{}' ({}); bind it with: postern server bind <label> {}",
                added.name,
                describe(&added.injection),
                added.name
            )?;
        }
        CredentialCommand::List { json } => {
            home.prepare()?;
            let store = Store::open(home.path())?;
            let credentials = store.credentials()?;
            // From the bindings, so the built-in server (not in the servers table) shows too.
            let bound_to = |c: &Credential| -> Vec<String> {
                store
                    .bound_servers(&c.name)
                    .unwrap_or_default()
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            };
            if json {
                let rows: Vec<Value> = credentials
                    .iter()
                    .map(|c| {
                        let mut row = serde_json::to_value(c).unwrap_or_default();
                        row["servers"] = bound_to(c).into();
                        row["uses"] = serde_json::to_value(
                            store.credential_uses(&c.name).unwrap_or_default(),
                        )
                        .unwrap_or_default();
                        row
                    })
                    .collect();
                writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
                return Ok(());
            }
            if credentials.is_empty() {
                writeln!(
                    out,
                    "no credentials; add one with: postern credential add <name> --kind env --env VAR < value-file"
                )?;
            }
            for c in &credentials {
                let servers = bound_to(c);
                writeln!(
                    out,
                    "{}\t{}\tv{}{}{}{}",
                    c.name,
                    describe(&c.injection),
                    c.version,
                    if c.hosts.is_empty() {
                        String::new()
                    } else {
                        format!("\thosts: {}", c.hosts.join(", "))
                    },
                    if servers.is_empty() {
                        "\tunbound".to_owned()
                    } else {
                        format!("\tservers: {}", servers.join(", "))
                    },
                    if c.every_use { "\tevery use" } else { "" }
                )?;
                for host in c.hosts.iter().filter(|h| loosely_here(h)) {
                    writeln!(
                        out,
                        "\tnote: {host} is not one address and port of this machine, so any process of yours listening where a request for it connects receives it; add the credential again as the address and port your service listens on (e.g. 127.0.0.1:8080)"
                    )?;
                }
                // Where it went through the egress broker, and where it was refused.
                for u in store.credential_uses(&c.name).unwrap_or_default() {
                    writeln!(
                        out,
                        "\t{} -> {}: {} sent, {} refused (last {})",
                        u.server,
                        u.host,
                        u.uses,
                        u.leaks,
                        crate::audit::rfc3339(u.last_ms)
                    )?;
                }
            }
        }
        CredentialCommand::Rotate { name } => {
            let value = read_value()?;
            let answer = ask(
                home,
                ControlCommand::CredentialRotate {
                    name: name.clone(),
                    value,
                },
            )?;
            let ControlAnswer::CredentialRotate(rotated) = answer else {
                return Err(mismatch(&answer));
            };
            writeln!(
                out,
                "rotated credential '{name}' to version {}; servers holding the old value restart",
                rotated.version
            )?;
        }
        CredentialCommand::Remove { name } => {
            ask(
                home,
                ControlCommand::CredentialRemove { name: name.clone() },
            )?;
            writeln!(out, "removed credential '{name}' and its value")?;
        }
    }
    Ok(())
}

/// `postern server bind`: the server's launches get the credential once a person approves them.
pub fn bind(home: &Home, server: String, credential: String) -> Result<()> {
    let answer = ask(
        home,
        ControlCommand::Bind {
            server: server.clone(),
            credential: credential.clone(),
        },
    )?;
    let ControlAnswer::Bind { changed: fresh } = answer else {
        return Err(mismatch(&answer));
    };
    let when = if server == postern_domain::BUILTIN_LABEL {
        "an http_request to one of its hosts carries it once a human approves that call"
    } else {
        "a launch gets it once a human approves that launch's identity for it"
    };
    writeln!(
        crate::terminal::out(),
        "{} credential '{credential}' to '{server}': {when}",
        if fresh { "bound" } else { "already bound" }
    )?;
    Ok(())
}

/// `postern server unbind`: the server's launches no longer get the credential.
pub fn unbind(home: &Home, server: String, credential: String) -> Result<()> {
    let answer = ask(
        home,
        ControlCommand::Unbind {
            server: server.clone(),
            credential: credential.clone(),
        },
    )?;
    let ControlAnswer::Unbind { changed } = answer else {
        return Err(mismatch(&answer));
    };
    if !changed {
        bail!("credential '{credential}' was not bound to '{server}'");
    }
    writeln!(
        crate::terminal::out(),
        "unbound credential '{credential}' from '{server}'"
    )?;
    Ok(())
}

/// The injection and hosts of `credential add`, checked ([`CredentialSpec::new`]).
fn spec(
    kind: Kind,
    env: Option<String>,
    header: Option<String>,
    hosts: &[String],
) -> Result<CredentialSpec> {
    if kind != Kind::Env && env.is_some() {
        bail!("--env VAR is for --kind env; a header credential names its header with --header");
    }
    if kind != Kind::Header && header.is_some() {
        bail!("--header NAME is for --kind header");
    }
    let injection = match kind {
        Kind::Env => Injection::Env {
            var: env.context("--kind env needs --env VAR")?,
        },
        Kind::Bearer => Injection::Bearer,
        Kind::Header => Injection::Header {
            name: header.context("--kind header needs --header NAME")?,
        },
        Kind::Basic => Injection::Basic,
    };
    if kind != Kind::Env && hosts.is_empty() {
        bail!("a header credential needs at least one --host it may be sent to");
    }
    Ok(CredentialSpec::new(injection, hosts)?)
}

/// The value, from stdin: everything up to EOF, one trailing newline removed.
fn read_value() -> Result<SecretText> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        eprintln!("type the value, then Ctrl-D (it is not echoed back anywhere):");
    }
    let mut value = String::new();
    stdin
        .read_to_string(&mut value)
        .context("reading the credential's value from stdin")?;
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    if value.is_empty() {
        bail!(
            "no value on stdin: pipe it in, e.g. `postern credential add NAME --kind env --env VAR < file`"
        );
    }
    Ok(SecretText(value))
}

fn describe(injection: &Injection) -> String {
    match injection {
        Injection::Env { var } => format!("env {var}"),
        Injection::Bearer => "bearer header".into(),
        Injection::Header { name } => format!("header {name}"),
        Injection::Basic => "basic auth".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(kind: Kind, env: Option<&str>, header: Option<&str>, hosts: &[&str]) -> String {
        let hosts: Vec<String> = hosts.iter().map(|h| (*h).to_owned()).collect();
        let refused =
            spec(kind, env.map(Into::into), header.map(Into::into), &hosts).expect_err("refused");
        format!("{refused:#}")
    }

    #[test]
    fn credential_add_refuses_what_could_never_work_before_reading_the_value() {
        assert_eq!(
            refusal(Kind::Bearer, None, None, &["https://api.github.com/"]),
            "give the host alone, e.g. api.github.com, not a URL (\"https://api.github.com/\"): a credential goes to every path of its hosts"
        );
        assert!(refusal(Kind::Bearer, None, None, &["*.github.com"]).contains("has a wildcard"));
        assert!(
            refusal(Kind::Header, None, Some("Bad Header"), &["h.example"])
                .contains("is not an HTTP header name")
        );
        assert!(
            refusal(Kind::Header, None, Some("Host"), &["h.example"])
                .contains("cannot send a credential as \"Host\"")
        );
        assert!(
            refusal(Kind::Env, Some("BAD NAME"), None, &[])
                .contains("\"BAD NAME\" is not an environment variable name")
        );
        assert!(
            refusal(Kind::Env, Some("LD_PRELOAD"), None, &[]).contains("cannot set LD_PRELOAD")
        );
        assert!(
            refusal(
                Kind::Env,
                Some("API_TOKEN"),
                None,
                &["https://example.com/"]
            )
            .starts_with("give the host alone")
        );
        assert!(
            refusal(Kind::Bearer, Some("X"), None, &["h.example"])
                .starts_with("--env VAR is for --kind env")
        );
        assert_eq!(
            refusal(Kind::Basic, None, None, &[]),
            "a header credential needs at least one --host it may be sent to"
        );
    }

    #[test]
    fn hosts_are_sent_as_requests_name_them() {
        let hosts = ["API.GitHub.com".to_owned(), "api.github.com".to_owned()];
        let checked = spec(Kind::Bearer, None, None, &hosts).expect("valid");
        assert_eq!(checked.hosts(), ["api.github.com"]);
    }
}
