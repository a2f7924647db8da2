//! Proof of presence as an attacker of the same user meets it (issue 13): nothing widens
//! without the passphrase, wrong guesses back off and are recorded, a restarted engine is
//! locked, settings edited in the store behind the engine's back are not used, and the
//! keychain holds credential values only sealed under the vault key.

use postern_domain::credential::Injection;
use postern_domain::{CredentialName, CredentialSpec};
use postern_vault::{Secret, VaultKey};

use super::super::presence::backoff_ms;
use super::super::{PresenceError, VAULT_KEY_ITEM, check_offline};
use super::*;

fn proof(text: &str) -> Proof {
    Proof::passphrase(text.into())
}

#[tokio::test]
async fn a_restarted_engine_is_locked_until_the_passphrase_and_guesses_back_off() {
    let gate = Gate::new();
    gate.audit.close("restart");
    let restarted = Gate::on_locked(&gate.home, Arc::clone(&gate.secrets));
    let authority = &restarted.authority;
    assert_eq!(authority.vault(), VaultState::Locked);
    let a = launch(1, b"v1");
    let refused = denied(restarted.decided_now(deploy(&a)));
    assert_eq!(refused.code, DenyCode::VaultLocked);

    assert_eq!(
        authority
            .prove(None, "unlock the vault")
            .unwrap_err()
            .code(),
        "proof_required"
    );
    let wrong = authority
        .prove(Some(&proof("hunter22")), "unlock the vault")
        .unwrap_err();
    assert_eq!(
        wrong,
        PresenceError::Wrong {
            failures: 1,
            retry_after_ms: 1000
        }
    );
    // The right passphrase too early is not even tried.
    let early = authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault")
        .unwrap_err();
    assert_eq!(early.code(), "proof_backoff");
    restarted.clock.advance(1000);
    let second = authority
        .prove(Some(&proof("hunter23")), "unlock the vault")
        .unwrap_err();
    assert_eq!(
        second,
        PresenceError::Wrong {
            failures: 2,
            retry_after_ms: 2000
        }
    );
    restarted.clock.advance(2000);
    let proven = authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault")
        .expect("the person's passphrase");
    assert!(authority.unlock(proven).expect("unlocked"));
    assert_eq!(authority.vault(), VaultState::Ready);

    let events = restarted.events();
    let refusals = of_type(&events, "proof_refused");
    assert_eq!(refusals.len(), 2, "{events:#?}");
    assert_eq!(refusals[1]["failures"], 2);
    assert_eq!(refusals[1]["what"], "unlock the vault");
    let shown = serde_json::to_string(&events).expect("json");
    assert!(!shown.contains("hunter2"), "a guess is never recorded");
}

/// A process of the user guessing over the socket as fast as the back-off lets it keeps no
/// one waiting at the app's own window, whose tries have a back-off of their own; the
/// person's passphrase there unlocks at once and starts both over, across a restart too.
#[tokio::test]
async fn guesses_over_the_socket_do_not_hold_back_the_apps_window() {
    let gate = Gate::new();
    gate.audit.close("restart");
    let locked = Gate::on_locked(&gate.home, Arc::clone(&gate.secrets));
    let authority = &locked.authority;
    let in_app = |text: &str| Proof::typed_in_app(Secret::new(text.to_owned()));
    for failures in 1..=9u32 {
        let wrong = authority
            .prove(Some(&proof("hunter22")), "unlock the vault")
            .unwrap_err();
        assert!(
            matches!(wrong, PresenceError::Wrong { failures: f, .. } if f == failures),
            "{wrong:?}"
        );
        if failures < 9 {
            locked.clock.advance(backoff_ms(failures));
        }
    }
    // The socket waits 256 s now; the window does not.
    let socket = authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault")
        .unwrap_err();
    assert_eq!(socket.code(), "proof_backoff");
    // A wrong try at the window counts for the window alone.
    let typo = authority
        .prove(Some(&in_app("hunter23")), "unlock the vault")
        .unwrap_err();
    assert_eq!(
        typo,
        PresenceError::Wrong {
            failures: 1,
            retry_after_ms: 1000
        }
    );
    locked.audit.close("restart");
    drop(locked);

    // Kept across a restart, each on its own. (The first engine's clock was moved 255 s on
    // to wait out the socket's first eight; the new one starts at the real time again: the
    // window's wait ends 256 s from now, the socket's 511 s.)
    let again = Started::on(&gate.home, &gate.secrets);
    let early = again
        .authority
        .prove(Some(&in_app(PASSPHRASE)), "unlock the vault")
        .unwrap_err();
    assert_eq!(
        early.code(),
        "proof_backoff",
        "the window's own wait is kept"
    );
    again.clock.advance(257_000);
    let still = again
        .authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault")
        .unwrap_err();
    assert_eq!(still.code(), "proof_backoff");
    let proven = again
        .authority
        .prove(Some(&in_app(PASSPHRASE)), "unlock the vault")
        .expect("the person at the window");
    assert!(again.authority.unlock(proven).expect("unlocked"));
    // The person was there: the socket's back-off starts over too.
    again
        .authority
        .prove(Some(&proof(PASSPHRASE)), "lock nothing")
        .expect("the socket is heard again");
}

/// A back-off written into the store (a process of the user can write `postern.db`) to keep
/// the person out for centuries waits no longer than the longest back-off after a restart, at
/// the app's window and over the socket.
#[tokio::test]
async fn a_back_off_planted_in_the_store_waits_no_longer_than_the_longest() {
    let gate = Gate::new();
    gate.audit.close("restart");
    let store = Store::open(gate.home.path()).expect("store");
    let forever = serde_json::json!({"failures": 4_000_000_000u32, "not_before_ms": u64::MAX / 2});
    for key in ["proof-backoff", "proof-backoff-app"] {
        store.set_setting(key, &forever).expect("planted");
    }
    drop(store);
    let again = Started::on(&gate.home, &gate.secrets);
    let in_app = Proof::typed_in_app(Secret::new(PASSPHRASE.to_owned()));
    for proof in [&proof(PASSPHRASE), &in_app] {
        let waiting = again
            .authority
            .prove(Some(proof), "unlock the vault")
            .unwrap_err();
        assert!(
            matches!(waiting, PresenceError::Backoff { retry_after_ms } if retry_after_ms <= 5 * 60 * 1000),
            "{waiting:?}"
        );
    }
    again.clock.advance(5 * 60 * 1000);
    let proven = again
        .authority
        .prove(Some(&in_app), "unlock the vault")
        .expect("the person, five minutes on");
    assert!(again.authority.unlock(proven).expect("unlocked"));
}

