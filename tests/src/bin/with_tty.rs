//! `with_tty <tty> <program> [args...]`: runs `program` in a new session whose controlling
//! terminal is `tty` (a pseudo-terminal's device), its standard streams left as they are. The
//! end-to-end harness types the person's passphrase on that terminal, where `postern` asks
//! for it (it reads only the controlling terminal); output stays on pipes for the test to read.
//!
//! On Linux a session leader with no controlling terminal acquires the first terminal it
//! opens (without `O_NOCTTY`), so this needs no ioctl.

use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(tty), Some(program)) = (args.next(), args.next()) else {
        eprintln!("usage: with_tty <tty> <program> [args...]");
        return ExitCode::from(2);
    };
    if let Err(e) = nix::unistd::setsid() {
        eprintln!("with_tty: setsid: {e}");
        return ExitCode::from(2);
    }
    // Kept open across exec: the terminal stays this session's.
    let terminal = match std::fs::File::options().read(true).write(true).open(&tty) {
        Ok(file) => file,
        Err(e) => {
            eprintln!("with_tty: {}: {e}", tty.to_string_lossy());
            return ExitCode::from(2);
        }
    };
    let err = Command::new(&program).args(args).exec();
    drop(terminal);
    eprintln!("with_tty: {}: {err}", program.to_string_lossy());
    ExitCode::from(127)
}
