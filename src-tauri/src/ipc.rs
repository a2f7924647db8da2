//! The window process's end of the bridge ([`postern_desk::bridge`]). Every IPC call of a
//! window goes to the resident process as it came: the command's name, the window's label
//! and the arguments object, after Tauri has checked the call against the window's capability
//! (tauri.conf.json, with the commands named in build.rs; the desk checks the window's part
//! again). The resident's replies settle the calls; its events reach the windows; its orders
//! open and close them.

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use postern_desk::bridge::{self, Show, ToDesk, ToWindows};
use postern_desk::commands::{CommandError, ErrorCode};
use postern_desk::{APPROVALS, MAIN};
use serde_json::Value;
use tauri::ipc::{Invoke, InvokeBody, InvokeError};
use tauri::{AppHandle, Emitter, Manager, Runtime};
use tokio::io::BufReader;
use tokio::sync::{mpsc, oneshot};

use crate::window;

/// The bridge's state: calls waiting for their replies, and the show orders taken.
#[derive(Debug)]
pub struct Link {
    outbox: mpsc::UnboundedSender<ToDesk>,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>,
    next: AtomicU64,
    seen: AtomicU64,
}

impl Link {
    /// A link, and the messages it sends (for [`serve`] to write).
    pub fn new() -> (Arc<Self>, mpsc::UnboundedReceiver<ToDesk>) {
        let (outbox, rx) = mpsc::unbounded_channel();
        let link = Arc::new(Self {
            outbox,
            waiting: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            seen: AtomicU64::new(0),
        });
        (link, rx)
    }