#[tokio::test]
async fn a_restart_does_not_reset_the_back_off() {
    let gate = Gate::new();
    gate.audit.close("restart");
    let first = Started::on(&gate.home, &gate.secrets);
    for failures in 1..=5u32 {
        let refused = first
            .authority
            .prove(Some(&proof("hunter22")), "unlock the vault")
            .unwrap_err();
        let PresenceError::Wrong { retry_after_ms, .. } = refused else {
            panic!("{refused:?}");
        };
        if failures < 5 {
            first.clock.advance(retry_after_ms);
        }
    }
    first.audit.close("the guesser kills the engine");
    drop(first);

    // The guesser restarts the engine and tries again at once: the fifth wrong try's 16 s
    // are not over. (The first engine's clock was moved 15 s on to wait out the first four;
    // the new one starts at the real time again, a few seconds later.)
    let again = Started::on(&gate.home, &gate.secrets);
    let early = again
        .authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault")
        .unwrap_err();
    assert!(
        matches!(early, PresenceError::Backoff { retry_after_ms } if retry_after_ms <= 31_000),
        "{early:?}"
    );
    again.clock.advance(31_000);
    let wrong = again
        .authority
        .prove(Some(&proof("hunter24")), "unlock the vault")
        .unwrap_err();
    assert_eq!(
        wrong,
        PresenceError::Wrong {
            failures: 6,
            retry_after_ms: 32_000
        },
        "the count goes on from before the restart"
    );
    again.clock.advance(32_000);
    let proven = again
        .authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault")
        .expect("the person's passphrase");
    assert!(again.authority.unlock(proven).expect("unlocked"));
    again.audit.close("restart");
    drop(again);

    // A proof clears it: the next start hears a guess at once.
    let cleared = Started::on(&gate.home, &gate.secrets);
    assert_eq!(
        cleared
            .authority
            .prove(Some(&proof("hunter25")), "unlock the vault")
            .unwrap_err(),
        PresenceError::Wrong {
            failures: 1,
            retry_after_ms: 1000
        }
    );
}

#[tokio::test]
async fn nothing_widens_without_a_proof() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let (card, _rx) = gate.carded(deploy(&a));
    let refused = gate
        .authority
        .answer(
            card.id,
            Reply::Approve { choice: None },
            None,
            postern_domain::AnswerChannel::Window,
        )
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        PresenceError::Required {
            what: "approve a request".into()
        }
        .to_string()
    );
    assert_eq!(gate.authority.approvals().len(), 1, "the card still waits");
    let observe = SettingsUpdate {
        session_mode: Some(SessionMode::Observe),
        ..SettingsUpdate::default()
    };
    assert!(gate.authority.update_settings(observe, None).is_err());
    let never = SettingsUpdate {
        auto_lock_ms: Some(0),
        ..SettingsUpdate::default()
    };
    assert!(gate.authority.update_settings(never, None).is_err());
    // Narrowing needs no proof: a shorter auto-lock.
    let shorter = SettingsUpdate {
        auto_lock_ms: Some(60_000),
        ..SettingsUpdate::default()
    };
    assert_eq!(
        gate.authority
            .update_settings(shorter, None)
            .expect("narrowing")
            .auto_lock_ms,
        60_000
    );
    gate.authority.lock("test");
    assert!(gate.authority.update_settings(shorter, None).is_ok());
    assert_eq!(gate.authority.settings().session_mode, SessionMode::Prompt);
}

/// Turns per-call approval on for every tool of `deployer` (a narrowing: no proof); the setting.
fn per_call_on_the_server(gate: &Gate) -> EveryUseSetting {
    let per_call = EveryUseSetting {
        target: SettingTarget::Server { server: label() },
        level: EveryUse::Confirm,
    };
    gate.authority
        .set_every_use(per_call.clone(), None)
        .expect("on");
    per_call
}

#[tokio::test]
async fn settings_edited_in_the_store_are_detected_and_the_stricter_ones_used() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let per_call = per_call_on_the_server(&gate);
    gate.audit.close("restart");

    // The attacker's edit, straight into SQLite, while no engine runs.
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "UPDATE settings SET value = ?1 WHERE key = 'settings'",
        [r#"{"sessionMode":"observe","approvalTimeoutMs":120000,"autoLockMs":0}"#],
    )
    .expect("edit settings");
    db.execute("DELETE FROM every_use", []).expect("delete");
    drop(db);

    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    let settings = restarted.authority.settings();
    assert_eq!(settings.session_mode, SessionMode::Prompt);
    assert_eq!(settings.auto_lock_ms, super::super::AUTO_LOCK_MS);
    assert_eq!(restarted.authority.every_use(), vec![per_call]);
    let warning = restarted
        .authority
        .gate_status()
        .config_warning
        .expect("status says so");
    assert!(warning.contains("edited behind its back"), "{warning}");
    assert!(
        warning.contains("per-call approval was removed for"),
        "{warning}"
    );
    let events = restarted.events();
    assert_eq!(of_type(&events, "config_tampered").len(), 1, "{events:#?}");
    // The stricter values were written back: the next start finds nothing to report.
    restarted.audit.close("restart");
    let again = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    assert_eq!(again.authority.gate_status().config_warning, None);
    assert_eq!(again.authority.settings().session_mode, SessionMode::Prompt);
}

#[tokio::test]
async fn the_keychain_holds_credential_values_sealed_and_old_ones_are_sealed_on_the_first_passphrase()
 {
    let gate = Gate::new();
    let name = add_env_credential(&gate, "deploy-token", "s3cret-value");
    let stored = gate
        .secrets
        .get("credential.deploy-token.v1")
        .expect("get")
        .expect("an item");
    assert!(postern_vault::is_sealed(stored.expose()));
    assert!(
        !String::from_utf8_lossy(stored.expose()).contains("s3cret"),
        "another process reading the keychain gets ciphertext"
    );
    let wrapped = gate.secrets.get(VAULT_KEY_ITEM).expect("get").expect("key");
    assert!(!String::from_utf8_lossy(wrapped.expose()).contains(PASSPHRASE));

    // A home from before the passphrase: a plain value in the keychain, no vault key.
    let old = tempfile::tempdir().expect("tempdir");
    let home = Home::at(old.path());
    let secrets = Arc::new(MemoryStore::new());
    Store::open(home.path())
        .expect("store")
        .add_credential(
            &name,
            &Injection::Env {
                var: "TOKEN".into(),
            },
            &[],
            false,
        )
        .expect("metadata");
    secrets
        .set("credential.deploy-token.v1", b"plain-old")
        .expect("set");
    let migrated = Gate::on(&home, Arc::clone(&secrets));
    let sealed = secrets
        .get("credential.deploy-token.v1")
        .expect("get")
        .expect("item");
    assert!(postern_vault::is_sealed(sealed.expose()));
    let events = migrated.events();
    let changed = of_type(&events, "config_changed");
    assert!(
        changed.iter().any(|e| e["what"]
            .as_str()
            .unwrap_or("")
            .contains("1 credential value(s)")),
        "{events:#?}"
    );
}

