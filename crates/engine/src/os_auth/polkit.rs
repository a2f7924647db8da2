//! polkit on the system bus: `CheckAuthorization` for the asking process, with user
//! interaction, against Postern's actions (packaging/linux/dev.postern.policy).
//!
//! Why polkitd's answer can be trusted against another process of the same user: that process
//! may register an authentication agent for itself (or for the asker), and so be the one the
//! dialog comes from, but only uid 0 may tell polkitd that authentication succeeded
//! (`AuthenticationAgentResponse2`), which the setuid `polkit-agent-helper-1` does after PAM
//! accepted the password. An agent that does not know the password can show a dialog and
//! nothing more. The subject is the process the engine saw (peer credentials, start time),
//! never one a request names; polkit treats uid 0 as always authorized, so an engine run by
//! root proves nothing this way.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use dbus::arg::{PropMap, Variant};
use dbus::blocking::Connection;

use super::{ANSWER_WITHIN, Asker, Verdict};

/// The action for approving a request.
pub const APPROVE: &str = "dev.postern.approve";
/// The action for every other act that widens authority or removes configuration.
pub const AUTHORIZE: &str = "dev.postern.authorize";

const DESTINATION: &str = "org.freedesktop.PolicyKit1";
const PATH: &str = "/org/freedesktop/PolicyKit1/Authority";
const INTERFACE: &str = "org.freedesktop.PolicyKit1.Authority";
const ALLOW_USER_INTERACTION: u32 = 1;
/// How long an answer about availability is kept.
const AVAILABLE_FOR: Duration = Duration::from_secs(10);

/// Asks polkit, with user interaction, whether `asker` may do `act`.
pub(crate) fn ask(asker: &Asker, act: &str) -> Verdict {
    let action = action_for(act);
    match check(asker, action, ALLOW_USER_INTERACTION, ANSWER_WITHIN) {
        Ok(answer) => verdict(&answer),
        Err(e) => Verdict::Unavailable(unavailable(&e, action)),
    }
}

/// Whether polkit runs and knows Postern's actions, asked for this process without user
/// interaction (no dialog shows).
pub fn available() -> Result<&'static str, String> {
    static LAST: Mutex<Option<(Instant, Result<&'static str, String>)>> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((at, answer)) = last.as_ref()
        && at.elapsed() < AVAILABLE_FOR
    {
        return answer.clone();
    }
    let answer = match Asker::this_process() {
        None => Err("this process's start time is unknown".to_owned()),
        Some(me) => check(&me, AUTHORIZE, 0, Duration::from_secs(5))
            .map(|_| "polkit")
            .map_err(|e| unavailable(&e, AUTHORIZE)),
    };
    *last = Some((Instant::now(), answer.clone()));
    answer
}

/// The action whose message names `act` best.
pub fn action_for(act: &str) -> &'static str {
    if act.starts_with("approve") {
        APPROVE
    } else {
        AUTHORIZE
    }
}

/// polkit's answer: authorized, a challenge, and its details.
type Answer = (bool, bool, HashMap<String, String>);

/// `CheckAuthorization` for `asker` and `action`. A call that outlives `within` is cancelled
/// (the dialog closes).
fn check(asker: &Asker, action: &str, flags: u32, within: Duration) -> Result<Answer, dbus::Error> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let conn = Connection::new_system()?;
    let proxy = conn.with_proxy(DESTINATION, PATH, within);
    let mut process: PropMap = HashMap::new();
    process.insert("pid".into(), Variant(Box::new(asker.pid)));
    process.insert("start-time".into(), Variant(Box::new(asker.start_time)));
    // polkit's uid is a signed 32-bit integer; a uid beyond it names no user polkit knows.
    let uid = i32::try_from(asker.uid).unwrap_or(-1);
    process.insert("uid".into(), Variant(Box::new(uid)));
    let subject = ("unix-process", process);
    // Only trusted callers (uid 0, an action's owner) may pass details: the act is named by
    // the action's own message instead.
    let details: HashMap<&str, &str> = HashMap::new();
    let cancel = format!("postern-{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let answer: Result<(Answer,), dbus::Error> = proxy.method_call(
        INTERFACE,
        "CheckAuthorization",
        (subject, action, details, flags, cancel.as_str()),
    );
    if let Err(e) = &answer
        && e.name() == Some("org.freedesktop.DBus.Error.NoReply")
    {
        let quick = conn.with_proxy(DESTINATION, PATH, Duration::from_secs(5));
        let _: Result<(), dbus::Error> =
            quick.method_call(INTERFACE, "CancelCheckAuthorization", (cancel.as_str(),));
    }
    answer.map(|(answer,)| answer)
}

/// What polkit's answer to an interactive check means. A challenge that comes back
/// unanswered means no agent could ask; a dismissed dialog is marked in the details.
fn verdict((authorized, challenge, details): &Answer) -> Verdict {
    if *authorized {
        Verdict::Allowed
    } else if details.get("polkit.dismissed").map(String::as_str) == Some("true") {
        Verdict::Dismissed
    } else if *challenge {
        Verdict::NoAgent
    } else {
        Verdict::Denied
    }
}

/// Why polkit could not be asked, in words.
fn unavailable(e: &dbus::Error, action: &str) -> String {
    let message = e.message().unwrap_or("");
    match e.name().unwrap_or("") {
        "org.freedesktop.DBus.Error.ServiceUnknown"
        | "org.freedesktop.DBus.Error.NameHasNoOwner"
        | "org.freedesktop.DBus.Error.Spawn.ChildExited"
        | "org.freedesktop.DBus.Error.Spawn.ExecFailed" => {
            "polkit is not running (no polkitd on the system bus)".into()
        }
        "org.freedesktop.DBus.Error.NoReply" => {
            format!("no answer from polkit within {} s", ANSWER_WITHIN.as_secs())
        }
        _ if message.contains("is not registered") => format!(
            "the polkit action {action} is not installed: copy packaging/linux/dev.postern.policy \
             into /usr/share/polkit-1/actions/"
        ),
        "org.freedesktop.DBus.Error.FileNotFound"
        | "org.freedesktop.DBus.Error.NoServer"
        | "org.freedesktop.DBus.Error.Disconnected"
        | "" => format!("no system D-Bus to reach polkit on ({message})"),
        name => format!("polkit refused to check ({name}: {message})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(authorized: bool, challenge: bool, dismissed: bool) -> Answer {
        let mut details = HashMap::new();
        if dismissed {
            details.insert("polkit.dismissed".to_owned(), "true".to_owned());
        }
        (authorized, challenge, details)
    }

    #[test]
    fn polkits_answers_read_as_verdicts() {
        assert_eq!(verdict(&answer(true, false, false)), Verdict::Allowed);
        assert_eq!(verdict(&answer(false, false, false)), Verdict::Denied);
        assert_eq!(verdict(&answer(false, false, true)), Verdict::Dismissed);
        assert_eq!(verdict(&answer(false, true, false)), Verdict::NoAgent);
    }

    #[test]
    fn approving_has_its_own_action() {
        assert_eq!(action_for("approve a request"), APPROVE);
        assert_eq!(action_for("widen the settings"), AUTHORIZE);
        assert_eq!(action_for("remove server 'x'"), AUTHORIZE);
    }
}
