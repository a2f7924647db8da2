//! Permissions from the window: every live grant by agent run and the every-use settings
//! (`postern_engine::permissions`); revoking one grant, or every grant of an agent run; and
//! per-call approval on or off. Revoking and turning per-call approval on only narrow
//! authority and need no proof; turning it off widens, and carries the person's proof, as
//! `postern every-use off` does.

use postern_domain::decision::{EveryUse, EveryUseSetting, SettingTarget};
use postern_domain::{AgentRun, AnswerChannel};
use postern_engine::answer::{ControlAnswer, ControlCommand};
use postern_engine::permissions::{Permissions, RunKey};

use std::sync::Arc;

use crate::Desk;
use crate::commands::{CommandError, ProofInput, request, unexpected};

/// Every live grant by agent run, and where every call asks.
pub fn permissions(desk: &Desk) -> Result<Permissions, CommandError> {
    desk.shell
        .with_engine(|engine| engine.permissions())
        .ok_or_else(CommandError::no_engine)
}

/// Ends a grant now. Returns whether it was live (it may have ended meanwhile).
pub async fn revoke_grant(desk: &Arc<Desk>, id: String) -> Result<bool, CommandError> {
    let command = ControlCommand::Revoke { grant: id };
    match request(desk, command, None, AnswerChannel::Window).await? {
        ControlAnswer::Revoke { changed, .. } => Ok(changed),
        other => Err(unexpected(&other)),
    }
}

/// Ends every grant of one agent run now. Returns the ids of those that were live.
pub async fn revoke_run(desk: &Arc<Desk>, run: RunKey) -> Result<Vec<String>, CommandError> {
    let run = AgentRun {
        pid: run.pid,
        start_time: run.start_time,
    };
    match request(
        desk,
        ControlCommand::RevokeRun { run },
        None,
        AnswerChannel::Window,
    )
    .await?
    {
        ControlAnswer::RevokeRun { revoked } => Ok(revoked),
        other => Err(unexpected(&other)),
    }
}

/// Turns per-call approval on (no proof) or off (with the person's proof) for a tool, a
/// server or a credential (`target` is an `EveryUseTarget`). Returns a warning when it was
/// turned on for a tool the engine cannot vouch for (it is on all the same).
pub async fn set_every_use(
    desk: &Arc<Desk>,
    target: SettingTarget,
    on: bool,
    proof: Option<ProofInput>,
) -> Result<Option<String>, CommandError> {
    let level = if on { EveryUse::Confirm } else { EveryUse::Off };
    let command = ControlCommand::EveryUse {
        set: Some(EveryUseSetting { target, level }),
    };
    match request(desk, command, proof, AnswerChannel::Window).await? {
        ControlAnswer::EveryUse { warning, .. } => Ok(warning),
        other => Err(unexpected(&other)),
    }
}

#[cfg(test)]
mod tests {
    use postern_domain::decision::{AskFor, GrantChoice, Reply};
    use postern_gateway::authorize::Verdict;
    use serde_json::{Value, json};
    use tokio::sync::oneshot::error::TryRecvError;

    use crate::testing::{ask, invoke, running_desk, stop};

    const PROOF: &str = "postern-app-tests";

    /// Approves the one open request with `choice`, as the approval window does.
    fn approve(desk: &std::sync::Arc<crate::Desk>, choice: GrantChoice) {
        let listed = invoke(desk, "approvals", json!({})).unwrap();
        let id = listed[0]["card"]["id"].clone();
        let reply = serde_json::to_value(Reply::Approve {
            choice: Some(choice),
        })
        .unwrap();
        invoke(
            desk,
            "answer",
            json!({"id": id, "reply": reply, "proof": {"passphrase": PROOF}}),
        )
        .unwrap();
    }