#[tokio::test]
async fn a_vault_key_replaced_in_the_keychain_proves_nothing() {
    let gate = Gate::new();
    // The attacker wraps a key of their own under a passphrase they know.
    let theirs = VaultKey::generate()
        .expect("key")
        .wrap(b"attacker-pass")
        .expect("wrap");
    gate.secrets
        .set(VAULT_KEY_ITEM, theirs.as_bytes())
        .expect("replace");
    let refused = gate
        .authority
        .prove(Some(&proof("attacker-pass")), "approve a request")
        .unwrap_err();
    assert_eq!(refused, PresenceError::KeyReplaced);
    // Setting a "first" passphrase over it is refused too.
    let again = gate
        .authority
        .set_passphrase(&Secret::new("another-pass".into()), None)
        .unwrap_err();
    assert_eq!(again, PresenceError::AlreadySet);
}

/// Seals the settings again by something that needs no proof (per-call approval turned on;
/// an unbind of nothing does too).
fn seal_again(gate: &Gate) {
    gate.authority
        .set_every_use(
            EveryUseSetting {
                target: SettingTarget::Server { server: label() },
                level: EveryUse::Confirm,
            },
            None,
        )
        .expect("narrowing");
}

/// A gate where a person approved `deployer`'s first launch (`v1`): its baseline.
fn approved_once() -> Gate {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    gate.approve(deploy(&launch(1, b"v1")), GrantChoice::UntilRunEnds);
    gate
}

/// Makes `deployer`'s approved launch in SQLite say the `evil` code was approved, as an agent
/// would to have a changed server's card read "same code as approved".
fn edit_approved_launch(gate: &Gate) {
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "UPDATE approved_baselines SET record = replace(record, ?1, ?2)",
        [
            Digest::of(b"v1").to_string(),
            Digest::of(b"evil").to_string(),
        ],
    )
    .expect("edit the baseline");
}

/// The warning status shows, which must say `what`.
fn warns(gate: &Gate, what: &str) -> String {
    let warning = gate
        .authority
        .gate_status()
        .config_warning
        .expect("status says so");
    assert!(warning.contains(what), "{warning}");
    warning
}

/// Status says `deployer`'s approved launch was found edited and forgotten.
fn says_the_approved_launch_was_edited(gate: &Gate) {
    warns(gate, "the launch last approved for 'deployer' was edited");
}

/// The warning status shows, which must say that `deploy-token`'s binding to `other` was
/// dropped.
fn unbound_warning(gate: &Gate) -> String {
    warns(
        gate,
        "credential 'deploy-token' was bound to 'other' and is unbound",
    )
}

#[tokio::test]
async fn a_binding_or_an_approved_launch_edited_in_the_store_is_not_used() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let name = add_env_credential(&gate, "deploy-token", "v");
    let other: ServerLabel = "other".parse().expect("label");
    gate.configure(&other, &[]);
    // A person's approval makes `deployer`'s launch the baseline; a binding made by them.
    let a = launch(1, b"v1");
    gate.approve(deploy(&a), GrantChoice::UntilRunEnds);
    gate.authority
        .bind(&gate.proven, &label(), &name)
        .expect("bind");
    gate.audit.close("restart");

    // The attacker binds the credential to another server and makes its own code the
    // approved baseline, straight in SQLite.
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "INSERT INTO server_credentials (server, credential) VALUES ('other', 'deploy-token')",
        [],
    )
    .expect("bind behind Postern's back");
    db.execute(
        "UPDATE approved_baselines SET record = replace(record, ?1, ?2)",
        [
            Digest::of(b"v1").to_string(),
            Digest::of(b"evil").to_string(),
        ],
    )
    .expect("edit the baseline");
    drop(db);

    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    let warning = unbound_warning(&restarted);
    assert!(
        warning.contains("the launch last approved for 'deployer' was edited"),
        "{warning}"
    );
    let store = Store::open(gate.home.path()).expect("store");
    assert_eq!(
        store.all_bindings().expect("bindings"),
        vec![("deployer".to_owned(), "deploy-token".to_owned())],
        "the person's binding stays"
    );
    assert!(store.approved_baseline(&label()).expect("read").is_none());
}

/// A gate with `deploy-token` bound to `deployer` by the person, and bound to `other` by a
/// row written into SQLite behind the engine's back, then the settings sealed again (per-call
/// approval turned on needs no proof; an unbind of nothing reseals too): the seal must not
/// take the planted row with them.
fn planted_binding() -> (Gate, ServerLabel) {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let other: ServerLabel = "other".parse().expect("label");
    gate.configure(&other, &[]);
    let name = add_env_credential(&gate, "deploy-token", "v");
    gate.authority
        .bind(&gate.proven, &label(), &name)
        .expect("bind");
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "INSERT INTO server_credentials (server, credential) VALUES ('other', 'deploy-token')",
        [],
    )
    .expect("bind behind Postern's back");
    drop(db);
    seal_again(&gate);
    (gate, other)
}

/// While the vault is unlocked, a binding written into SQLite behind the engine's back (to a
/// server whose calls the agent then gets approved) is not used either: what a launch or a
/// call is given comes from the bindings the person made, the row is removed and status says
/// so at once, not at the next unlock. A binding the person made stays.
#[tokio::test]
async fn a_binding_edited_into_the_store_while_unlocked_is_not_used() {
    let (gate, other) = planted_binding();
    let store = Store::open(gate.home.path()).expect("store");
    let bound = |server: &ServerLabel| store.bindings(server).expect("bindings");
    assert_eq!(bound(&other).len(), 1, "the row is there");
    let vouched = gate.authority.vouched(&other, bound(&other));
    assert!(vouched.is_empty(), "{vouched:?}");
    assert!(bound(&other).is_empty(), "the row is removed");
    unbound_warning(&gate);
    let mine = gate.authority.vouched(&label(), bound(&label()));
    assert_eq!(mine.len(), 1, "the person's binding stays: {mine:?}");
}

