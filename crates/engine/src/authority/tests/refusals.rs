//! Input that could never work is refused where it comes in, with what to do instead: a
//! credential's hosts, header, variable or value, a binding that would set a variable twice,
//! per-call approval for a server or credential that does not exist or was never on, settings
//! out of range. No refusal shows a credential's value.

use postern_domain::{CredentialName, CredentialSpec, Injection};
use postern_vault::Secret;

use super::*;

const VALUE: &str = "canary-value-4f1d";

fn name(n: &str) -> CredentialName {
    n.parse().expect("name")
}

fn env(var: &str) -> CredentialSpec {
    CredentialSpec::new(Injection::Env { var: var.into() }, &[]).expect("spec")
}

fn add(gate: &Gate, n: &str, spec: CredentialSpec, value: &str) -> Result<(), String> {
    gate.authority
        .add_credential(
            &gate.proven,
            &name(n),
            spec,
            false,
            Secret::new(value.into()),
        )
        .map(drop)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_basic_credential_needs_user_colon_password_and_never_shows_the_value() {
    let gate = Gate::new();
    let basic = || CredentialSpec::new(Injection::Basic, &["api.example.com".into()]);
    let refused = add(&gate, "basic", basic().expect("spec"), VALUE).expect_err("no colon");
    assert_eq!(
        refused,
        "a basic credential's value is user:password, and this one has no ':' (the value is not shown)"
    );
    assert!(gate.authority.credentials().expect("list").is_empty());
    add(&gate, "basic", basic().expect("spec"), "alice:pw").expect("user:password");

    let rotated = gate
        .authority
        .rotate_credential(&gate.proven, &name("basic"), Secret::new(VALUE.into()))
        .expect_err("rotating to a value without a colon");
    assert!(rotated.to_string().contains("user:password"), "{rotated}");
    assert!(!rotated.to_string().contains(VALUE));
    let header = CredentialSpec::new(Injection::Bearer, &["h.example".into()]).expect("spec");
    let lines = add(&gate, "bearer", header, "tok\nsecond-line").expect_err("control chars");
    assert!(lines.contains("control characters"), "{lines}");
}

#[tokio::test]
async fn binding_a_second_credential_for_the_same_variable_is_refused_naming_the_first() {
    let gate = Gate::new();
    let server = label();
    gate.configure(&server, &["TZ=UTC", "DEPLOY_REGION=eu"]);
    add(&gate, "deploy-token", env("DEPLOY_TOKEN"), VALUE).expect("add");
    add(&gate, "deploy-token-2", env("DEPLOY_TOKEN"), VALUE).expect("add");
    add(&gate, "region", env("DEPLOY_REGION"), VALUE).expect("add");

    assert!(
        gate.authority
            .bind(&gate.proven, &server, &name("deploy-token"))
            .expect("bind")
    );
    assert!(
        !gate
            .authority
            .bind(&gate.proven, &server, &name("deploy-token"))
            .expect("the same binding again is no collision"),
    );
    let twice = gate
        .authority
        .bind(&gate.proven, &server, &name("deploy-token-2"))
        .expect_err("same variable");
    assert_eq!(
        twice.to_string(),
        "credential 'deploy-token-2' sets DEPLOY_TOKEN, which credential 'deploy-token' bound to 'deployer' already sets; one would silently win at launch. Unbind it first (postern server unbind deployer deploy-token) or give one of them another variable"
    );
    let own = gate
        .authority
        .bind(&gate.proven, &server, &name("region"))
        .expect_err("the server's own env");
    assert!(
        own.to_string().starts_with(
            "credential 'region' sets DEPLOY_REGION, which server 'deployer' already sets in its own environment (--env)"
        ),
        "{own}"
    );
    let bound = Store::open(gate.home.path())
        .expect("store")
        .bindings(&server)
        .expect("bindings");
    assert_eq!(bound.len(), 1, "only the first binding was made");

    // Once the first is unbound, the second may take its place.
    gate.authority
        .unbind(&server, &name("deploy-token"))
        .expect("unbind");
    assert!(
        gate.authority
            .bind(&gate.proven, &server, &name("deploy-token-2"))
            .expect("bind")
    );
}

#[tokio::test]
async fn every_use_refuses_what_could_never_apply_and_an_off_that_changes_nothing() {
    let gate = Gate::new();
    gate.configure(&label(), &[]);
    let set = |target: SettingTarget, level: EveryUse| {
        gate.authority
            .set_every_use(EveryUseSetting { target, level }, Some(&gate.proven))
            .map_err(|e| e.0)
    };
    let nosuch: ServerLabel = "nosuch".parse().expect("label");
    assert_eq!(
        set(
            SettingTarget::Server {
                server: nosuch.clone()
            },
            EveryUse::Confirm
        ),
        Err(
            "no server is configured as 'nosuch', so per-call approval there would never apply; the servers are: deployer, postern"
                .into()
        )
    );
    assert!(
        set(
            SettingTarget::Tool {
                server: nosuch,
                tool: "deploy".into()
            },
            EveryUse::Confirm
        )
        .is_err_and(|e| e.starts_with("no server is configured as 'nosuch'"))
    );
    assert_eq!(
        set(
            SettingTarget::Credential {
                name: "nosuch".into()
            },
            EveryUse::Confirm
        ),
        Err(
            "no credential named 'nosuch', so per-call approval for it would never apply; there are no credentials yet"
                .into()
        )
    );
    assert!(gate.authority.every_use().is_empty());

    // The built-in server is always there; a tool is not checked here (the control socket
    // warns when it knows the catalog).
    let builtin: ServerLabel = postern_domain::BUILTIN_LABEL.parse().expect("label");
    set(SettingTarget::Server { server: builtin }, EveryUse::Confirm).expect("builtin");
    let tool = SettingTarget::Tool {
        server: label(),
        tool: "nosuchtool".into(),
    };
    set(tool.clone(), EveryUse::Confirm).expect("an unknown tool is taken");

    assert_eq!(
        set(
            SettingTarget::Server { server: label() },
            EveryUse::Off
        ),
        Err(
            "per-call approval was not on for every tool of deployer, so there is nothing to turn off; it is on for: tool nosuchtool of deployer; every tool of postern"
                .into()
        )
    );
    set(tool, EveryUse::Off).expect("it was on");
    assert_eq!(gate.authority.every_use().len(), 1);
}

#[tokio::test]
async fn settings_out_of_range_are_refused_and_nothing_changes() {
    let gate = Gate::new();
    let before = gate.authority.settings();
    for (update, refusal) in [
        (
            SettingsUpdate {
                approval_timeout_ms: Some(u64::MAX),
                ..SettingsUpdate::default()
            },
            "the approval timeout must be between 1 second and 1 day (86400 seconds)",
        ),
        (
            SettingsUpdate {
                approval_timeout_ms: Some(999),
                ..SettingsUpdate::default()
            },
            "the approval timeout must be between 1 second and 1 day (86400 seconds)",
        ),
        (
            SettingsUpdate {
                auto_lock_ms: Some(u64::MAX),
                ..SettingsUpdate::default()
            },
            "the auto-lock time must be at most 1 week (10080 minutes); 0 turns it off",
        ),
    ] {
        let refused = gate
            .authority
            .update_settings(update, Some(&gate.proven))
            .expect_err(refusal);
        assert_eq!(refused.0, refusal);
    }
    assert_eq!(gate.authority.settings(), before);
    let longest = gate
        .authority
        .update_settings(
            SettingsUpdate {
                approval_timeout_ms: Some(super::super::MAX_APPROVAL_TIMEOUT_MS),
                auto_lock_ms: Some(0),
                ..SettingsUpdate::default()
            },
            Some(&gate.proven),
        )
        .expect("a day, and never locking, are fine");
    assert_eq!(longest.approval_timeout_ms, 86_400_000);
}

/// A release approved for a credential does not outlive it: removed (or unbound) and added
/// again, the same name is another secret, released only on a new approval.
#[tokio::test]
async fn a_removed_or_unbound_credential_forgets_its_approved_releases() {
    let gate = Gate::new();
    add(&gate, "api", env("API_TOKEN"), VALUE).expect("add");
    let run = me().run_key();
    let approved = |credential: &str| super::super::release::Approved {
        run: AgentRun {
            pid: run.0,
            start_time: run.1,
        },
        server: label(),
        identity: launch(1, b"v1").record.identity_digest(),
        credential: credential.into(),
    };
    let releases = |gate: &Gate| gate.authority.state().releases.len();
    gate.authority.state().releases.insert(approved("api"));
    gate.authority.state().releases.insert(approved("other"));
    let server = ServerConfig::new(label(), vec!["node".into()], None, vec![]);
    Store::open(gate.home.path())
        .expect("store")
        .add_server(&server.expect("config"))
        .expect("server");
    gate.authority
        .bind(&gate.proven, &label(), &name("api"))
        .expect("bind");
    assert!(
        gate.authority
            .unbind(&label(), &name("api"))
            .expect("unbind")
    );
    assert_eq!(
        releases(&gate),
        1,
        "unbinding forgets that server's release of it"
    );

    gate.authority.state().releases.insert(approved("api"));
    gate.authority
        .remove_credential(&gate.proven, &name("api"))
        .expect("remove");
    assert_eq!(releases(&gate), 1, "removing forgets every release of it");
    assert!(gate.authority.state().releases.contains(&approved("other")));
}
