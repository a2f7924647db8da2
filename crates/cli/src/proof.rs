//! The person's proof of presence on a terminal (issue 13): the Postern passphrase, read from
//! the controlling terminal (`/dev/tty`) with echo off (turned off before the prompt shows). Never from standard input, arguments,
//! the environment or a file: an agent can fill all of those, and a process the agent started
//! outside its own tree (setsid, nohup, systemd-run) has no terminal to be asked on.
//!
//! With `--os-auth` the proof is OS authentication instead (polkit, checked by the engine for
//! this process as the socket's peer credentials name it): `pkttyagent`, which this process
//! registers for itself, asks for the login password on this terminal (without a terminal,
//! the desktop's polkit agent for the session asks, if one runs). It works while the vault is
//! unlocked; unlocking needs the passphrase.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, anyhow, bail};
use postern_engine::Home;
use postern_engine::authority::{PresenceError, Proof, check_offline, passphrase_known};
use postern_gateway::hello::{SecretText, WireProof};
use postern_vault::VaultKey;
use zeroize::Zeroize;

/// The prompt, as the person (and the end-to-end tests' pty) sees it.
pub const PROMPT: &str = "Postern passphrase: ";

/// Asks for a passphrase on the controlling terminal with `prompt`, echo off.
pub fn ask(prompt: &str, why: &str) -> Result<String> {
    // The passphrase is in this process's memory for a moment: keep other processes out.
    postern_engine::harden::protect_process();
    read_from_tty(prompt).map_err(|e| {
        anyhow!(
            "{}",
            PresenceError::Required { what: why.into() }.to_string()
                + &format!(" (this process has no terminal to ask on: {e})")
        )
    })
}

/// Turns echo off on `/dev/tty`, then shows `prompt` and reads one line there, and puts the
/// terminal back as it was (also when reading fails). Echo is off before the prompt shows, so
/// nothing typed after the prompt appears can be echoed.
fn read_from_tty(prompt: &str) -> std::io::Result<String> {
    use std::io::{BufRead, Write};

    use nix::sys::termios::{LocalFlags, SetArg, Termios, tcgetattr, tcsetattr};

    struct Restore<'a>(&'a std::fs::File, Termios);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            let _ = tcsetattr(self.0, SetArg::TCSANOW, &self.1);
        }
    }

    let tty = std::fs::File::options()
        .read(true)
        .write(true)
        .open("/dev/tty")?;
    let original = tcgetattr(&tty)?;
    let mut silent = original.clone();
    silent.local_flags.remove(LocalFlags::ECHO);
    silent.local_flags.insert(LocalFlags::ECHONL);
    tcsetattr(&tty, SetArg::TCSANOW, &silent)?;
    let _restore = Restore(&tty, original);
    (&tty).write_all(prompt.as_bytes())?;
    (&tty).flush()?;
    let mut line = String::new();
    std::io::BufReader::new(&tty).read_line(&mut line)?;
    let passphrase = line.trim_end_matches(['\n', '\r']).to_owned();
    line.zeroize();
    Ok(passphrase)
}

/// Whether the person chose OS authentication (`--os-auth`).
static OS_AUTH: AtomicBool = AtomicBool::new(false);

/// Proves with OS authentication instead of the passphrase from now on (`--os-auth`).
pub fn use_os_auth(yes: bool) {
    OS_AUTH.store(yes, Ordering::Relaxed);
}

/// The proof for `why` as the socket carries it: the passphrase, asked on the terminal, or
/// with `--os-auth` the word "os" and an authentication agent on this terminal for the
/// engine's polkit check, which lives as long as the returned [`TtyAgent`].
pub fn wire(why: &str) -> Result<(WireProof, Option<TtyAgent>)> {
    if OS_AUTH.load(Ordering::Relaxed) {
        return Ok((WireProof::Os, TtyAgent::start()));
    }
    Ok((WireProof::Passphrase(SecretText(ask(PROMPT, why)?)), None))
}

/// The passphrase proof for `why` (changing the passphrase takes no OS proof).
pub fn wire_passphrase(why: &str) -> Result<WireProof> {
    Ok(WireProof::Passphrase(SecretText(ask(PROMPT, why)?)))
}

/// `pkttyagent`, registered as the authentication agent for this process: polkit asks for the
/// login password on this terminal. (Not `--fallback`: polkit passes over a fallback agent
/// when the process has no login session, as in a container or over some SSH setups.)
/// Stopped on drop.
#[derive(Debug)]
pub struct TtyAgent(Child);

impl TtyAgent {
    /// Starts `pkttyagent` for this process (its parent) and waits until it is
    /// registered: it closes its standard output then. `None` when it cannot run (not
    /// installed, no terminal): polkit then finds the desktop's agent or none.
    fn start() -> Option<TtyAgent> {
        let mut child = Command::new("pkttyagent")
            .args(["--notify-fd", "1"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // End of file: registered (the notify fd closed), or gone (no terminal, no polkit).
        let mut rest = Vec::new();
        let _ = child.stdout.take()?.read_to_end(&mut rest);
        match child.try_wait() {
            Ok(None) => Some(TtyAgent(child)),
            _ => {
                let _ = child.wait();
                None
            }
        }
    }
}

impl Drop for TtyAgent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Proves the person's presence for `why` on a home no engine owns: asks on the terminal
/// and checks against the keychain's wrapped vault key. A home that never had a passphrase
/// has nothing to prove against (it predates issue 13, or its keychain entries are gone).
pub fn offline(home: &Home, why: &str) -> Result<()> {
    let keychain = postern_vault::Keychain::for_home(home.path());
    if !passphrase_known(&keychain) {
        return Ok(());
    }
    if OS_AUTH.load(Ordering::Relaxed) {
        bail!("{}", PresenceError::OsNeedsPassphrase { what: why.into() });
    }
    vault_key(&keychain, why).map(drop)
}

/// The vault key, unwrapped with the passphrase asked for on the terminal (for `why`).
pub fn vault_key(keychain: &postern_vault::Keychain, why: &str) -> Result<VaultKey> {
    let proof = Proof::passphrase(ask(PROMPT, why)?);
    match check_offline(keychain, &proof) {
        Ok(key) => Ok(key),
        Err(PresenceError::Wrong { .. }) => bail!("wrong passphrase: refused to {why}"),
        Err(e) => Err(e.into()),
    }
}

/// A new passphrase, typed twice.
pub fn new_passphrase() -> Result<String> {
    let first = ask("New Postern passphrase: ", "set the Postern passphrase")?;
    let again = ask("The same again: ", "set the Postern passphrase")?;
    if first != again {
        bail!("the two passphrases differ; nothing was changed");
    }
    Ok(first)
}
