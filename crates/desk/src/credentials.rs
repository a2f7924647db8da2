//! Credentials from the window: list (the engine's `Authority`), and add, rotate, remove,
//! bind, unbind, move into the keychain (management requests the engine carries out: values
//! to the OS keychain, metadata to the store).
//!
//! A value crosses IPC once, inbound, in [`SecretValue`]: it is wrapped in a
//! `postern_vault::Secret` as it is deserialized (redacted `Debug`, zeroized on drop) and
//! handed to the engine. No command returns a value, and no type here can hold one on the way
//! out.

use postern_domain::credential::loosely_here;
use postern_domain::decision::SettingTarget;
use postern_domain::{AnswerChannel, Credential, Injection};
use postern_engine::answer::{ControlAnswer, ControlCommand, SecretText};
use postern_store::Store;
use postern_store::journal::CredentialUse;
use postern_vault::Secret;
use serde::{Deserialize, Deserializer, Serialize};
use ts_rs::TS;

use std::sync::Arc;

use crate::Desk;
use crate::commands::{
    CommandError, ErrorCode, ProofInput, authority, blocking, request, running_home, unexpected,
};

/// A credential as the window lists it: everything but its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CredentialItem {
    /// The scope name grants and approval cards use.
    pub name: String,
    /// How its value reaches the code that uses it.
    pub injection: CredentialKind,
    /// The hosts an HTTP request may carry it to (header kinds).
    pub hosts: Vec<String>,
    /// Those of its hosts that name this machine loosely (without a port, or as `localhost`,
    /// kept from before an address and port were required): any process of the user listening
    /// where a request for one connects receives the value.
    pub loosely_here: Vec<String>,
    /// Every call that would use it needs a human.
    pub every_use: bool,
    /// Bumped by each rotation.
    pub version: u32,
    /// When it was added (unix ms).
    #[ts(type = "number")]
    pub created_at_ms: u64,
    /// When it was last rotated (unix ms).
    #[ts(type = "number | null")]
    pub rotated_at_ms: Option<u64>,
    /// The servers it is bound to (the built-in `postern` for header kinds).
    pub servers: Vec<String>,
    /// Where it went through the egress broker, the most recent first.
    pub uses: Vec<CredentialUseItem>,
}

/// One credential's requests from one server toward one host, through the egress broker
/// (the journal's `CredentialUse`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct CredentialUseItem {
    /// The server whose launches sent them.
    pub server: String,
    /// The host they were headed to.
    pub host: String,
    /// Requests the broker put the value in.
    #[ts(type = "number")]
    pub uses: u64,
    /// Requests refused: its placeholder was headed to a host it is not bound to.
    #[ts(type = "number")]
    pub leaks: u64,
    /// The first (unix ms).
    #[ts(type = "number")]
    pub first_ms: i64,
    /// The last (unix ms).
    #[ts(type = "number")]
    pub last_ms: i64,
}

/// How a credential is injected (the domain's `Injection`, with a TypeScript twin).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum CredentialKind {
    /// An environment variable of a stdio server, at launch.
    Env {
        /// The variable's name.
        var: String,
    },
    /// `Authorization: Bearer <value>` on the built-in `http_request`.
    Bearer,
    /// A named header on the built-in `http_request`.
    Header {
        /// The header's name.
        name: String,
    },
    /// `Authorization: Basic <base64(value)>` (the value is `user:password`).
    Basic,
}

/// A credential to add, as the form gives it.
#[derive(Debug, Deserialize, TS)]
#[serde(rename_all = "camelCase")]
pub struct NewCredential {
    /// Its name: 1 to 48 of `a-z 0-9 - _ .`.
    pub name: String,
    /// How it is injected.
    pub injection: CredentialKind,
    /// The hosts it may go to (header kinds).
    pub hosts: Vec<String>,
    /// Ask a human for every call that would use it.
    pub every_use: bool,
    /// The value, typed into a password field.
    #[ts(type = "string")]
    pub value: SecretValue,
}

/// A credential value on its way in. Deserialized straight into a `Secret`; never
/// serialized (it has no `Serialize`), never shown by `Debug`.
#[derive(Debug)]
pub struct SecretValue(Secret<String>);

