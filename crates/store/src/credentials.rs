//! The `credentials` and `server_credentials` tables: credential metadata and bindings.
//! Values never pass through here; they live in the OS keychain under
//! [`Credential::keychain_item`].

use postern_domain::{Credential, CredentialName, Injection, Narrowing, ServerLabel};
use rusqlite::{OptionalExtension, params};

use crate::servers::now_ms;
use crate::{Store, StoreError};

const COLUMNS: &str = "name, injection, hosts, every_use, version, created_at, rotated_at";

impl Store {
    /// Adds a credential's metadata (version 1). `false` when one with that name exists.
    pub fn add_credential(
        &self,
        name: &CredentialName,
        injection: &Injection,
        hosts: &[String],
        every_use: bool,
    ) -> Result<bool, StoreError> {
        let added = self.conn.execute(
            "INSERT INTO credentials (name, injection, hosts, every_use, version, created_at)
             VALUES (?1, ?2, ?3, ?4, 1, ?5) ON CONFLICT (name) DO NOTHING",
            params![
                name.as_str(),
                encode(injection, name)?,
                encode(&hosts, name)?,
                every_use,
                now_ms()
            ],
        )? > 0;
        if added {
            self.note_config_change(&format!("added credential '{name}'"), None)?;
        }
        Ok(added)
    }