/// The launch last approved, edited in SQLite while the vault is unlocked (to make a changed
/// server's card say "same code as approved"), then the settings sealed again: the seal does
/// not take the edit, so after a restart the unlock forgets it; and while unlocked a card
/// would not compare with it either (`Authority::baseline_vouched`).
#[tokio::test]
async fn an_approved_launch_edited_while_unlocked_is_not_sealed_by_a_later_change() {
    let gate = approved_once();
    edit_approved_launch(&gate);
    seal_again(&gate);
    let restarted = gate.restarted();
    says_the_approved_launch_was_edited(&restarted);
}

/// Edited while unlocked, before any card of this run compared with it: a card of the edited
/// code is compared with nothing (not told "same code as approved"), and status says so.
#[tokio::test]
async fn an_approved_launch_edited_while_unlocked_is_not_compared_with() {
    let gate = approved_once();
    let restarted = gate.restarted();
    assert_eq!(restarted.authority.gate_status().config_warning, None);
    edit_approved_launch(&restarted);
    let (card, _answer) = restarted.carded(deploy(&launch(2, b"evil")));
    assert_eq!(card.epoch.since, IdentitySince::FirstApproval);
    says_the_approved_launch_was_edited(&restarted);
}

/// A server looked up while the vault was locked (its planted binding not checked then) and
/// launched after the unlock: the release checks the binding again and withholds the value.
#[tokio::test]
async fn a_planted_binding_that_reaches_a_release_is_withheld_there() {
    let (gate, other) = planted_binding();
    let store = Store::open(gate.home.path()).expect("store");
    let mut config = store.server(&other).expect("read").expect("configured");
    config.credentials = store.bindings(&other).expect("bindings");
    assert_eq!(
        config.credentials.len(),
        1,
        "as a lookup while locked gives it"
    );
    let release = gate
        .authority
        .release(1, Some(&me()), &config, &Digest::of(b"v1"));
    assert_eq!(release.withheld, ["deploy-token"]);
    assert_eq!(
        release.reason.as_deref(),
        Some("its binding or its hosts were not set by a person")
    );
}

/// The seal written while the planted row was in the store does not vouch for it: after a
/// restart the first unlock finds it and drops it.
#[tokio::test]
async fn a_binding_planted_while_unlocked_is_not_sealed_by_a_later_change() {
    let (gate, _) = planted_binding();
    let restarted = gate.restarted();
    unbound_warning(&restarted);
}

/// A credential's hosts widened in SQLite (to have the broker put its value in requests to
/// another host, with the release approvals as they are) are put back as the person set them:
/// at the next lookup while unlocked, and at the next unlock after a restart.
#[tokio::test]
async fn a_credentials_hosts_edited_in_the_store_are_put_back() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let name: CredentialName = "gh".parse().expect("name");
    let spec = CredentialSpec::new(
        Injection::Env {
            var: "GH_TOKEN".into(),
        },
        &["api.github.com".to_owned()],
    )
    .expect("spec");
    gate.authority
        .add_credential(&gate.proven, &name, spec, false, Secret::new("v".into()))
        .expect("add");
    gate.authority
        .bind(&gate.proven, &label(), &name)
        .expect("bind");
    let widen = || {
        let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
        db.execute(
            "UPDATE credentials SET hosts = '[\"api.github.com\",\"evil.example\"]'",
            [],
        )
        .expect("widen behind Postern's back");
    };
    let hosts = |store: &Store| store.credential(&name).expect("read").expect("one").hosts;
    let edited = "credential 'gh' had its hosts or injection edited";
    let store = Store::open(gate.home.path()).expect("store");

    widen();
    let looked_up = gate
        .authority
        .vouched(&label(), store.bindings(&label()).expect("bindings"));
    assert_eq!(looked_up.len(), 1, "{looked_up:?}");
    assert_eq!(looked_up[0].hosts, ["api.github.com"]);
    assert_eq!(hosts(&store), ["api.github.com"], "put back in the store");
    let warning = gate.authority.gate_status().config_warning.expect("said");
    assert!(warning.contains(edited), "{warning}");

    widen();
    let restarted = gate.restarted();
    let warning = restarted
        .authority
        .gate_status()
        .config_warning
        .expect("said");
    assert!(warning.contains(edited), "{warning}");
    assert_eq!(hosts(&store), ["api.github.com"], "put back at the unlock");
}

/// The OS holds no secret: while the vault is locked an OS proof is refused before the OS is
/// asked (no dialog), it never changes the passphrase, and it proves nothing offline.
#[tokio::test]
async fn an_os_proof_opens_nothing_while_locked_and_never_changes_the_passphrase() {
    let gate = Gate::new();
    let os = Proof::os_for_this_process().expect("this process");
    let change = gate
        .authority
        .set_passphrase(&Secret::new("a new passphrase".into()), Some(&os))
        .unwrap_err();
    assert_eq!(change.code(), "os_auth_needs_passphrase");
    assert_eq!(
        check_offline(gate.secrets.as_ref(), &os)
            .unwrap_err()
            .code(),
        "os_auth_needs_passphrase"
    );

    gate.authority.lock("test");
    let refused = gate
        .authority
        .prove(Some(&os), "unlock the vault")
        .unwrap_err();
    assert_eq!(
        refused,
        PresenceError::OsNeedsPassphrase {
            what: "unlock the vault".into()
        }
    );
    assert!(
        refused
            .to_string()
            .contains("only while the vault is unlocked")
    );
    assert_eq!(gate.authority.vault(), VaultState::Locked);
    // Not a wrong try: nothing was asked, so nothing backs off or is recorded.
    assert!(of_type(&gate.events(), "proof_refused").is_empty());
    let proven = gate
        .authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault");
    assert!(proven.is_ok(), "the passphrase is heard at once");
}