impl SecretValue {
    /// The secret, taken out.
    pub fn into_secret(self) -> Secret<String> {
        self.0
    }

    /// The secret as a management request carries it (this copy is zeroized when dropped).
    pub fn into_text(self) -> SecretText {
        SecretText(self.0.expose().clone())
    }
}

impl<'de> Deserialize<'de> for SecretValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Self(Secret::new(String::deserialize(deserializer)?)))
    }
}

/// Every credential, by name, with the servers it is bound to.
pub async fn credentials(desk: &Arc<Desk>) -> Result<Vec<CredentialItem>, CommandError> {
    let authority = authority(desk)?;
    let home = running_home(desk)?;
    blocking(move || {
        let list = authority
            .credentials()
            .map_err(|e| CommandError::new(ErrorCode::Refused, e.to_string()))?;
        // The engine has no read of bindings by credential yet (docs/app.md, "Stopgaps").
        let store = Store::open_read_only(home.path()).map_err(failed)?;
        // Every use as the gate applies it: the setting, which the Permissions page (or
        // `postern every-use`) may have changed since the credential was added.
        let every_use = authority.every_use();
        list.into_iter()
            .map(|mut c| {
                let servers = store.bound_servers(&c.name).map_err(failed)?;
                let uses = store.credential_uses(&c.name).map_err(failed)?;
                c.every_use = every_use.iter().any(|s| {
                    matches!(&s.target, SettingTarget::Credential { name } if name == c.name.as_str())
                });
                Ok(item(c, servers.iter().map(ToString::to_string).collect(), uses))
            })
            .collect()
    })
    .await
}

/// Adds a credential: the value to the keychain, the rest to the store.
pub async fn add_credential(
    desk: &Arc<Desk>,
    credential: NewCredential,
    proof: Option<ProofInput>,
) -> Result<(), CommandError> {
    let command = ControlCommand::CredentialAdd {
        name: credential.name,
        injection: injection(credential.injection),
        hosts: credential.hosts,
        every_use: credential.every_use,
        value: credential.value.into_text(),
    };
    manage(desk, command, proof).await.map(drop)
}

/// Replaces a credential's value; servers holding the old one restart with the new one.
pub async fn rotate_credential(
    desk: &Arc<Desk>,
    name: String,
    value: SecretValue,
    proof: Option<ProofInput>,
) -> Result<(), CommandError> {
    let command = ControlCommand::CredentialRotate {
        name,
        value: value.into_text(),
    };
    manage(desk, command, proof).await.map(drop)
}

/// Removes a credential, its value and its bindings; servers holding it restart without it.
pub async fn remove_credential(
    desk: &Arc<Desk>,
    name: String,
    proof: Option<ProofInput>,
) -> Result<(), CommandError> {
    let command = ControlCommand::CredentialRemove { name };
    manage(desk, command, proof).await.map(drop)
}

/// Binds a credential to a server; returns whether it was not bound before.
pub async fn bind_credential(
    desk: &Arc<Desk>,
    server: String,
    name: String,
    proof: Option<ProofInput>,
) -> Result<bool, CommandError> {
    let command = ControlCommand::Bind {
        server,
        credential: name,
    };
    match manage(desk, command, proof).await? {
        ControlAnswer::Bind { changed } => Ok(changed),
        other => Err(unexpected(&other)),
    }
}

/// Moves the environment variable `var` of `server` (plain text in Postern's configuration,
/// as an imported agent configuration had it) into the keychain: an env credential bound to
/// the server. Returns the credential's name. Adds and binds a credential: it needs the proof.
pub async fn move_to_keychain(
    desk: &Arc<Desk>,
    server: String,
    var: String,
    proof: Option<ProofInput>,
) -> Result<String, CommandError> {
    match manage(desk, ControlCommand::MoveToKeychain { server, var }, proof).await? {
        ControlAnswer::MoveToKeychain { name } => Ok(name),
        other => Err(unexpected(&other)),
    }
}