    #[test]
    fn a_listed_grant_revoked_from_the_window_makes_the_next_identical_call_ask_again() {
        let (desk, _surface, _home) = running_desk();
        let mut first = ask(&desk, "now");
        approve(&desk, GrantChoice::ForMinutes { minutes: 15 });
        assert!(matches!(first.try_recv(), Ok(Verdict::Allow(_))));
        // The grant covers the same call again: nobody is asked.
        assert!(matches!(
            ask(&desk, "now").try_recv(),
            Ok(Verdict::Allow(_))
        ));

        let page = invoke(&desk, "permissions", json!({})).unwrap();
        let [run] = page["runs"].as_array().unwrap().as_slice() else {
            panic!("one agent run: {page}")
        };
        assert_eq!(run["run"]["pid"], std::process::id());
        let [grant] = run["grants"].as_array().unwrap().as_slice() else {
            panic!("one grant: {page}")
        };
        assert_eq!(grant["server"], "clock");
        assert_eq!(grant["tools"], json!({"kind": "named", "names": ["now"]}));
        assert_eq!(grant["end"]["kind"], "until");
        let id = grant["id"].clone();

        assert_eq!(
            invoke(&desk, "revoke_grant", json!({"id": id})).unwrap(),
            json!(true)
        );
        assert_eq!(
            invoke(&desk, "permissions", json!({})).unwrap()["runs"],
            json!([])
        );
        assert_eq!(
            invoke(&desk, "revoke_grant", json!({"id": id})).unwrap(),
            json!(false),
            "ended already"
        );
        let bad = invoke(&desk, "revoke_grant", json!({"id": "x"})).unwrap_err();
        assert_eq!(bad["code"], "bad_request", "{bad}");

        // The agent's next identical call waits on a human again.
        let mut again = ask(&desk, "now");
        assert_eq!(again.try_recv(), Err(TryRecvError::Empty));
        let listed = invoke(&desk, "approvals", json!({})).unwrap();
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
        let what: AskFor = serde_json::from_value(listed[0]["card"]["what"].clone()).unwrap();
        assert_eq!(
            what,
            AskFor::Call,
            "the run stays admitted: only the call is asked"
        );
        stop(&desk);
    }

    #[test]
    fn revoke_all_for_an_agent_ends_every_grant_of_its_run() {
        let (desk, _surface, _home) = running_desk();
        let _first = ask(&desk, "now");
        approve(&desk, GrantChoice::UntilRunEnds);
        let page = invoke(&desk, "permissions", json!({})).unwrap();
        let run = page["runs"][0]["run"].clone();
        let id = page["runs"][0]["grants"][0]["id"].clone();
        assert_eq!(
            page["runs"][0]["grants"][0]["end"],
            json!({"kind": "runEnds"})
        );

        let revoked = invoke(&desk, "revoke_run", json!({"run": run})).unwrap();
        assert_eq!(revoked, json!([id]));
        assert_eq!(
            invoke(&desk, "permissions", json!({})).unwrap()["runs"],
            json!([])
        );
        stop(&desk);
    }

    #[test]
    fn every_use_goes_on_without_proof_and_off_only_with_it() {
        let (desk, _surface, _home) = running_desk();
        let target = json!({"on": "server", "server": "postern"});

        let warning = invoke(
            &desk,
            "set_every_use",
            json!({"target": target, "on": true}),
        )
        .unwrap();
        assert_eq!(warning, Value::Null);
        let listed = invoke(&desk, "permissions", json!({})).unwrap()["everyUse"].clone();
        assert_eq!(listed, json!([target]));

        let unproven = invoke(
            &desk,
            "set_every_use",
            json!({"target": target, "on": false}),
        )
        .unwrap_err();
        assert_eq!(unproven["code"], "proof_required", "{unproven}");
        assert_eq!(
            invoke(&desk, "permissions", json!({})).unwrap()["everyUse"],
            json!([target]),
            "still on"
        );
        invoke(
            &desk,
            "set_every_use",
            json!({"target": target, "on": false, "proof": {"passphrase": PROOF}}),
        )
        .unwrap();
        assert_eq!(
            invoke(&desk, "permissions", json!({})).unwrap()["everyUse"],
            json!([])
        );

        // A credential added with every use on: the rule is on the page, and once removed
        // here the Credentials view says so too.
        invoke(
            &desk,
            "add_credential",
            json!({"credential": {"name": "api", "injection": {"kind": "env", "var": "API_TOKEN"}, "hosts": [], "everyUse": true, "value": "v"}, "proof": {"passphrase": PROOF}}),
        )
        .unwrap();
        let rule = json!({"on": "credential", "name": "api"});
        assert_eq!(
            invoke(&desk, "permissions", json!({})).unwrap()["everyUse"],
            json!([rule])
        );
        invoke(
            &desk,
            "set_every_use",
            json!({"target": rule, "on": false, "proof": {"passphrase": PROOF}}),
        )
        .unwrap();
        assert_eq!(
            invoke(&desk, "credentials", json!({})).unwrap()[0]["everyUse"],
            false
        );

        let nowhere = json!({"on": "server", "server": "nowhere"});
        let refused = invoke(
            &desk,
            "set_every_use",
            json!({"target": nowhere, "on": true}),
        )
        .unwrap_err();
        assert_eq!(refused["code"], "settings_refused", "{refused}");
        stop(&desk);
    }
}
