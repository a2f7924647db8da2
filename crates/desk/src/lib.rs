//! Postern's desktop app, minus its webviews: the engine the app hosts ([`shell`]), what its
//! windows may ask of it ([`Desk::call`], the IPC commands), and the approval window,
//! notifications and tray menu it keeps in step with the gate. Every rule lives in the engine
//! crates; this crate is wiring, and it links no UI toolkit: whatever draws the windows and the
//! tray (the Tauri shell in `src-tauri`) implements [`Surface`] and hands each window's IPC
//! call to [`Desk::call`].
//!
//! - [`shell`]: the engine this app owns (or why it has none).
//! - [`view`]: what the status window is told about the engine.
//! - [`approvals`]: open requests as the approval window, notifications and tray show them.
//! - [`commands`]: the gate's commands, and [`servers`], [`credentials`], [`journal`] (the
//!   journals and the audit log), [`permissions`] (grants and every-use settings).
//! - [`tray`]: the tray icon's looks and its menu, as data.
//! - [`bridge`], [`Windows`]: the resident process's link to the window process.
//! - [`bindings`]: the TypeScript declarations the UI imports; [`sample`]: the approval card
//!   the UI's tests read.

pub mod approvals;
pub mod bindings;
pub mod bridge;
pub mod commands;
pub mod credentials;
mod desk;
pub mod instance;
pub mod journal;
/// Which IPC commands each window may call (one list for the desk and the build script).
pub mod parts;
pub mod permissions;
pub mod sample;
pub mod servers;
pub mod shell;
mod surface;
#[cfg(test)]
mod testing;
pub mod tray;
pub mod view;
mod windows;

pub use desk::{Desk, allowed};
pub use shell::Shell;
pub use surface::{APPROVALS, MAIN, Surface};
pub use view::{EngineView, Unavailable};
pub use windows::Windows;

/// Logs to stderr, `RUST_LOG` style (default `info`), in colour only on a terminal.
pub fn init_tracing() {
    use std::io::IsTerminal;
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