/// Unbinds a credential from a server; returns whether it was bound.
pub async fn unbind_credential(
    desk: &Arc<Desk>,
    server: String,
    name: String,
) -> Result<bool, CommandError> {
    let command = ControlCommand::Unbind {
        server,
        credential: name,
    };
    match manage(desk, command, None).await? {
        ControlAnswer::Unbind { changed } => Ok(changed),
        other => Err(unexpected(&other)),
    }
}

/// One credential request from the window.
async fn manage(
    desk: &Desk,
    command: ControlCommand,
    proof: Option<ProofInput>,
) -> Result<ControlAnswer, CommandError> {
    request(desk, command, proof, AnswerChannel::Window).await
}

fn item(c: Credential, servers: Vec<String>, uses: Vec<CredentialUse>) -> CredentialItem {
    CredentialItem {
        name: c.name.to_string(),
        injection: match c.injection {
            Injection::Env { var } => CredentialKind::Env { var },
            Injection::Bearer => CredentialKind::Bearer,
            Injection::Header { name } => CredentialKind::Header { name },
            Injection::Basic => CredentialKind::Basic,
        },
        loosely_here: c
            .hosts
            .iter()
            .filter(|h| loosely_here(h))
            .cloned()
            .collect(),
        hosts: c.hosts,
        every_use: c.every_use,
        version: c.version,
        created_at_ms: c.created_at,
        rotated_at_ms: c.rotated_at,
        servers,
        uses: uses
            .into_iter()
            .map(|u| CredentialUseItem {
                server: u.server,
                host: u.host,
                uses: u.uses,
                leaks: u.leaks,
                first_ms: u.first_ms,
                last_ms: u.last_ms,
            })
            .collect(),
    }
}

/// The form's kind, names trimmed; [`CredentialSpec::new`] checks the rest.
fn injection(kind: CredentialKind) -> Injection {
    match kind {
        CredentialKind::Env { var } => Injection::Env {
            var: var.trim().to_owned(),
        },
        CredentialKind::Bearer => Injection::Bearer,
        CredentialKind::Header { name } => Injection::Header {
            name: name.trim().to_owned(),
        },
        CredentialKind::Basic => Injection::Basic,
    }
}

