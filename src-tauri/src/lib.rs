//! Postern's window process: the status window and the approval window, drawn by Tauri. It
//! holds no engine and no tray: those live in the app's resident process (`postern-desk`,
//! which never links WebKit), and this process runs only while a window is open. Every IPC
//! call of a window goes to the resident over the bridge as it came, and the resident says
//! which windows to open and close and what changed ([`postern_desk::bridge`]).
//!
//! Started with no arguments (the app's icon, `scripts/run-app.sh`), it starts the resident
//! process with a bridge as its standard input and shows the status window; started by the
//! resident (`--bridge-stdin`), it waits for the resident's orders.
//!
//! - [`ipc`]: the bridge: calls out, replies, events and orders in.
//! - [`window`]: the two windows.

pub mod ipc;
pub mod window;

use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::sync::Arc;

use postern_desk::bridge::{self, BRIDGE_ARG};
use tauri::{AppHandle, Manager, RunEvent, Runtime};

/// Builds and runs the window process until its last window closes (or the app quits).
pub fn run() {
    // Passphrases are typed here on their way to the engine: other processes of the user
    // stay out.
    postern_engine::harden::protect_process();
    postern_desk::init_tracing();
    let started_by_resident = std::env::args_os().skip(1).any(|a| a == BRIDGE_ARG);
    let stream = if started_by_resident {
        bridge::take_stdin()
    } else {
        start_resident()
    };
    let stream = stream.unwrap_or_else(|err| {
        tracing::error!("cannot reach Postern's resident process: {err}");
        std::process::exit(1);
    });
    let (link, outbox) = ipc::Link::new();
    let app = builder(tauri::Builder::default(), Arc::clone(&link))
        .setup(move |app| {
            ipc::serve(app.handle(), stream, outbox)?;
            if !started_by_resident {
                window::show(app.handle())?;
            }
            Ok(())
        })
        .build(tauri::generate_context!())
        .unwrap_or_else(|err| {
            tracing::error!("cannot start the Postern window: {err}");
            std::process::exit(1);
        });
    app.run(on_run_event);
}

/// The parts of the app that tests share with [`run`]: the bridge's state and IPC.
pub fn builder<R: Runtime>(builder: tauri::Builder<R>, link: Arc<ipc::Link>) -> tauri::Builder<R> {
    builder.manage(link).invoke_handler(ipc::handle)
}

/// Starts the resident process (`postern-desk`, beside this program) with one end of a new
/// bridge as its standard input; returns the other end. It outlives this process.
fn start_resident() -> std::io::Result<UnixStream> {
    let exe = std::env::current_exe()?.with_file_name(RESIDENT);
    let (ours, theirs) = UnixStream::pair()?;
    std::process::Command::new(&exe)
        .arg(BRIDGE_ARG)
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
        .spawn()
        .map_err(|err| {
            std::io::Error::new(
                err.kind(),
                format!(
                    "cannot start {} ({err}); build it with `cargo build -p postern-desk`",
                    exe.display()
                ),
            )
        })?;
    Ok(ours)
}

/// The resident process's program.
const RESIDENT: &str = "postern-desk";

/// When the last window closes, the process tells the resident it is idle and exits once
/// released (an order on its way opens a window instead); on macOS a click on the Dock icon
/// shows the status window.
fn on_run_event<R: Runtime>(app: &AppHandle<R>, event: RunEvent) {
    match event {
        RunEvent::ExitRequested {
            code: None, api, ..
        } => {
            api.prevent_exit();
            app.state::<Arc<ipc::Link>>().idle();
        }
        #[cfg(target_os = "macos")]
        RunEvent::Reopen { .. } => {
            if let Err(err) = window::show(app) {
                tracing::warn!("cannot show the window: {err}");
            }
        }
        _ => {}
    }
}
