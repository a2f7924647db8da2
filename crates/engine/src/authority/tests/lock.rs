//! The vault lock: a human's lock refuses the waiting calls (before any server holding a
//! credential stops) and ends grants and admissions; the OS reporting that the user stepped
//! away locks it too.

use super::*;

#[tokio::test]
async fn a_lock_refuses_the_waiting_call_ends_grants_and_admissions() {
    let gate = Gate::new();
    let a = launch(1, b"v1");
    let grant = gate.approve(deploy(&a), GrantChoice::UntilRunEnds);
    // The run grant covers `deploy` only: `status` waits on a call card.
    let (card, mut waiting) = gate.carded(call_to("status", &a, &a));
    assert_eq!(card.what, AskFor::Call);

    assert!(gate.authority.lock("test"));
    assert!(!gate.authority.lock("again"), "already locked");
    assert_eq!(gate.authority.vault(), VaultState::Locked);
    let denial = denied(waiting.try_recv().expect("answered by the lock"));
    assert_eq!(denial.code, DenyCode::VaultLocked);
    assert!(gate.authority.approvals().is_empty());
    assert!(gate.authority.grants().is_empty());
    let refused = denied(gate.decided_now(deploy(&a)));
    assert_eq!(refused.code, DenyCode::VaultLocked);
    let late = gate.authority.answer(
        card.id,
        Reply::Deny,
        Some(&gate.proven),
        postern_domain::AnswerChannel::Window,
    );
    assert_eq!(late, Err(AnswerError::NotOpen(card.id.to_string())));

    assert!(gate.authority.unlock(gate.prove()).expect("unlocked"));
    assert_eq!(gate.authority.vault(), VaultState::Ready);
    let (again, _rx) = gate.carded(deploy(&a));
    assert_eq!(
        again.what,
        AskFor::SessionAndCall,
        "the admission ended too"
    );

    let events = gate.events();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    let at = |kind: &str| kinds.iter().rposition(|k| *k == kind).expect(kind);
    assert!(at("vault_locked") < at("vault_unlocked"), "{kinds:?}");
    let ended = of_type(&events, "grant_ended");
    assert_eq!(ended.len(), 1, "{events:#?}");
    assert_eq!(ended[0]["grant"], grant.to_string());
    assert_eq!(ended[0]["reason"], "vault locked");
    let expired = of_type(&events, "approval_expired");
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0]["approval"], card.id.to_string());
    assert_eq!(expired[0]["code"], "vault_locked");
}

/// The lock answers the calls waiting on a human before it has the sessions stop the servers
/// holding credentials: a session that sees its server stop finds their verdicts given
/// (withdrawing such a call says it was decided), so it answers them with the verdict rather
/// than as calls that may have taken effect.
#[tokio::test]
async fn a_lock_answers_waiting_calls_before_it_stops_servers_holding_credentials() {
    let gate = Gate::new();
    let call = deploy(&launch(1, b"v1"));
    let id = call.request.call;
    let mut told_before = gate.commands.subscribe();
    let mut told_after = gate.commands.subscribe();
    let (tx, rx) = std::sync::mpsc::channel();
    gate.authority.authorize(
        call,
        Box::new(move |verdict| {
            let _ = tx.send((verdict, told_before.try_recv().ok()));
        }),
    );
    assert_eq!(gate.authority.approvals().len(), 1, "waits on a card");

    assert!(gate.authority.lock("test"));
    let (verdict, told) = rx.try_recv().expect("answered by the lock");
    assert_eq!(denied(verdict).code, DenyCode::VaultLocked);
    assert_eq!(
        told, None,
        "no server was stopped before the call was answered"
    );
    assert_eq!(told_after.try_recv().ok(), Some(Command::DropCredentials));
    assert_eq!(
        gate.authority.withdraw(SESSION, id, Withdrawn::EpochEnded),
        Withdrawal::AlreadyDecided
    );
}

/// The OS says the user stepped away (a private D-Bus daemon plays the session bus): the
/// screensaver activating, a session lock, or the machine preparing to sleep each lock the
/// vault; waking up and the screensaver deactivating do not unlock it.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn the_vault_locks_when_the_os_reports_the_user_stepped_away() {
    use std::io::BufRead;
    use std::sync::atomic::AtomicBool;

    /// Kills the private bus however the test ends (a panic included).
    struct Bus(std::process::Child);
    impl Drop for Bus {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut daemon = Bus(std::process::Command::new("dbus-daemon")
        .args(["--session", "--nofork", "--print-address=1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("dbus-daemon (package dbus) is needed for this test"));
    let mut address = String::new();
    std::io::BufReader::new(daemon.0.stdout.take().expect("stdout"))
        .read_line(&mut address)
        .expect("the bus address");
    let address = address.trim().to_owned();
    let connect = |address: &str| {
        let mut channel = dbus::channel::Channel::open_private(address).expect("connect");
        channel.register().expect("hello");
        dbus::blocking::Connection::from(channel)
    };

    let gate = Gate::new();
    let stop = Arc::new(AtomicBool::new(false));
    let listener = {
        let (authority, stop, address) =
            (gate.authority.clone(), Arc::clone(&stop), address.clone());
        std::thread::spawn(move || {
            let conn = connect(&address);
            crate::os_lock::linux::listen(&conn, &authority, &stop).expect("listen");
        })
    };
    let sender = connect(&address);
    let emit = |interface: &str, member: &str, arg: Option<bool>| {
        let mut msg =
            dbus::Message::new_signal("/org/example/Test", interface, member).expect("signal");
        if let Some(arg) = arg {
            msg = msg.append1(arg);
        }
        dbus::channel::Sender::send(&sender, msg).expect("send");
        sender.channel().flush();
    };
    // The listener subscribes on its own thread: until it has, a signal reaches nobody, so
    // the step-away signal is sent again until the vault locks.
    let away_until_locked = |interface: &str, member: &str, arg: Option<bool>| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while gate.authority.vault() != VaultState::Locked {
            assert!(
                std::time::Instant::now() < deadline,
                "the vault never locked on {interface}.{member}"
            );
            emit(interface, member, arg);
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    for (interface, away, back) in [
        (
            "org.freedesktop.ScreenSaver",
            ("ActiveChanged", Some(true)),
            ("ActiveChanged", Some(false)),
        ),
        (
            "org.freedesktop.login1.Session",
            ("Lock", None),
            ("Unlock", None),
        ),
        (
            "org.freedesktop.login1.Manager",
            ("PrepareForSleep", Some(true)),
            ("PrepareForSleep", Some(false)),
        ),
    ] {
        assert_eq!(gate.authority.vault(), VaultState::Ready);
        away_until_locked(interface, away.0, away.1);
        // Coming back does nothing: only a human unlocks.
        emit(interface, back.0, back.1);
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            gate.authority.vault(),
            VaultState::Locked,
            "{interface} {}",
            back.0
        );
        assert!(gate.authority.unlock(gate.prove()).expect("unlocked"));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    listener.join().expect("listener");
    drop(daemon);
}