#[tokio::test]
async fn plain_clicks_approve_only_when_on_within_the_window_after_the_passphrase() {
    let gate = Gate::new();
    let click = || gate.authority.prove_approval(Some(&Proof::Click));
    // Off by default: a click is no proof.
    assert_eq!(click().unwrap_err().code(), "proof_required");
    assert_eq!(gate.authority.gate_status().clicks_until_ms, None);

    // Turning them on widens: it takes the passphrase.
    let on = SettingsUpdate {
        click_window_ms: Some(5 * 60_000),
        ..SettingsUpdate::default()
    };
    assert!(gate.authority.update_settings(on, None).is_err());
    gate.authority
        .update_settings(on, Some(&gate.proven))
        .expect("on, with the passphrase");
    let until = gate
        .authority
        .gate_status()
        .clicks_until_ms
        .expect("the window is open: the passphrase was just typed");

    let a = launch(1, b"v1");
    let (card, _rx) = gate.carded(deploy(&a));
    let proven = click().expect("a click within the window");
    gate.authority
        .answer(
            card.id,
            Reply::Approve {
                choice: Some(GrantChoice::ThisCall),
            },
            Some(&proven),
            postern_domain::AnswerChannel::Window,
        )
        .expect("approved with a click");
    // A click stands for the passphrase only in an approval.
    assert_eq!(
        gate.authority
            .prove(Some(&Proof::Click), "widen the settings")
            .unwrap_err()
            .code(),
        "proof_required"
    );

    // The window closes; a passphrase opens it again, from then.
    gate.clock.advance(5 * 60_000 + 1);
    assert_eq!(click().unwrap_err().code(), "proof_required");
    gate.authority
        .prove(Some(&proof(PASSPHRASE)), "approve a request")
        .expect("passphrase");
    assert!(gate.authority.gate_status().clicks_until_ms > Some(until));
    assert!(click().is_ok());

    // Locking ends it; unlocking is a proof and opens it again.
    gate.authority.lock("test");
    assert_eq!(click().unwrap_err().code(), "proof_required");
    assert_eq!(gate.authority.gate_status().clicks_until_ms, None);
    let proven = gate
        .authority
        .prove(Some(&proof(PASSPHRASE)), "unlock the vault")
        .expect("passphrase");
    gate.authority.unlock(proven).expect("unlocked");
    assert!(click().is_ok());

    // Narrowing needs no proof, and takes effect at once.
    let off = SettingsUpdate {
        click_window_ms: Some(0),
        ..SettingsUpdate::default()
    };
    gate.authority.update_settings(off, None).expect("off");
    assert_eq!(click().unwrap_err().code(), "proof_required");
}

/// A person adds a credential and binds it while the vault is locked (an engine restarted and
/// not unlocked yet; the passphrase proves each act): the next unlock finds both vouched for by
/// the seal, and uses the binding without a word, where it used to drop it as one planted in
/// SQLite.
#[tokio::test]
async fn what_a_person_adds_and_binds_while_locked_is_vouched_for_at_the_next_unlock() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let home = gate.home.clone();
    let secrets = Arc::clone(&gate.secrets);
    drop(gate.restarted());
    let started = Started::on(&home, &secrets);
    let authority = &started.authority;
    assert_eq!(authority.vault(), VaultState::Locked);
    let proven = || {
        authority
            .prove(Some(&proof(PASSPHRASE)), "test")
            .expect("the passphrase proves an act while locked")
    };
    let spec = CredentialSpec::new(
        Injection::Env {
            var: "TOKEN".into(),
        },
        &[],
    )
    .expect("spec");
    let name: CredentialName = "deploy-token".parse().expect("name");
    authority
        .add_credential(&proven(), &name, spec, false, Secret::new("v".into()))
        .expect("added while locked");
    authority
        .bind(&proven(), &label(), &name)
        .expect("bound while locked");

    assert!(authority.unlock(proven()).expect("unlocked"));
    assert_eq!(authority.gate_status().config_warning, None);
    let store = Store::open(home.path()).expect("store");
    let bound = store.bindings(&label()).expect("bindings");
    assert_eq!(bound.len(), 1, "the binding is in the store");
    assert_eq!(
        authority.vouched(&label(), bound).len(),
        1,
        "and vouched for: it is used"
    );
    started.audit.close("test");
}

/// What a person narrows while the vault is locked (it takes no proof, and the seal cannot be
/// written without the key) holds across an engine restart with the store put back behind
/// the engine's back meanwhile: the next unlock takes each narrowing again from the log.
#[tokio::test]
async fn narrowings_made_while_locked_hold_across_a_restart_and_a_store_put_back() {
    let gate = Gate::new();
    let name = bound_deploy_token(&gate);
    let observe = SettingsUpdate {
        session_mode: Some(SessionMode::Observe),
        ..SettingsUpdate::default()
    };
    gate.authority
        .update_settings(observe, Some(&gate.proven))
        .expect("observe, proven");
    gate.authority.lock("test");
    // The person narrows, locked: no proof, no seal.
    assert!(gate.authority.unbind(&label(), &name).expect("unbind"));
    let prompt = SettingsUpdate {
        session_mode: Some(SessionMode::Prompt),
        ..SettingsUpdate::default()
    };
    gate.authority
        .update_settings(prompt, None)
        .expect("narrowing");
    let per_call = per_call_on_the_server(&gate);
    gate.audit.close("restart");

    // The attacker puts the store back as it was sealed, while no engine runs.
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "INSERT INTO server_credentials (server, credential) VALUES ('deployer', 'deploy-token')",
        [],
    )
    .expect("bind again");
    db.execute(
        "UPDATE settings SET value = replace(value, '\"prompt\"', '\"observe\"') WHERE key = 'settings'",
        [],
    )
    .expect("observe again");
    db.execute("DELETE FROM every_use", [])
        .expect("per-call off");
    drop(db);

    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    assert_eq!(
        restarted.authority.settings().session_mode,
        SessionMode::Prompt
    );
    assert_eq!(restarted.authority.every_use(), vec![per_call]);
    let store = Store::open(gate.home.path()).expect("store");
    assert!(
        store.bindings(&label()).expect("bindings").is_empty(),
        "the row put back is removed"
    );
    warns(
        &restarted,
        "credential 'deploy-token' was bound to 'deployer' and is unbound",
    );
    restarted.audit.close("test");
}

/// Review 14, N1: what a process of the user plants in `postern.db` while the engine runs
/// does not keep a narrowing's record from the log: a trigger never runs in the engine's
/// writes, and an index that refuses the record is removed and the commit made again. So the
/// unbind made while locked holds across a restart with the binding's row put back, and what
/// was planted is recorded (`config_tampered`).
async fn a_narrowing_is_recorded_whatever_is_planted_in_the_database(plant: &str) {
    let gate = Gate::new();
    let name = bound_deploy_token(&gate);
    gate.audit.flush();
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    let head: i64 = db
        .query_row("SELECT max(seq) FROM audit_log", [], |r| r.get(0))
        .expect("head");
    db.execute_batch(&plant.replace("HEAD", &head.to_string()))
        .expect("plant");
    gate.authority.lock("test");
    assert!(gate.authority.unbind(&label(), &name).expect("unbind"));
    gate.audit.close("restart");
    assert_eq!(gate.audit.status().failed_batches, 0);
    db.execute(
        "INSERT INTO server_credentials (server, credential) VALUES ('deployer', 'deploy-token')",
        [],
    )
    .expect("bind again");
    drop(db);

    let restarted = restarted_without_the_binding(&gate);
    let events = restarted.events();
    let tampered = of_type(&events, "config_tampered");
    assert!(
        tampered.iter().any(|t| t["what"].as_str().is_some_and(
            |w| w.contains("planted") || w.ends_with("made again with its rows: audit_log")
        )),
        "{events:#?}"
    );
}

