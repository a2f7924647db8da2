//! Postern's window process: the status window and the approval window, drawn by Tauri. It
//! holds no engine and no tray: those live in the app's resident process (`postern-desk`,
//! which never links WebKit), and this process runs only while a window is open. Every IPC
//! call of a window goes to the resident over the bridge as it came, and the resident says
//! which windows to open and close and what changed ([`postern_desk::bridge`]).
//!
//! Started with no arguments (the app's icon), it becomes the resident process (`exec
//! postern-desk --show`, beside it), which starts a window process for the status window.
//! Started by the resident (`--bridge-stdin`, the bridge as its standard input), it checks that
//! its parent is that resident and waits on standby for its first show order before it starts
//! GTK and WebKit (its libraries are loaded and linked by then: the window opens sooner).
//!
//! - [`ipc`]: the bridge: calls out, replies, events and orders in.
//! - [`standby`]: what the process gives back while it waits for its first window.
//! - [`window`]: the two windows.

pub mod ipc;
pub mod standby;
pub mod window;

use std::sync::Arc;

use postern_desk::bridge::{self, BRIDGE_ARG, RESIDENT_PROGRAM, SHOW_ARG};
use tauri::{AppHandle, Manager, RunEvent, Runtime};

/// Builds and runs the window process until its last window closes (or the app quits).
pub fn run() {
    // Passphrases are typed here on their way to the engine: other processes of the user
    // stay out.
    postern_engine::harden::protect_process();
    postern_desk::init_tracing();
    if !std::env::args_os().skip(1).any(|a| a == BRIDGE_ARG) {
        become_resident();
    }
    let stream = bridge::take_stdin()
        .and_then(|stream| ipc::check_parent(&stream).map(|()| stream))
        .unwrap_or_else(|err| {
            tracing::error!("cannot take the bridge from Postern's resident process: {err}");
            std::process::exit(1);
        });
    let on_standby = !standby::order_waiting(&stream);
    if on_standby {
        let given = standby::give_back_file_pages();
        tracing::debug!(
            bytes = given,
            "on standby: gave back the libraries' file pages"
        );
    }
    let first = match bridge::wait_for_show(&stream) {
        Ok(Some(first)) => first,
        Ok(None) => std::process::exit(0),
        Err(err) => {
            tracing::error!("the resident process sent what is not a show order: {err}");
            std::process::exit(1);
        }
    };
    // Ended without a word, this process has its window given to a new one, which loads the
    // libraries as they are now.
    if on_standby && standby::libraries_replaced() {
        tracing::info!("the app's libraries were replaced while this window process waited");
        std::process::exit(0);
    }
    let (link, outbox) = ipc::Link::new();
    let app = builder(tauri::Builder::default(), Arc::clone(&link))
        .setup(move |app| {
            ipc::serve(app.handle(), stream, outbox, first)?;
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

/// Runs the resident process in this one's place: `postern-desk --show`, beside this program.
fn become_resident() -> ! {
    use std::os::unix::process::CommandExt;
    let exe = bridge::beside_this_program(RESIDENT_PROGRAM);
    let err = std::process::Command::new(&exe).arg(SHOW_ARG).exec();
    tracing::error!(
        "cannot start {} ({err}); build it with `cargo build -p postern-desk`",
        exe.display()
    );
    std::process::exit(1);
}

/// When the last window closes, the process tells the resident it is idle and exits once
/// released (an order on its way opens a window instead); on macOS a click on the Dock icon
/// shows the status window.
fn on_run_event<R: Runtime>(app: &AppHandle<R>, event: RunEvent) {
    match event {
        RunEvent::ExitRequested {
            code: None, api, ..
        } => {
            api.prevent_exit();
            // A window an order opened meanwhile keeps the process.
            if app.webview_windows().is_empty() {
                app.state::<Arc<ipc::Link>>().idle();
            }
        }
        #[cfg(target_os = "macos")]
        RunEvent::Reopen { .. } => {
            if let Err(err) = window::show(app, None) {
                tracing::warn!("cannot show the window: {err}");
            }
        }
        _ => {}
    }
}