    /// One credential's metadata.
    pub fn credential(&self, name: &CredentialName) -> Result<Option<Credential>, StoreError> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM credentials WHERE name = ?1"
            ))?
            .query_row([name.as_str()], Row::read)
            .optional()?
            .map(Row::into_credential)
            .transpose()
    }

    /// Every credential, by name.
    pub fn credentials(&self) -> Result<Vec<Credential>, StoreError> {
        let rows = self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM credentials ORDER BY name"))?
            .query_map([], Row::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(Row::into_credential).collect()
    }

    /// Moves a credential to its next version; returns the new metadata (`None`: unknown).
    pub fn rotate_credential(
        &self,
        name: &CredentialName,
    ) -> Result<Option<Credential>, StoreError> {
        let changed = self.conn.execute(
            "UPDATE credentials SET version = version + 1, rotated_at = ?2 WHERE name = ?1",
            params![name.as_str(), now_ms()],
        )?;
        if changed == 0 {
            return Ok(None);
        }
        self.note_config_change(&format!("rotated credential '{name}'"), None)?;
        self.credential(name)
    }

    /// Puts back a credential's injection and hosts as they were sealed (after they were found
    /// edited behind the engine's back); `false` when unknown.
    pub fn restore_credential_spec(
        &self,
        name: &CredentialName,
        injection: &Injection,
        hosts: &[String],
    ) -> Result<bool, StoreError> {
        Ok(self.conn.execute(
            "UPDATE credentials SET injection = ?2, hosts = ?3 WHERE name = ?1",
            params![
                name.as_str(),
                encode(injection, name)?,
                encode(&hosts, name)?
            ],
        )? > 0)
    }

    /// Removes a credential and its bindings; `false` when unknown.
    pub fn remove_credential(&self, name: &CredentialName) -> Result<bool, StoreError> {
        self.write_repairing(|store| {
            // Its bindings are removed here, not left to the foreign key's cascade: a write
            // retried after a repair of the schema runs with foreign keys off.
            store.conn.execute(
                "DELETE FROM server_credentials WHERE credential = ?1",
                [name.as_str()],
            )?;
            let removed = store
                .conn
                .execute("DELETE FROM credentials WHERE name = ?1", [name.as_str()])?
                > 0;
            if removed {
                store.note_narrowing(
                    &format!("removed credential '{name}'"),
                    None,
                    Some(&Narrowing::CredentialRemoved {
                        credential: name.clone(),
                    }),
                )?;
            }
            Ok(removed)
        })
    }

    /// Binds a credential to a server; `false` when it was bound already.
    pub fn bind(&self, server: &ServerLabel, name: &CredentialName) -> Result<bool, StoreError> {
        if self.credential(name)?.is_none() {
            return Err(StoreError::Corrupt {
                what: format!("credential '{name}'"),
                why: "no such credential".into(),
            });
        }
        let bound = self.conn.execute(
            "INSERT INTO server_credentials (server, credential) VALUES (?1, ?2)
             ON CONFLICT DO NOTHING",
            params![server.as_str(), name.as_str()],
        )? > 0;
        if bound {
            self.note_config_change(
                &format!("bound credential '{name}' to server '{server}'"),
                Some(server),
            )?;
        }
        Ok(bound)
    }

    /// Unbinds a credential from a server; `false` when it was not bound. The log's record of
    /// it says what it narrowed: the engine takes it again at each unlock after the seal it
    /// follows (made while the vault was locked, it could not be sealed; an older seal put back
    /// does not vouch for the binding again).
    pub fn unbind(&self, server: &ServerLabel, name: &CredentialName) -> Result<bool, StoreError> {
        // The binding's removal and its narrowing's queueing are one write: a narrowing that
        // cannot be queued leaves the binding as it was, and says so (review 15, R4).
        self.write_repairing(|store| {
            let unbound = store.conn.execute(
                "DELETE FROM server_credentials WHERE server = ?1 AND credential = ?2",
                params![server.as_str(), name.as_str()],
            )? > 0;
            if unbound {
                store.note_narrowing(
                    &format!("unbound credential '{name}' from server '{server}'"),
                    Some(server),
                    Some(&Narrowing::Unbound {
                        server: server.clone(),
                        credential: name.clone(),
                    }),
                )?;
            }
            Ok(unbound)
        })
    }

    /// The credentials bound to a server, by name.
    pub fn bindings(&self, server: &ServerLabel) -> Result<Vec<Credential>, StoreError> {
        let rows = self
            .conn
            .prepare_cached(&format!(
                "SELECT {} FROM credentials c JOIN server_credentials b ON b.credential = c.name
                 WHERE b.server = ?1 ORDER BY c.name",
                COLUMNS
                    .split(", ")
                    .map(|c| format!("c.{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))?
            .query_map([server.as_str()], Row::read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(Row::into_credential).collect()
    }

    /// Every binding as (server label, credential name), sorted: what the engine seals.
    pub fn all_bindings(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(self
            .conn
            .prepare_cached(
                "SELECT server, credential FROM server_credentials ORDER BY server, credential",
            )?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<Vec<_>, _>>()?)
    }

    /// Removes a binding row as stored (labels unchecked: a row written behind Postern's
    /// back may hold anything). Returns whether there was one.
    pub fn remove_binding_row(&self, server: &str, credential: &str) -> Result<bool, StoreError> {
        Ok(self.conn.execute(
            "DELETE FROM server_credentials WHERE server = ?1 AND credential = ?2",
            params![server, credential],
        )? > 0)
    }

    /// The servers a credential is bound to, by label.
    pub fn bound_servers(&self, name: &CredentialName) -> Result<Vec<ServerLabel>, StoreError> {
        let labels = self
            .conn
            .prepare_cached(
                "SELECT server FROM server_credentials WHERE credential = ?1 ORDER BY server",
            )?
            .query_map([name.as_str()], |r| r.get::<_, String>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        labels
            .into_iter()
            .map(|l| {
                l.parse().map_err(|e| StoreError::Corrupt {
                    what: format!("binding of credential '{name}'"),
                    why: format!("{e}"),
                })
            })
            .collect()
    }
}

struct Row {
    name: String,
    injection: String,
    hosts: String,
    every_use: bool,
    version: i64,
    created_at: i64,
    rotated_at: Option<i64>,
}

impl Row {
    fn read(r: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            name: r.get(0)?,
            injection: r.get(1)?,
            hosts: r.get(2)?,
            every_use: r.get(3)?,
            version: r.get(4)?,
            created_at: r.get(5)?,
            rotated_at: r.get(6)?,
        })
    }

    fn into_credential(self) -> Result<Credential, StoreError> {
        let corrupt = |why: String| StoreError::Corrupt {
            what: format!("credential '{}'", self.name),
            why,
        };
        Ok(Credential {
            name: self.name.parse().map_err(|e| corrupt(format!("{e}")))?,
            injection: serde_json::from_str(&self.injection).map_err(|e| corrupt(e.to_string()))?,
            hosts: serde_json::from_str(&self.hosts).map_err(|e| corrupt(e.to_string()))?,
            every_use: self.every_use,
            version: u32::try_from(self.version).map_err(|e| corrupt(e.to_string()))?,
            created_at: self.created_at.max(0) as u64,
            rotated_at: self.rotated_at.map(|t| t.max(0) as u64),
        })
    }
}

fn encode(value: &impl serde::Serialize, name: &CredentialName) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Unencodable {
        what: format!("credential '{name}'"),
        why: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removing_a_server_unbinds_its_credentials_so_a_new_server_of_that_label_gets_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store");
        let name: CredentialName = "api".parse().expect("name");
        let env = Injection::Env { var: "API".into() };
        store.add_credential(&name, &env, &[], false).expect("add");
        let label: ServerLabel = "inventory".parse().expect("label");
        let config = |program: &str| {
            postern_domain::ServerConfig::new(label.clone(), vec![program.into()], None, vec![])
                .expect("config")
        };
        store.add_server(&config("inventory-server")).expect("add");
        store.bind(&label, &name).expect("bind");

        assert!(store.remove_server(&label).expect("remove"));
        assert!(store.bindings(&label).expect("bindings").is_empty());
        assert!(store.bound_servers(&name).expect("servers").is_empty());
        store
            .add_server(&config("something-else"))
            .expect("add again");
        assert!(store.bindings(&label).expect("bindings").is_empty());
        let changes = store.take_config_changes().expect("changes");
        assert!(
            changes
                .iter()
                .any(|c| c.what == "removed server 'inventory' and its credential bindings (api)"),
            "{changes:?}"
        );
    }

    #[test]
    fn credentials_are_added_bound_rotated_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = Store::open(dir.path()).expect("store");
        let name: CredentialName = "inventory-api".parse().expect("name");
        let env = Injection::Env {
            var: "INVENTORY_TOKEN".into(),
        };
        assert!(store.add_credential(&name, &env, &[], false).expect("add"));
        assert!(!store.add_credential(&name, &env, &[], true).expect("again"));
        let server: ServerLabel = "inventory".parse().expect("label");
        assert!(store.bind(&server, &name).expect("bind"));
        assert!(!store.bind(&server, &name).expect("bind again"));
        let bound = store.bindings(&server).expect("bindings");
        assert_eq!(bound.len(), 1);
        assert_eq!(bound[0].env_var(), Some("INVENTORY_TOKEN"));
        assert_eq!(bound[0].keychain_item(), "credential.inventory-api.v1");
        assert_eq!(
            store.bound_servers(&name).expect("servers"),
            std::slice::from_ref(&server)
        );

        let rotated = store
            .rotate_credential(&name)
            .expect("rotate")
            .expect("known");
        assert_eq!(rotated.version, 2);
        assert!(rotated.rotated_at.is_some());

        let unknown: CredentialName = "nope".parse().expect("name");
        assert!(store.bind(&server, &unknown).is_err());
        assert!(store.remove_credential(&name).expect("remove"));
        assert!(
            store.bindings(&server).expect("bindings").is_empty(),
            "bindings go with it"
        );
        assert!(!store.remove_credential(&name).expect("remove again"));
        assert_eq!(
            store.taken_changes(),
            [
                "added credential 'inventory-api'",
                "bound credential 'inventory-api' to server 'inventory'",
                "rotated credential 'inventory-api'",
                "removed credential 'inventory-api'",
            ]
        );
    }
}
