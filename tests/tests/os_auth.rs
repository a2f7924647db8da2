//! OS authentication as the proof of presence, against the real polkit (issue 13): polkitd on
//! the system bus with Postern's actions installed (packaging/linux/dev.postern.policy), and a
//! real authentication agent, `pkttyagent`, which `postern --os-auth` registers for itself on
//! the person's terminal. The person types their login password at its prompt; PAM checks
//! it; polkitd answers the engine. Nothing of polkit is mocked.
//!
//! polkit treats uid 0 as always authorized, so the engine, the CLI and everything they start
//! run as a dedicated user with a known password, made by `scripts/setup-polkit-test.sh`
//! (as root: the user, the policy, a system bus and polkitd where none run), which
//! `scripts/test.sh` runs. Without root, that user or polkitd the test says so and passes,
//! except under CI, where it fails.

use std::ffi::OsString;
use std::time::Duration;

use anyhow::{Result, bail};
use postern_e2e::human::{card_id, open_approvals, wait_approvals};
use postern_e2e::raw::{self, RawAgent};
use postern_e2e::run_as::RunAs;
use postern_e2e::tty::Typing;
use postern_e2e::{Gate, servers};
use serde_json::json;

/// The user the polkit tests run the engine as (scripts/setup-polkit-test.sh makes it).
const USER: &str = "postern-polkit-test";
/// Their login password (scripts/setup-polkit-test.sh sets it).
const PASSWORD: &str = "postern-polkit-e2e-password";
const LABEL: &str = "fixture";
const ANSWER: Duration = Duration::from_secs(60);

#[tokio::test]
async fn polkit_answers_for_the_person_only_while_the_vault_is_unlocked() -> Result<()> {
    let Some(user) = polkit_ready()? else {
        return Ok(());
    };
    let fixture = servers::fixture()?;
    let gate = Gate::start_prompting_as(&[(LABEL, &fixture)], &[], Some(user.clone())).await?;
    gate.scenario(async {
        let mut agent = agent(&gate).await?;
        let call = agent
            .start(
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "through polkit"}}),
            )
            .await?;
        let card = card_id(&wait_approvals(&gate)?[0]);
        let approve = |password: &str| {
            gate.typing(
                &[
                    OsString::from("--os-auth"),
                    OsString::from("approve"),
                    OsString::from(&card),
                    OsString::from("--once"),
                ],
                None,
                login_password(password),
            )
        };

        // (c) No authentication agent: no terminal for pkttyagent, no desktop agent. polkit
        // says so; the card still waits.
        let alone = gate.detached(&["--os-auth", "approve", &card, "--once"])?;
        let said = String::from_utf8_lossy(&alone.stderr).into_owned();
        assert!(!alone.status.success(), "{said}");
        assert!(said.contains("(os_auth_no_agent)"), "{said}");
        assert!(said.contains("no authentication agent"), "{said}");
        assert_eq!(open_approvals(&gate)?.len(), 1, "the card still waits");

        // (b) The wrong login password at polkit's own prompt: refused, and in the audit log.
        let wrong = approve("not-the-login-password")?;
        let said = String::from_utf8_lossy(&wrong.output.stderr).into_owned();
        assert!(!wrong.output.status.success(), "{said}");
        assert!(
            said.contains("(os_auth_denied)"),
            "{said}\n{}",
            wrong.screen
        );
        assert!(wrong.prompts >= 1, "polkit asked: {}", wrong.screen);
        assert!(wrong.screen.contains(USER), "{}", wrong.screen);
        assert_eq!(open_approvals(&gate)?.len(), 1, "the card still waits");
        let exported = gate.cli(["audit", "export"])?;
        assert!(
            exported.contains("proof_refused") && exported.contains("failed system authentication"),
            "the refusal is in the audit log"
        );
        assert!(!exported.contains("not-the-login-password"));
        // A process of the same user cannot answer for the person: it may run an agent of
        // its own, but only uid 0 (the setuid helper, after PAM) may tell polkitd that
        // authentication succeeded.
        let forged = forge_success(&user)?;
        assert!(
            forged.contains("Only uid 0 may invoke this method"),
            "{forged}"
        );

        // It counts toward the same back-off as wrong passphrases: after its second of wait,
        // a wrong passphrase is the second refusal in a row, and waits two.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let guess = gate.at_terminal(&[OsString::from("unlock")], None, "a-wrong-passphrase")?;
        let said = String::from_utf8_lossy(&guess.output.stderr).into_owned();
        assert!(said.contains("(passphrase_wrong)"), "{said}");
        assert!(said.contains("the next try is allowed in 2 s"), "{said}");

        // (a) The right login password, after the back-off: the approval goes through.
        tokio::time::sleep(Duration::from_millis(2100)).await;
        let typed = approve(PASSWORD)?;
        assert!(
            typed.output.status.success(),
            "{}\n{}",
            String::from_utf8_lossy(&typed.output.stderr),
            typed.screen
        );
        assert!(
            typed
                .screen
                .contains("AUTHENTICATING FOR dev.postern.approve"),
            "{}",
            typed.screen
        );
        assert!(
            !typed.screen.contains(PASSWORD),
            "echo is off: {}",
            typed.screen
        );
        let answered = agent.response(&call).await?;
        assert!(answered.get("result").is_some(), "{answered}");
        assert!(open_approvals(&gate)?.is_empty());

        // (d) Locked, an OS proof unlocks nothing, and polkit is not even asked.
        gate.cli(["lock"])?;
        let unlock = gate.typing(
            &[OsString::from("--os-auth"), OsString::from("unlock")],
            None,
            login_password(PASSWORD),
        )?;
        let said = String::from_utf8_lossy(&unlock.output.stderr).into_owned();
        assert!(!unlock.output.status.success(), "{said}");
        assert!(said.contains("(os_auth_needs_passphrase)"), "{said}");
        assert_eq!(unlock.prompts, 0, "no dialog: {}", unlock.screen);
        assert!(
            gate.cli(["lock"])?.contains("the vault was already locked"),
            "the vault stayed locked"
        );
        Ok(())
    })
    .await
}