#[tokio::test]
async fn a_trigger_planted_in_the_database_does_not_keep_a_narrowing_from_the_log() {
    a_narrowing_is_recorded_whatever_is_planted_in_the_database(
        "CREATE TRIGGER planted BEFORE INSERT ON audit_log WHEN NEW.kind = 'config_changed'
         BEGIN SELECT RAISE(ABORT, 'kept from the log'); END;",
    )
    .await;
}

#[tokio::test]
async fn an_index_planted_in_the_database_does_not_keep_a_narrowing_from_the_log() {
    // Creating it reads the rows already there (up to HEAD, the log's last), which it lets be;
    // each later record of the kind fails it.
    a_narrowing_is_recorded_whatever_is_planted_in_the_database(
        "CREATE INDEX planted ON audit_log (
            json(CASE WHEN kind = 'config_changed' AND seq > HEAD THEN 'not json' END)
         );",
    )
    .await;
}

#[tokio::test]
async fn a_table_changed_in_the_database_does_not_keep_a_narrowing_from_the_log() {
    // Review 15, R3: the log's own table given a column whose check refuses each later
    // record of the kind.
    a_narrowing_is_recorded_whatever_is_planted_in_the_database(
        "ALTER TABLE audit_log ADD COLUMN planted INTEGER
            CHECK (kind <> 'config_changed' OR seq <= HEAD);",
    )
    .await;
}

/// The engine restarted on `gate`'s home (unlocked), which found `deploy-token`'s binding to
/// `deployer` put back in the store, removed it and says so.
fn restarted_without_the_binding(gate: &Gate) -> Gate {
    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    let store = Store::open(gate.home.path()).expect("store");
    assert!(
        store.bindings(&label()).expect("bindings").is_empty(),
        "the binding put back is removed"
    );
    warns(
        &restarted,
        "credential 'deploy-token' was bound to 'deployer' and is unbound",
    );
    restarted
}

/// `deployer` configured, and the env credential `deploy-token` added and bound to it by the
/// person; the credential's name.
fn bound_deploy_token(gate: &Gate) -> CredentialName {
    gate.configure(&label(), &[]);
    let name = add_env_credential(gate, "deploy-token", "v");
    gate.authority
        .bind(&gate.proven, &label(), &name)
        .expect("bind");
    name
}

/// The person unlocks an engine started on a home (`Started::on`, still locked).
fn unlock_started(started: &Started) -> Result<bool, super::super::UnlockError> {
    let proven = started
        .authority
        .prove(Some(&proof(PASSPHRASE)), "unlock")
        .expect("proof");
    started.authority.unlock(proven)
}

/// Review 12, G1: a narrowing is taken again at the unlock only as the narrowing it is. One
/// an agent queued in the store for the engine to record, naming per-call approval "off",
/// turns nothing off: the sealed approval holds.
#[tokio::test]
async fn a_narrowing_an_agent_queued_turns_nothing_off() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let per_call = per_call_on_the_server(&gate);
    let target = serde_json::to_string(&per_call.target).expect("target");
    let forged =
        format!(r#"{{"narrowed":"everyUseOn","setting":{{"target":{target},"level":"off"}}}}"#);
    gate.audit.close("stop");
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute("DELETE FROM every_use", [])
        .expect("per-call off");
    db.execute(
        "INSERT INTO pending_config_changes (at, what, server, narrowing) VALUES (0, 'x', NULL, ?1)",
        [&forged],
    )
    .expect("queue a forged narrowing");
    drop(db);
    let started = Started::on(&gate.home, &gate.secrets);
    // Recorded as the engine records whatever the store queued (at its start).
    assert!(crate::record_config_changes(&started.authority.inner.store, &started.audit) > 0);
    assert!(unlock_started(&started).expect("unlocked"));
    assert_eq!(started.authority.every_use(), vec![per_call]);
    started.audit.close("test");
}

/// Review 12, G2: when what was narrowed since the seal cannot be read (the log's opening key
/// taken from the keychain after the engine started), the unlock is refused and the vault stays
/// locked: none of those narrowings is undone. With the key back, the unlock takes them.
#[tokio::test]
async fn an_unlock_that_cannot_read_the_narrowings_leaves_the_vault_locked() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    gate.authority.lock("test");
    let per_call = per_call_on_the_server(&gate);
    gate.audit.close("stop");
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute("DELETE FROM every_use", [])
        .expect("per-call off");
    drop(db);
    let started = Started::on(&gate.home, &gate.secrets);
    let key = gate
        .secrets
        .get(crate::audit::OPENING_KEY)
        .expect("keychain")
        .expect("the log's key");
    gate.secrets
        .delete(crate::audit::OPENING_KEY)
        .expect("taken away");
    let refused = unlock_started(&started).expect_err("refused");
    assert!(refused.0.contains("the vault stays locked"), "{refused}");
    assert_eq!(started.authority.vault(), VaultState::Locked);
    gate.secrets
        .set(crate::audit::OPENING_KEY, key.expose())
        .expect("put back");
    assert!(unlock_started(&started).expect("unlocked"));
    assert_eq!(started.authority.every_use(), vec![per_call]);
    started.audit.close("test");
}

/// Review 13, R1: the rows of what was narrowed, deleted from the log's table after the engine
/// started (to be put back once the person unlocked, so that the log verifies again), do not
/// go unseen: the rows from the seal's head to the writer's own must chain, and the unlock is
/// refused while they do not.
#[tokio::test]
async fn narrowings_hidden_from_the_log_while_it_runs_refuse_the_unlock() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    gate.authority.lock("test");
    per_call_on_the_server(&gate);
    gate.audit.flush();
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    let hidden = db
        .execute(
            "DELETE FROM audit_log WHERE seq = (SELECT max(seq) FROM audit_log WHERE kind = 'config_changed')",
            [],
        )
        .expect("hide the narrowing");
    assert_eq!(hidden, 1);
    let refused = gate.authority.unlock(gate.prove()).expect_err("refused");
    assert!(refused.0.contains("the vault stays locked"), "{refused}");
    assert_eq!(gate.authority.vault(), VaultState::Locked);
    gate.audit.close("test");
}

