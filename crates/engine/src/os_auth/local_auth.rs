//! macOS: LocalAuthentication (Touch ID or the login password), through `postern-local-auth`,
//! the workspace's one crate with unsafe code. The dialog is the engine's own (the app's, or
//! `postern daemon`'s for a CLI request): it authenticates whoever is at the Mac, so the asker
//! is not passed on. Compile-checked only (scripts/check-macos.sh); nothing here has run.

use postern_local_auth::Outcome;

use super::{ANSWER_WITHIN, Asker, Verdict};

/// Asks for Touch ID or the login password; the dialog reads "Postern is trying to `act`".
pub(crate) fn ask(_asker: &Asker, act: &str) -> Verdict {
    match postern_local_auth::authenticate(act, ANSWER_WITHIN) {
        Outcome::Allowed => Verdict::Allowed,
        Outcome::Denied => Verdict::Denied,
        Outcome::Dismissed => Verdict::Dismissed,
        Outcome::Unavailable(why) => Verdict::Unavailable(why),
    }
}

/// Whether this Mac can ask.
pub fn available() -> Result<&'static str, String> {
    postern_local_auth::available().map(|()| "LocalAuthentication")
}
