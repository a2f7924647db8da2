//! `postern-app`: the Postern desktop app.

// No console window next to the app on Windows release builds.
#![cfg_attr(not(debug_assertions), windows_subsystem = "windows")]

fn main() {
    postern_app::run();
}