/// What polkitd says when a process of `user` (not the setuid helper) reports a successful
/// authentication for a cookie, as its own agent would have to.
fn forge_success(user: &RunAs) -> Result<String> {
    let mut call = std::process::Command::new("gdbus");
    call.args([
        "call",
        "--system",
        "--dest",
        "org.freedesktop.PolicyKit1",
        "--object-path",
        "/org/freedesktop/PolicyKit1/Authority",
        "--method",
        "org.freedesktop.PolicyKit1.Authority.AuthenticationAgentResponse2",
    ])
    .arg(user.uid.to_string())
    .arg("a-cookie-of-its-choosing")
    .arg(format!("('unix-user', {{'uid': <uint32 {}>}})", user.uid));
    user.apply(&mut call);
    let out = call.current_dir("/").output()?;
    anyhow::ensure!(!out.status.success(), "polkitd took the claim");
    Ok(String::from_utf8_lossy(&out.stderr).into_owned())
}

/// polkit's prompt (pkttyagent: "Password: ") answered with `password`.
fn login_password(password: &str) -> Typing {
    Typing {
        prompts: vec!["Password: ".into()],
        answer: password.into(),
    }
}

async fn agent(gate: &Gate) -> Result<RawAgent> {
    let (cmd, log) = gate.agent_command(LABEL)?;
    let mut agent = raw::connect(cmd, &log, "os-auth-agent", ANSWER).await?;
    agent.list_tools().await?;
    Ok(agent)
}

/// The test user, when polkit can be tested here. Without it: an error under CI (every test
/// runs there), a note and `None` elsewhere.
fn polkit_ready() -> Result<Option<RunAs>> {
    match missing() {
        None => Ok(Some(RunAs::user(USER)?)),
        Some(why) if std::env::var_os("CI").is_some() => bail!(
            "the polkit test cannot run: {why}. Run scripts/setup-polkit-test.sh as root \
             (scripts/test.sh does)"
        ),
        Some(why) => {
            eprintln!(
                "SKIPPED: the polkit test cannot run here: {why} (scripts/setup-polkit-test.sh, \
                 as root, prepares a machine; under CI this fails)"
            );
            Ok(None)
        }
    }
}

/// What this machine lacks for the polkit test, if anything.
fn missing() -> Option<String> {
    if !nix::unistd::getuid().is_root() {
        return Some(
            "it runs as root (polkit authorizes root always, so the engine runs as another \
             user, which takes root to arrange)"
                .into(),
        );
    }
    if RunAs::user(USER).is_err() {
        return Some(format!("there is no user {USER}"));
    }
    if servers::find_on_path("pkttyagent").is_err() {
        return Some("pkttyagent (Debian package polkitd) is not installed".into());
    }
    if servers::find_on_path("gdbus").is_err() {
        return Some("gdbus (Debian package libglib2.0-bin) is not installed".into());
    }
    let action = std::process::Command::new("pkaction")
        .args(["--action-id", "dev.postern.approve"])
        .output();
    match action {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "polkitd does not answer on the system bus, or Postern's actions are not installed \
             (pkaction: {})",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Some(format!("pkaction (Debian package polkitd) cannot run: {e}")),
    }
}
