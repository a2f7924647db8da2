//! macOS LocalAuthentication for Postern's proof of presence (issue 13): the system asks the
//! person for Touch ID or their login password (`LAPolicyDeviceOwnerAuthentication`) and says
//! yes or no. Like polkit on Linux, it holds no secret: the engine lets a yes stand in for the
//! passphrase only while the vault is unlocked (`postern_engine::os_auth`).
//!
//! Nothing here has run: it is compile-checked from Linux by `scripts/check-macos.sh`
//! (docs/app.md says so). On other platforms the crate is empty.

#![cfg(target_os = "macos")]
// Calling Objective-C is unsafe by signature; each call below says why it is sound.
#![allow(unsafe_code)]

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::Duration;

use block2::RcBlock;
use objc2::runtime::Bool;
use objc2_foundation::{NSError, NSString};
use objc2_local_authentication::{LAContext, LAError, LAPolicy};

/// What LocalAuthentication answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The person authenticated.
    Allowed,
    /// The authentication failed (a wrong password, an unknown finger).
    Denied,
    /// The person (or the system) cancelled the dialog.
    Dismissed,
    /// It could not ask; the sentence says why.
    Unavailable(String),
}

/// The policy: Touch ID, or the login password where there is none or it fails.
const POLICY: LAPolicy = LAPolicy::DeviceOwnerAuthentication;

/// Whether this Mac can ask the person (a login password is always set; biometry is optional).
pub fn available() -> Result<(), String> {
    // SAFETY: `new` returns an owned, initialized context; `canEvaluatePolicy:error:` only
    // reads the policy and reports through the returned error.
    let context = unsafe { LAContext::new() };
    unsafe { context.canEvaluatePolicy_error(POLICY) }
        .map_err(|e| e.localizedDescription().to_string())
}

/// Asks the person, with `reason` shown in the dialog ("Postern is trying to <reason>"),
/// and waits at most `within` for the answer (then the dialog is withdrawn).
pub fn authenticate(reason: &str, within: Duration) -> Outcome {
    if let Err(why) = available() {
        return Outcome::Unavailable(why);
    }
    // SAFETY: as in `available`.
    let context = unsafe { LAContext::new() };
    let (tx, rx) = mpsc::channel::<Option<isize>>();
    let tx = Mutex::new(tx);
    // The reply runs once, on a queue of the framework's: it only sends the answer over.
    let reply = RcBlock::new(move |success: Bool, error: *mut NSError| {
        // SAFETY: the framework passes a valid NSError or nil, alive for the block's call.
        let code = match unsafe { error.as_ref() } {
            _ if success.as_bool() => None,
            Some(error) => Some(error.code()),
            None => Some(LAError::AuthenticationFailed.0),
        };
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(code);
        }
    });
    let reason = NSString::from_str(reason);
    // SAFETY: the context outlives the evaluation (it is invalidated or dropped only after the
    // answer or the timeout), the reason is a non-empty string, and the block is Send (it
    // holds only a Mutex around a Sender).
    unsafe { context.evaluatePolicy_localizedReason_reply(POLICY, &reason, &reply) };
    let answer = rx.recv_timeout(within);
    // SAFETY: invalidating ends a pending evaluation (its reply gets AppCancel) and is a
    // no-op on a finished one.
    unsafe { context.invalidate() };
    match answer {
        Ok(None) => Outcome::Allowed,
        Ok(Some(code)) => outcome(LAError(code)),
        Err(_) => Outcome::Unavailable(format!(
            "no answer from LocalAuthentication within {} s",
            within.as_secs()
        )),
    }
}

fn outcome(error: LAError) -> Outcome {
    match error {
        LAError::AuthenticationFailed => Outcome::Denied,
        LAError::UserCancel
        | LAError::SystemCancel
        | LAError::AppCancel
        | LAError::UserFallback => Outcome::Dismissed,
        LAError::PasscodeNotSet => Outcome::Unavailable("this Mac has no login password".into()),
        LAError::NotInteractive => {
            Outcome::Unavailable("LocalAuthentication may not show a dialog here".into())
        }
        other => Outcome::Unavailable(format!("LocalAuthentication error {}", other.0)),
    }
}