    /// Sends a window's call; the reply settles it. With the resident gone, the call is
    /// refused with `no_engine`.
    pub async fn call(&self, window: String, command: String, args: Value) -> Result<Value, Value> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        let sent = self.outbox.send(ToDesk::Call {
            id,
            window,
            command,
            args,
        });
        if sent.is_err() {
            self.lock().remove(&id);
        }
        rx.await.unwrap_or_else(|_| {
            let gone = CommandError::new(
                ErrorCode::NoEngine,
                "Postern's resident process is gone: start Postern again",
            );
            Err(serde_json::to_value(gone).unwrap_or(Value::Null))
        })
    }

    /// Tells the resident the last window closed.
    pub fn idle(&self) {
        let seen = self.seen.load(Ordering::Relaxed);
        let _ = self.outbox.send(ToDesk::Idle { seen });
    }

    fn settle(&self, id: u64, result: Result<Value, Value>) {
        if let Some(waiting) = self.lock().remove(&id) {
            let _ = waiting.send(result);
        }
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Result<Value, Value>>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Checks that the bridge comes from this process's parent, and that the parent runs the
/// resident's program beside this one (Linux; elsewhere nothing is checked): a window
/// process serves only the resident that started it.
pub fn check_parent(bridge: &UnixStream) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::io::{Error, ErrorKind};
        let refuse = |why: String| Error::new(ErrorKind::PermissionDenied, why);
        let parent = rustix::process::getppid()
            .ok_or_else(|| refuse("this process has no parent".into()))?;
        let peer = rustix::net::sockopt::socket_peercred(bridge)?;
        if peer.pid != parent {
            return Err(refuse(format!(
                "the bridge comes from process {}, not from this process's parent {}",
                peer.pid.as_raw_nonzero(),
                parent.as_raw_nonzero()
            )));
        }
        let expected = bridge::beside_this_program(bridge::RESIDENT_PROGRAM).canonicalize()?;
        let running = std::fs::read_link(format!("/proc/{}/exe", parent.as_raw_nonzero()))?;
        if running != expected {
            return Err(refuse(format!(
                "the parent runs {}, not {}",
                running.display(),
                expected.display()
            )));
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = bridge;
    Ok(())
}

/// The app's invoke handler: every call goes over the bridge.
pub fn handle<R: Runtime>(invoke: Invoke<R>) -> bool {
    let Invoke {
        message, resolver, ..
    } = invoke;
    let webview = message.webview();
    let link = Arc::clone(&webview.state::<Arc<Link>>());
    let args = match message.payload() {
        InvokeBody::Json(args) => args.clone(),
        InvokeBody::Raw(_) => Value::Null,
    };
    let window = webview.label().to_owned();
    let command = message.command().to_owned();
    resolver
        .respond_async(async move { link.call(window, command, args).await.map_err(InvokeError) });
    true
}

/// How long a new window waits for what it paints first before it is built without it (and
/// its page asks, as it always does).
const FIRST_PAINT_WAIT: Duration = Duration::from_millis(50);

/// Carries the bridge both ways on Tauri's async runtime: `outbox` to the resident, and the
/// resident's messages to the link and the windows, after the `first` show order, taken on
/// standby. Window orders are carried out one at a time, in order, on a task of their own
/// (a new window first asks the resident for what it shows, and the replies come through the
/// reader). When the resident releases this process, tells it to quit, or goes, the process
/// exits.
pub fn serve<R: Runtime>(
    app: &AppHandle<R>,
    stream: UnixStream,
    mut outbox: mpsc::UnboundedReceiver<ToDesk>,
    (seq, window): (u64, Show),
) -> std::io::Result<()> {
    stream.set_nonblocking(true)?;
    let stream = {
        let _entered = tauri::async_runtime::handle().inner().enter();
        tokio::net::UnixStream::from_std(stream)?
    };
    let (read, mut write) = stream.into_split();
    tauri::async_runtime::spawn(async move {
        while let Some(message) = outbox.recv().await {
            if let Err(err) = bridge::write(&mut write, &message).await {
                tracing::warn!("the bridge to the resident process closed: {err}");
                return;
            }
        }
    });
    let (orders, mut queue) = mpsc::unbounded_channel();
    let _ = orders.send(Order::Show(seq, window));
    let windows = app.clone();
    tauri::async_runtime::spawn(async move {
        while let Some(order) = queue.recv().await {
            carry_out(&windows, order).await;
        }
    });
    let app = app.clone();
    tauri::async_runtime::spawn(async move {
        let link = Arc::clone(app.state::<Arc<Link>>().inner());
        let mut reader = BufReader::new(read);
        let mut line = Vec::new();
        loop {
            match bridge::read::<ToWindows>(&mut reader, &mut line).await {
                Ok(Some(ToWindows::Release | ToWindows::Quit)) | Ok(None) => break,
                Ok(Some(ToWindows::Reply { id, result })) => link.settle(id, result),
                Ok(Some(ToWindows::Emit { event, to, payload })) => {
                    let sent = match to {
                        Some(label) => app.emit_to(label.as_str(), &event, payload),
                        None => app.emit(&event, payload),
                    };
                    if let Err(err) = sent {
                        tracing::debug!("cannot emit {event}: {err}");
                    }
                }
                Ok(Some(ToWindows::Show { seq, window })) => {
                    let _ = orders.send(Order::Show(seq, window));
                }
                Ok(Some(ToWindows::CloseApprovals)) => {
                    let _ = orders.send(Order::CloseApprovals);
                }
                Err(err) => {
                    tracing::warn!("the resident process sent what is not a message: {err}");
                    break;
                }
            }
        }
        app.exit(0);
    });
    Ok(())
}

/// A window order from the resident, carried out in turn.
enum Order {
    /// Show the window, the order's number.
    Show(u64, Show),
    CloseApprovals,
}

/// Carries out one window order.
async fn carry_out<R: Runtime>(app: &AppHandle<R>, order: Order) {
    let link = Arc::clone(app.state::<Arc<Link>>().inner());
    match order {
        Order::Show(seq, window) => {
            match window {
                Show::Main => {
                    let status = match window::is_open(app, MAIN) {
                        true => None,
                        false => first_paint(&link, MAIN, &["status"]).await,
                    };
                    let status = status.and_then(|mut replies| replies.pop());
                    if let Err(err) = window::show(app, status.as_ref()) {
                        tracing::warn!("cannot show the window: {err}");
                    }
                }
                Show::Approvals { focus } => {
                    let initial = match window::is_open(app, APPROVALS) {
                        true => None,
                        // The queue and whether a plain Allow needs the passphrase. Not the request
                        // chosen in the tray: it is taken once, and a reply that came after the
                        // wait would lose it; the page asks for it as it always did.
                        false => first_paint(&link, APPROVALS, &["approvals", "clicks_until"])
                            .await
                            .map(|replies| {
                                let [approvals, clicks_until] =
                                    <[Value; 2]>::try_from(replies).unwrap_or_default();
                                serde_json::json!({
                                    "approvals": approvals,
                                    "clicksUntil": clicks_until,
                                })
                            }),
                    };
                    window::open_approvals(app, focus, initial.as_ref());
                }
            }
            // Counted once the window is there: an idle message sent before it does not count
            // it, and the resident, which sent it, does not release this process then.
            link.seen.fetch_max(seq, Ordering::Relaxed);
        }
        Order::CloseApprovals => window::close_approvals(app),
    }
}

/// What a new window labelled `window` paints first: the replies to `commands`, asked together,
/// or nothing when one fails or they take longer than [`FIRST_PAINT_WAIT`].
async fn first_paint(link: &Arc<Link>, window: &str, commands: &[&str]) -> Option<Vec<Value>> {
    let asked: Vec<_> = commands
        .iter()
        .map(|command| {
            let (link, window, command) =
                (Arc::clone(link), window.to_owned(), command.to_string());
            tauri::async_runtime::spawn(async move {
                link.call(window, command, Value::Object(Default::default()))
                    .await
            })
        })
        .collect();
    let replies = async {
        let mut replies = Vec::with_capacity(asked.len());
        for reply in asked {
            replies.push(reply.await.ok()?.ok()?);
        }
        Some(replies)
    };
    tokio::time::timeout(FIRST_PAINT_WAIT, replies).await.ok()?
}

#[cfg(test)]
mod tests {
    use postern_desk::parts::{APPROVAL_WINDOW, STATUS_WINDOW};
    use serde_json::Value;

    /// The `allow-<command>` permissions the capability `identifier` grants, as command names.
    fn granted(config: &Value, identifier: &str) -> Vec<String> {
        let capabilities = config["app"]["security"]["capabilities"]
            .as_array()
            .expect("capabilities");
        let capability = capabilities
            .iter()
            .find(|c| c["identifier"] == identifier)
            .unwrap_or_else(|| panic!("no capability {identifier}"));
        let mut commands: Vec<String> = capability["permissions"]
            .as_array()
            .expect("permissions")
            .iter()
            .filter_map(|p| p.as_str()?.strip_prefix("allow-"))
            .map(|p| p.replace('-', "_"))
            .collect();
        commands.sort();
        commands
    }

    fn sorted(list: &[&str]) -> Vec<String> {
        let mut out: Vec<String> = list.iter().map(|c| (*c).to_owned()).collect();
        out.sort();
        out
    }

    /// A bridge made by anyone but this process's parent (here: this process itself, as an
    /// agent handing `postern-app --bridge-stdin` a socket of its own would) is refused.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_bridge_that_is_not_the_parent_s_is_refused() {
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let err = super::check_parent(&ours).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::PermissionDenied);
        assert!(
            err.to_string().contains("not from this process's parent"),
            "{err}"
        );
    }

    #[test]
    fn each_window_s_capability_grants_exactly_the_desk_s_list() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tauri.conf.json");
        let config: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        assert_eq!(granted(&config, "status-window"), sorted(STATUS_WINDOW));
        assert_eq!(granted(&config, "approval-window"), sorted(APPROVAL_WINDOW));
    }
}
