//! A person at a terminal: runs a command with a pseudo-terminal as its controlling terminal
//! (through `with_tty`) and types the passphrase at each of Postern's prompts, the way the
//! person would. The command's standard streams stay pipes the test reads.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::OnceLock;

use anyhow::{Context, Result};

use crate::binaries;

/// The passphrase the end-to-end person chose.
pub const PASSPHRASE: &str = "postern-e2e-passphrase";

/// The `with_tty` helper (tests/src/bin/with_tty.rs), built fresh for this process.
pub fn with_tty() -> Result<PathBuf> {
    static CELL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    binaries::cached(&CELL, "WITH_TTY_BIN", "postern-e2e", "with_tty")
}

/// What the terminal showed, and what the command wrote on its pipes.
#[derive(Debug)]
pub struct AtTerminal {
    /// The command's output (stdout and stderr on pipes).
    pub output: Output,
    /// Everything written to the terminal (the prompts; echo is off for the passphrase).
    pub screen: String,
    /// How many prompts were answered.
    pub prompts: usize,
}

/// Postern's prompts (crates/cli/src/proof.rs): "Postern passphrase: ", "New Postern
/// passphrase: ", "The same again: ".
pub const PASSPHRASE_PROMPTS: [&str; 2] = ["passphrase: ", "again: "];

/// What the person types at the terminal: after each prompt that ends with one of `prompts`,
/// `answer` and Enter.
#[derive(Debug, Clone)]
pub struct Typing {
    /// The ends of the prompts to answer.
    pub prompts: Vec<String>,
    /// What to type there.
    pub answer: String,
}

impl Typing {
    /// `passphrase` at every Postern passphrase prompt.
    pub fn passphrase(passphrase: &str) -> Typing {
        Typing {
            prompts: PASSPHRASE_PROMPTS.iter().map(|p| (*p).to_owned()).collect(),
            answer: passphrase.to_owned(),
        }
    }
}

/// Runs `command` with a terminal, answering every passphrase prompt with `passphrase`.
/// `command`'s program, arguments, environment and directory are kept; `input` (if any) is its
/// standard input, and its output is captured.
pub fn run(command: &mut Command, passphrase: &str, input: Option<&str>) -> Result<AtTerminal> {
    run_typing(command, Typing::passphrase(passphrase), input, None)
}

/// [`run`] typing `typing`, and as `user` when given (with its copy of `with_tty`): the
/// terminal is given to that user, as a login would.
pub fn run_typing(
    command: &mut Command,
    typing: Typing,
    input: Option<&str>,
    user: Option<(&crate::run_as::RunAs, &std::path::Path)>,
) -> Result<AtTerminal> {
    let pty = nix::pty::openpty(None, None).context("openpty")?;
    let device = nix::unistd::ttyname(&pty.slave).context("ttyname")?;
    let mut wrapped = match user {
        None => Command::new(with_tty()?),
        Some((user, with_tty)) => {
            user.give(&device)?;
            let mut wrapped = Command::new(with_tty);
            user.apply(&mut wrapped);
            wrapped
        }
    };
    wrapped
        .arg(&device)
        .arg(command.get_program())
        .args(command.get_args());
    for (k, v) in command.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        wrapped.current_dir(dir);
    }
    wrapped
        .stdin(if input.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = wrapped.spawn().context("spawning with_tty")?;
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        // A command that refuses its input before reading it may be gone already: its refusal
        // is what the test reads, not our write.
        match stdin.write_all(input.as_bytes()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            written => written?,
        }
    }
    // Only the child holds the terminal's device now: its exit ends our reads.
    drop(pty.slave);
    let typist = type_at_prompts(pty.master, typing);
    let output = child.wait_with_output()?;
    let (screen, prompts) = typist.join().unwrap_or_default();
    Ok(AtTerminal {
        output,
        screen,
        prompts,
    })
}

/// Reads the terminal until it closes, typing the answer after each prompt.
fn type_at_prompts(master: OwnedFd, typing: Typing) -> std::thread::JoinHandle<(String, usize)> {
    std::thread::spawn(move || {
        let mut file = std::fs::File::from(master);
        let mut screen = String::new();
        let mut answered = 0;
        let mut buf = [0u8; 1024];
        loop {
            let n = match file.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            screen.push_str(&String::from_utf8_lossy(&buf[..n]));
            let asked: usize = typing
                .prompts
                .iter()
                .map(|prompt| screen.matches(prompt.as_str()).count())
                .sum();
            while answered < asked {
                // As a person would, type once the prompt is really listening: polkit's
                // agent prints its prompt first and then turns echo off with TCSAFLUSH,
                // which throws away anything typed before (Postern turns echo off first).
                wait_for_echo_off(&file);
                if file
                    .write_all(format!("{}\n", typing.answer).as_bytes())
                    .is_err()
                {
                    break;
                }
                answered += 1;
            }
        }
        (screen, answered)
    })
}

/// Waits (at most 5 s) until the terminal behind the pty `master` has echo off: a password
/// prompt is reading then.
fn wait_for_echo_off(master: &std::fs::File) {
    use nix::sys::termios::{LocalFlags, tcgetattr};
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < deadline {
        match tcgetattr(master) {
            Ok(attrs) if !attrs.local_flags.contains(LocalFlags::ECHO) => return,
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            Err(_) => return,
        }
    }
}