fn failed(e: impl std::fmt::Display) -> CommandError {
    CommandError::new(ErrorCode::Failed, e.to_string())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::testing::{invoke, running_desk, stop};

    const CANARY: &str = "canary-value-7f3a";

    #[test]
    fn a_credential_is_added_listed_rotated_bound_and_removed_without_its_value_coming_back() {
        let (desk, _surface, _home) = running_desk();
        invoke(
            &desk,
            "add_server",
            json!({"server": {"label": "inventory", "command": ["node", "s.js"], "cwd": null, "env": []}}),
        )
        .unwrap();
        let add = json!({"credential": {
            "name": "inventory-api", "injection": {"kind": "env", "var": "INVENTORY_TOKEN"},
            "hosts": [], "everyUse": true, "value": CANARY,
        }, "proof": {"passphrase": "postern-app-tests"}});
        assert_eq!(
            invoke(&desk, "add_credential", add.clone()).unwrap(),
            json!(null)
        );
        let taken = invoke(&desk, "add_credential", add).unwrap_err();
        assert_eq!(taken["code"], "refused", "{taken}");
        assert!(!taken.to_string().contains(CANARY));

        assert_eq!(
            invoke(
                &desk,
                "bind_credential",
                json!({"server": "inventory", "name": "inventory-api", "proof": {"passphrase": "postern-app-tests"}})
            )
            .unwrap(),
            json!(true)
        );
        invoke(
            &desk,
            "rotate_credential",
            json!({"name": "inventory-api", "value": "v2-value", "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap();
        let listed = invoke(&desk, "credentials", json!({})).unwrap();
        assert_eq!(listed[0]["name"], "inventory-api");
        assert_eq!(
            listed[0]["injection"],
            json!({"kind": "env", "var": "INVENTORY_TOKEN"})
        );
        assert_eq!(listed[0]["everyUse"], true);
        assert_eq!(listed[0]["version"], 2);
        assert!(listed[0]["rotatedAtMs"].is_number(), "{listed}");
        assert_eq!(listed[0]["servers"], json!(["inventory"]));
        let text = listed.to_string();
        assert!(
            !text.contains(CANARY) && !text.contains("v2-value"),
            "{text}"
        );

        // A header credential goes to the built-in server only: the engine says so.
        invoke(
            &desk,
            "add_credential",
            json!({"credential": {"name": "gh", "injection": {"kind": "bearer"},
                   "hosts": [" api.github.com ", ""], "everyUse": false, "value": "x"}, "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap();
        let wrong = invoke(
            &desk,
            "bind_credential",
            json!({"server": "inventory", "name": "gh", "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap_err();
        assert_eq!(wrong["code"], "refused");
        assert!(
            wrong["message"].as_str().unwrap().contains("built-in"),
            "{wrong}"
        );
        let listed = invoke(&desk, "credentials", json!({})).unwrap();
        assert_eq!(listed[0]["hosts"], json!(["api.github.com"]), "{listed}");

        assert_eq!(
            invoke(
                &desk,
                "unbind_credential",
                json!({"server": "inventory", "name": "inventory-api", "proof": {"passphrase": "postern-app-tests"}})
            )
            .unwrap(),
            json!(true)
        );
        invoke(
            &desk,
            "remove_credential",
            json!({"name": "inventory-api", "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap();
        invoke(
            &desk,
            "remove_credential",
            json!({"name": "gh", "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap();
        assert_eq!(invoke(&desk, "credentials", json!({})).unwrap(), json!([]));
        let gone = invoke(
            &desk,
            "remove_credential",
            json!({"name": "gh", "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap_err();
        assert_eq!(gone["code"], "refused");
        stop(&desk);
    }

    #[test]
    fn malformed_input_is_refused_before_a_proof_is_asked() {
        let (desk, _surface, _home) = running_desk();
        for (credential, why) in [
            (
                json!({"name": "Bad Name", "injection": {"kind": "bearer"}, "hosts": [], "everyUse": false, "value": "x"}),
                "credential name",
            ),
            (
                json!({"name": "ok", "injection": {"kind": "env", "var": " "}, "hosts": [], "everyUse": false, "value": "x"}),
                "environment variable",
            ),
            (
                json!({"name": "ok", "injection": {"kind": "bearer"}, "hosts": ["https://api.github.com/"], "everyUse": false, "value": "x"}),
                "give the host alone, e.g. api.github.com, not a URL",
            ),
            (
                json!({"name": "ok", "injection": {"kind": "header", "name": "Bad Header"}, "hosts": ["api.github.com"], "everyUse": false, "value": "x"}),
                "is not an HTTP header name",
            ),
        ] {
            let refused =
                invoke(&desk, "add_credential", json!({ "credential": credential })).unwrap_err();
            assert_eq!(refused["code"], "bad_request", "{refused}");
            assert!(
                refused["message"].as_str().unwrap().contains(why),
                "{refused}"
            );
        }
        let empty = invoke(
            &desk,
            "add_credential",
            json!({"credential": {"name": "ok", "injection": {"kind": "bearer"}, "hosts": ["h.example"], "everyUse": false, "value": ""}, "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap_err();
        assert_eq!(
            empty["code"], "refused",
            "the engine refuses an empty value: {empty}"
        );
        let basic = invoke(
            &desk,
            "add_credential",
            json!({"credential": {"name": "ok", "injection": {"kind": "basic"}, "hosts": ["h.example"], "everyUse": false, "value": "canary-no-colon"}, "proof": {"passphrase": "postern-app-tests"}}),
        )
        .unwrap_err();
        assert_eq!(basic["code"], "refused", "{basic}");
        assert!(
            basic["message"].as_str().unwrap().contains("user:password")
                && !basic.to_string().contains("canary-no-colon"),
            "{basic}"
        );
        stop(&desk);
    }

    #[test]
    fn a_value_is_redacted_in_debug_output() {
        let new: super::NewCredential = serde_json::from_value(json!({
            "name": "x", "injection": {"kind": "bearer"}, "hosts": [], "everyUse": false, "value": CANARY,
        }))
        .unwrap();
        assert!(!format!("{new:?}").contains(CANARY));
    }
}