/// Review 13, R2: the seal names the log's head as its writer holds it, not the table's
/// highest row: a row planted far ahead cannot make every later narrowing look older than the
/// seal.
#[tokio::test]
async fn a_row_planted_far_ahead_in_the_log_does_not_move_the_seals_head() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    gate.audit.flush();
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "INSERT INTO audit_log (seq, time, kind, header, sealed, hash)
         SELECT 1000000000000, time, kind, header, sealed, hash FROM audit_log WHERE seq = 1",
        [],
    )
    .expect("plant a row");
    per_call_on_the_server(&gate);
    let sealed: String = db
        .query_row(
            "SELECT value FROM settings WHERE key = 'sealed-config'",
            [],
            |r| r.get(0),
        )
        .expect("the seal");
    let sealed: Value = serde_json::from_str(&sealed).expect("json");
    let config: Value =
        serde_json::from_str(sealed["config"].as_str().expect("config")).expect("json");
    let head = config["logHead"].as_str().expect("a head").to_owned();
    assert_eq!(
        Some(head.clone()),
        gate.audit.status().head,
        "the writer's head"
    );
    assert!(!head.starts_with("1000000000000:"), "{head}");
    gate.audit.close("test");
}

/// Review 13, R4: a credential the person removed (with the passphrase) does not come back
/// bound when an older seal that vouched for its binding is put back with its rows.
#[tokio::test]
async fn an_older_seal_put_back_does_not_bind_a_removed_credential_again() {
    let gate = Gate::new();
    let name = bound_deploy_token(&gate);
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute_batch(
        "CREATE TABLE saved_credentials AS SELECT * FROM credentials;
         CREATE TABLE saved_seal AS SELECT * FROM settings WHERE key = 'sealed-config';",
    )
    .expect("the agent keeps copies");
    gate.authority
        .remove_credential(&gate.proven, &name)
        .expect("removed");
    gate.audit.close("stop");
    db.execute_batch(
        "INSERT INTO credentials SELECT * FROM saved_credentials;
         INSERT INTO server_credentials (server, credential) VALUES ('deployer', 'deploy-token');
         UPDATE settings SET value = (SELECT value FROM saved_seal) WHERE key = 'sealed-config';",
    )
    .expect("put back");
    drop(db);
    let restarted = restarted_without_the_binding(&gate);
    restarted.audit.close("test");
}

/// Review 14, N2: a person who unbinds while the vault is locked and binds again (with the
/// passphrase, still locked) keeps the binding: the unbind, recorded before the bind, is not
/// applied after it at the unlock.
#[tokio::test]
async fn an_unbind_then_a_bind_while_locked_keeps_the_binding() {
    let gate = Gate::new();
    let name = bound_deploy_token(&gate);
    gate.authority.lock("test");
    assert!(gate.authority.unbind(&label(), &name).expect("unbind"));
    gate.authority
        .bind(&gate.prove(), &label(), &name)
        .expect("bind again");
    assert!(gate.authority.unlock(gate.prove()).expect("unlocked"));
    let store = Store::open(gate.home.path()).expect("store");
    let bound = store.bindings(&label()).expect("bindings");
    assert_eq!(bound.len(), 1, "the person's binding stays");
    assert_eq!(gate.authority.vouched(&label(), bound).len(), 1);
    assert_eq!(gate.authority.gate_status().config_warning, None);
    gate.audit.close("test");
}

/// Review 12, G3: per-call approval set to "off" in the store (a level Postern never writes)
/// while no engine runs is no setting at all, and the unlock puts the sealed one back.
#[tokio::test]
async fn per_call_approval_turned_off_in_a_row_is_put_back() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let per_call = per_call_on_the_server(&gate);
    gate.audit.close("stop");
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute("UPDATE every_use SET level = 'off'", [])
        .expect("per-call off");
    drop(db);
    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    assert_eq!(restarted.authority.every_use(), vec![per_call]);
    warns(&restarted, "per-call approval was removed for");
    restarted.audit.close("test");
}

/// A per-call approval removed from the store behind the engine's back while unlocked is not
/// taken as gone (and sealed so) by the person's next per-call change.
#[tokio::test]
async fn a_per_call_approval_deleted_while_unlocked_is_not_sealed_by_a_later_change() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let per_call = per_call_on_the_server(&gate);
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute("DELETE FROM every_use", [])
        .expect("per-call off");
    drop(db);
    let on_the_tool = EveryUseSetting {
        target: SettingTarget::Tool {
            server: label(),
            tool: "deploy".into(),
        },
        level: EveryUse::Confirm,
    };
    gate.authority
        .set_every_use(on_the_tool.clone(), None)
        .expect("on");
    assert!(gate.authority.every_use().contains(&per_call));
    let restarted = gate.restarted();
    let mut expected = vec![per_call, on_the_tool];
    expected.sort_by(|a, b| a.target.cmp(&b.target));
    assert_eq!(restarted.authority.every_use(), expected);
    restarted.audit.close("test");
}

/// Review 12, G4: an older seal the engine wrote verifies under the same key; put back with the
/// store's rows of its time, it undoes nothing narrowed since, which the log holds.
#[tokio::test]
async fn an_older_seal_put_back_undoes_no_narrowing_made_since() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    let sealed = |db: &rusqlite::Connection| -> String {
        db.query_row(
            "SELECT value FROM settings WHERE key = 'sealed-config'",
            [],
            |r| r.get(0),
        )
        .expect("a seal")
    };
    let older = sealed(&db);
    let per_call = per_call_on_the_server(&gate);
    assert_ne!(sealed(&db), older, "the person's change was sealed");
    gate.audit.close("stop");
    db.execute(
        "UPDATE settings SET value = ?1 WHERE key = 'sealed-config'",
        [&older],
    )
    .expect("the older seal back");
    db.execute("DELETE FROM every_use", [])
        .expect("its rows back");
    drop(db);
    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    assert_eq!(restarted.authority.every_use(), vec![per_call]);
    restarted.audit.close("test");
}

/// A person unbinds a credential while the vault is locked (an unbind takes no proof, so the
/// seal still names the binding): after the unlock, a row written back behind the engine's back
/// is not vouched for by that stale seal entry.
#[tokio::test]
async fn a_binding_undone_while_locked_does_not_come_back_by_a_row() {
    let gate = Gate::new();
    let name = bound_deploy_token(&gate);
    gate.authority.lock("test");
    assert!(gate.authority.unbind(&label(), &name).expect("unbind"));
    let proven = gate
        .authority
        .prove(Some(&proof(PASSPHRASE)), "unlock")
        .expect("proof");
    assert!(gate.authority.unlock(proven).expect("unlocked"));
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "INSERT INTO server_credentials (server, credential) VALUES ('deployer', 'deploy-token')",
        [],
    )
    .expect("bind again behind Postern's back");
    drop(db);
    let store = Store::open(gate.home.path()).expect("store");
    let bound = store.bindings(&label()).expect("bindings");
    assert_eq!(bound.len(), 1, "the row is back");
    assert!(
        gate.authority.vouched(&label(), bound).is_empty(),
        "and not used"
    );
    warns(
        &gate,
        "credential 'deploy-token' was bound to 'deployer' and is unbound",
    );
}

