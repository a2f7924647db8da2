//! macOS: LocalAuthentication, Touch ID or the login password
//! (`LAPolicyDeviceOwnerAuthentication`). The dialog is the engine's own (the app's, or
//! `postern daemon`'s for a CLI request): it authenticates whoever is at the Mac, so the asker
//! is not passed on. Like polkit it says yes or no and holds no secret. Compile-checked only
//! (scripts/check-macos.sh); nothing here has run (docs/app.md).

use super::{ANSWER_WITHIN, Asker, Verdict};

/// Asks for Touch ID or the login password; the dialog reads "Postern is trying to `act`".
pub(crate) fn ask(_asker: &Asker, act: &str) -> Verdict {
    if let Err(why) = sys::can_ask() {
        return Verdict::Unavailable(why);
    }
    match sys::authenticate(act, ANSWER_WITHIN) {
        Ok(None) => Verdict::Allowed,
        Ok(Some(error)) => verdict(error),
        Err(why) => Verdict::Unavailable(why),
    }
}

/// Whether this Mac can ask (a login password is always set; biometry is optional).
pub fn available() -> Result<&'static str, String> {
    sys::can_ask().map(|()| "LocalAuthentication")
}

/// What an `LAError` code means.
fn verdict(error: objc2_local_authentication::LAError) -> Verdict {
    use objc2_local_authentication::LAError;
    match error {
        LAError::AuthenticationFailed => Verdict::Denied,
        LAError::UserCancel
        | LAError::SystemCancel
        | LAError::AppCancel
        | LAError::UserFallback => Verdict::Dismissed,
        LAError::PasscodeNotSet => Verdict::Unavailable("this Mac has no login password".into()),
        LAError::NotInteractive => {
            Verdict::Unavailable("LocalAuthentication may not show a dialog here".into())
        }
        other => Verdict::Unavailable(format!("LocalAuthentication error {}", other.0)),
    }
}

/// The calls into LocalAuthentication, which objc2 marks unsafe.
#[allow(
    unsafe_code,
    reason = "LAContext's methods are unsafe in objc2: evaluatePolicy's reply block must be sendable (ours holds only a Mutex around a Sender), the rest take no pointers of ours"
)]
mod sys {
    use std::sync::{Mutex, mpsc};
    use std::time::Duration;

    use block2::RcBlock;
    use objc2::runtime::Bool;
    use objc2_foundation::{NSError, NSString};
    use objc2_local_authentication::{LAContext, LAError, LAPolicy};

    const POLICY: LAPolicy = LAPolicy::DeviceOwnerAuthentication;

    /// Whether the policy can be evaluated on this Mac.
    pub(super) fn can_ask() -> Result<(), String> {
        // SAFETY: `new` returns an owned, initialized context; `canEvaluatePolicy:error:` only
        // reads the policy and reports through the returned error.
        let context = unsafe { LAContext::new() };
        unsafe { context.canEvaluatePolicy_error(POLICY) }
            .map_err(|e| e.localizedDescription().to_string())
    }

    /// Evaluates the policy with `reason` shown, waiting at most `within`: `None` when the
    /// person authenticated, the `LAError` otherwise.
    pub(super) fn authenticate(reason: &str, within: Duration) -> Result<Option<LAError>, String> {
        // SAFETY: as in `can_ask`.
        let context = unsafe { LAContext::new() };
        let (tx, rx) = mpsc::channel::<Option<isize>>();
        let tx = Mutex::new(tx);
        // The reply runs once, on a queue of the framework's: it only sends the answer over.
        let reply = RcBlock::new(move |success: Bool, error: *mut NSError| {
            // SAFETY: the framework passes a valid NSError or nil, alive for the call.
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
        // SAFETY: the context outlives the evaluation (invalidated below, after the answer or
        // the timeout), the reason is non-empty, and the block is sendable.
        unsafe { context.evaluatePolicy_localizedReason_reply(POLICY, &reason, &reply) };
        let answer = rx.recv_timeout(within);
        // SAFETY: invalidating ends a pending evaluation (its reply gets AppCancel) and is a
        // no-op on a finished one.
        unsafe { context.invalidate() };
        match answer {
            Ok(code) => Ok(code.map(LAError)),
            Err(_) => Err(format!(
                "no answer from LocalAuthentication within {} s",
                within.as_secs()
            )),
        }
    }
}
