//! `keychain_peek <home> <name>`: prints what the OS keychain holds for a Postern home's entry,
//! read straight from the keychain (as any other process of the user can), or nothing. The
//! proof-of-presence tests use it to show that credential values are stored sealed.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use postern_vault::{Keychain, SecretStore};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [home, name] = args.as_slice() else {
        eprintln!("usage: keychain_peek <home> <name>");
        return ExitCode::from(2);
    };
    match Keychain::for_home(Path::new(home)).get(name) {
        Ok(Some(bytes)) => {
            let _ = std::io::stdout().write_all(bytes.expose());
            ExitCode::SUCCESS
        }
        Ok(None) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keychain_peek: {e}");
            ExitCode::FAILURE
        }
    }
}