/// The unbind cut from the log, for the re-anchoring tests: `deployer` bound to
/// `deploy-token` and its seal kept aside by the agent, the person's unbind, then, with the
/// engine stopped, the log cut back to before the unbind and the binding's row put back. The
/// anchor catches the cut. Returns the connection (the kept seal is `saved_seal`) and the
/// vault key, as the person's passphrase gives it.
fn cut_log_with_the_binding_put_back(gate: &Gate) -> (rusqlite::Connection, VaultKey) {
    let name = bound_deploy_token(gate);
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute_batch(
        "CREATE TABLE saved_bindings AS SELECT * FROM server_credentials;
         CREATE TABLE saved_seal AS SELECT * FROM settings WHERE key = 'sealed-config';
         CREATE TABLE saved_head AS SELECT max(seq) AS seq FROM audit_log;",
    )
    .expect("the agent keeps copies");
    assert!(gate.authority.unbind(&label(), &name).expect("unbind"));
    gate.audit.close("stop");
    db.execute_batch(
        "DELETE FROM audit_log WHERE seq > (SELECT seq FROM saved_head);
         INSERT INTO server_credentials SELECT * FROM saved_bindings;",
    )
    .expect("put back");
    let vault = check_offline(&*gate.secrets, &proof(PASSPHRASE)).expect("the passphrase");
    let err = crate::audit::verify(&gate.home, &*gate.secrets, Some(&vault), false)
        .expect_err("the anchor catches the cut");
    assert!(err.to_string().contains("truncated"), "{err}");
    (db, vault)
}

/// The agent's older seal, kept by [`cut_log_with_the_binding_put_back`], put back.
fn older_seal_put_back(db: &rusqlite::Connection) {
    db.execute_batch(
        "UPDATE settings SET value = (SELECT value FROM saved_seal) WHERE key = 'sealed-config';",
    )
    .expect("the older seal put back");
}

/// After the unlock on `gate`'s home, the binding the cut records had removed stays removed.
fn the_unbind_holds(gate: &Gate) {
    let restarted = Gate::on(&gate.home, Arc::clone(&gate.secrets));
    let store = Store::open(gate.home.path()).expect("store");
    assert!(
        store.bindings(&label()).expect("bindings").is_empty(),
        "the binding the cut records had removed stays removed"
    );
    warns(
        &restarted,
        "credential 'deploy-token' was bound to 'deployer' and is unbound",
    );
    restarted.audit.close("test");
}

/// A log cut back with the store (the log and the binding of an older day put back while the
/// engine was stopped) is quarantined; a person who re-anchors it accepts that the records after
/// the cut are gone, and with them the narrowings they held, which nothing can read again. The
/// re-anchoring says so in the log, in a narrowing of its own that every older seal reads: one
/// put back after it, which verifies (the vault key is the same), vouches no more for a binding
/// the person removed in the records cut.
#[tokio::test]
async fn a_reanchored_cut_log_undoes_no_unbind_it_lost() {
    let gate = Gate::new();
    let (db, vault) = cut_log_with_the_binding_put_back(&gate);
    crate::audit::reanchor(&gate.home, Arc::clone(&gate.secrets) as _, Some(&vault))
        .expect("the person accepts it");
    older_seal_put_back(&db);
    drop(db);
    the_unbind_holds(&gate);
}

/// A re-anchoring that cannot write its record (here the log's public key was taken from the
/// store, so its log would not open) leaves the anchor where it was: the log stays
/// quarantined, and an older seal put back then is narrowed by the re-anchoring run again.
#[tokio::test]
async fn a_reanchoring_that_cannot_record_itself_leaves_the_log_quarantined() {
    let gate = Gate::new();
    let (db, vault) = cut_log_with_the_binding_put_back(&gate);
    let recipient: String = db
        .query_row(
            "DELETE FROM meta WHERE key = 'audit.recipient' RETURNING value",
            [],
            |r| r.get(0),
        )
        .expect("the public key taken");
    let err = crate::audit::reanchor(&gate.home, Arc::clone(&gate.secrets) as _, Some(&vault))
        .expect_err("the record cannot be written");
    assert!(err.to_string().contains("run it again"), "{err}");
    db.execute(
        "INSERT INTO meta (key, value) VALUES ('audit.recipient', ?1)",
        [recipient],
    )
    .expect("the public key back");
    let err = crate::audit::verify(&gate.home, &*gate.secrets, Some(&vault), false)
        .expect_err("still quarantined");
    assert!(err.to_string().contains("truncated"), "{err}");
    older_seal_put_back(&db);
    crate::audit::reanchor(&gate.home, Arc::clone(&gate.secrets) as _, Some(&vault))
        .expect("the person runs it again");
    drop(db);
    the_unbind_holds(&gate);
}

/// An unlock while the log takes nothing (quarantined: its writer has no head) reads no
/// narrowing, so the seal it writes names the head the seal before it named: the next unlock
/// reads the narrowings after that head, never the whole log again (where a re-anchoring's
/// `LostRecords` of long ago would drop every binding).
#[tokio::test]
async fn a_seal_written_while_the_log_is_quarantined_names_the_head_it_named() {
    let gate = Gate::new();
    bound_deploy_token(&gate);
    let named = |gate: &Gate| -> Value {
        let sealed: Value = Store::open(gate.home.path())
            .expect("store")
            .setting("sealed-config")
            .expect("read")
            .expect("a seal");
        let config: Value =
            serde_json::from_str(sealed["config"].as_str().expect("config")).expect("json");
        config["logHead"].clone()
    };
    let before = named(&gate);
    assert!(before.is_string(), "{before}");
    gate.audit.close("stop");
    let db = rusqlite::Connection::open(gate.home.path().join("postern.db")).expect("db");
    db.execute(
        "UPDATE audit_log SET sealed = CAST(zeroblob(80) AS BLOB) WHERE seq = 2",
        [],
    )
    .expect("a row edited");
    drop(db);
    let quarantined = Started::on(&gate.home, &gate.secrets);
    assert!(
        matches!(
            quarantined.audit.status().state,
            crate::audit::AuditState::Quarantined { .. }
        ),
        "{:?}",
        quarantined.audit.status()
    );
    assert!(unlock_started(&quarantined).expect("unlock"), "unlocked");
    assert_eq!(named(&gate), before);
    quarantined.audit.close("test");
}
