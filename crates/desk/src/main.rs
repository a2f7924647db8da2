//! `postern-desk`: the app's resident process. It hosts the engine, keeps the tray icon and
//! its menu, and shows notifications; it never links WebKit, so the app weighs little while
//! no window is open. Windows are drawn by `postern-app`, the window process, which this
//! process starts for a window when none runs and which exits when its last window closes
//! ([`postern_desk::Windows`]).
//!
//! `postern-desk --show` also shows the status window at start: that is what `postern-app` run
//! with no arguments (the app's icon) becomes, and what `scripts/run-app.sh` runs. Plain
//! `postern-desk` keeps to the tray until a window is asked for. This process never takes a
//! bridge from whoever started it: every bridge is one it made for a window process it
//! started itself.

use std::ffi::OsString;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use postern_desk::bridge::{self, SHOW_ARG, Show, ToWindows, WINDOW_PROGRAM};
use postern_desk::tray::{Entry, MenuCommand, Rgba, Shown, TEMPLATE, TRAY_ID, image};
use postern_desk::{Desk, Surface, Windows, instance};
use tao::event_loop::{ControlFlow, EventLoopBuilder, EventLoopProxy};
use tray_icon::menu::{IsMenuItem, Menu, MenuEvent, MenuItem, PredefinedMenuItem, Submenu};
use tray_icon::{Icon, TrayIcon, TrayIconBuilder};

/// What the desk's threads ask of the event loop (the tray lives on its thread).
#[derive(Debug)]
enum UserEvent {
    Tray(Box<Shown>),
    Menu(String),
    Exit,
}

fn main() -> ExitCode {
    let show = std::env::args_os().skip(1).any(|a| a == SHOW_ARG);
    // GTK probes GL when it opens the display, which maps Mesa (tens of MiB) into a process
    // that draws a tray icon only. The variable must be set before GTK starts and before any
    // thread: the process runs itself again with it set (the windows get it back as it was).
    #[cfg(not(target_os = "macos"))]
    if std::env::var_os(QUIET_GL).is_none() {
        return again_without_gl();
    }
    // The engine holds the vault key while unlocked: other processes of the user stay out.
    postern_engine::harden::protect_process();
    postern_desk::init_tracing();

    // A resident already serving this home shows its window, and this process is not needed
    // (asked before GTK or the engine start). The resident is whoever holds the home's
    // resident lock, kept until this process ends.
    let home = postern_engine::Home::resolve(None);
    let show_socket = home
        .as_ref()
        .ok()
        .map(|home| home.run_dir().join(instance::SOCKET));
    let _resident = match (&home, &show_socket) {
        (Ok(home), Some(path)) => match instance::claim(&home.run_dir()) {
            Ok(Some(lock)) => Some(lock),
            Ok(None) => {
                return match instance::ask_to_show_within(path, Duration::from_secs(10)) {
                    Ok(true) => {
                        tracing::info!(
                            "Postern already runs for this home: its window was asked to open"
                        );
                        ExitCode::SUCCESS
                    }
                    Ok(false) => {
                        tracing::error!(
                            "another Postern holds this home but does not answer; is it stopped?"
                        );
                        ExitCode::FAILURE
                    }
                    Err(err) => {
                        tracing::error!("another Postern holds this home; cannot reach it: {err}");
                        ExitCode::FAILURE
                    }
                };
            }
            Err(err) => {
                tracing::warn!("cannot tell whether Postern already runs for this home: {err}");
                None
            }
        },
        _ => None,
    };

    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!("cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };

    #[cfg_attr(not(target_os = "macos"), allow(unused_mut))]
    let mut event_loop = EventLoopBuilder::<UserEvent>::with_user_event().build();
    // A menu-bar item, no Dock icon: the window process has one while a window is open.
    #[cfg(target_os = "macos")]
    {
        use tao::platform::macos::{ActivationPolicy, EventLoopExtMacOS};
        event_loop.set_activation_policy(ActivationPolicy::Accessory);
    }
    let proxy = event_loop.create_proxy();
    let windows = Windows::new(
        bridge::beside_this_program(WINDOW_PROGRAM),
        restored_env(),
        runtime.handle().clone(),
    );
    let surface = Arc::new(ResidentSurface {
        windows: Arc::clone(&windows),
        proxy: Mutex::new(proxy.clone()),
    });
    let desk = Desk::new(surface, runtime.handle().clone());
    windows.bind(&desk);
    {
        let proxy = Mutex::new(proxy.clone());
        MenuEvent::set_event_handler(Some(move |event: MenuEvent| {
            let _ = lock(&proxy).send_event(UserEvent::Menu(event.id.0));
        }));
    }
    if let Some(path) = &show_socket {
        let windows = Arc::clone(&windows);
        if let Err(err) = instance::listen(path, runtime.handle(), move || windows.show(Show::Main))
        {
            tracing::warn!("a second start of Postern will not find this one: {err}");
        }
    }
    if show {
        windows.show(Show::Main);
    }
    stop_on_signals(&desk, &runtime);
    desk.start(home);
    windows.standby();

    let tray = match create_tray() {
        Ok(tray) => Some(tray),
        Err(err) => {
            tracing::warn!("no tray icon: {err}");
            None
        }
    };
    let _runtime = runtime;
    event_loop.run(move |event, _, flow| {
        *flow = ControlFlow::Wait;
        if let tao::event::Event::UserEvent(event) = event {
            match event {
                UserEvent::Tray(shown) => {
                    if let Some(tray) = &tray {
                        set_tray(tray, &shown);
                    }
                }
                UserEvent::Menu(id) => desk.menu_click(&id),
                UserEvent::Exit => *flow = ControlFlow::Exit,
            }
        }
    })
}

/// Set (to anything) by the process for itself when it runs itself again with GL off.
const QUIET_GL: &str = "POSTERN_DESK_GL_OFF";

#[cfg(not(target_os = "macos"))]
fn again_without_gl() -> ExitCode {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(err) => {
            eprintln!(
                "{}: cannot find its own program: {err}",
                bridge::RESIDENT_PROGRAM
            );
            return ExitCode::FAILURE;
        }
    };
    let mut command = std::process::Command::new(exe);
    command.args(std::env::args_os().skip(1));
    command.env(QUIET_GL, std::env::var_os("GDK_GL").unwrap_or_default());
    command.env("GDK_GL", "disable");
    let err = command.exec();
    eprintln!(
        "{}: cannot run itself again: {err}",
        bridge::RESIDENT_PROGRAM
    );
    ExitCode::FAILURE
}

/// The variables this process changed for itself, as the windows get them: `GDK_GL` as it
/// was (the marker holds it; empty: unset), the marker gone. A window draws with GL as the
/// desktop allows: WebKit may show its frames through GTK's GL.
fn restored_env() -> Vec<(String, Option<OsString>)> {
    let was = std::env::var_os(QUIET_GL).filter(|v| !v.is_empty());
    vec![("GDK_GL".into(), was), (QUIET_GL.into(), None)]
}

/// SIGTERM, SIGINT and SIGHUP (the terminal it was started from closed) stop the engine
/// before the process ends, as Quit does.
fn stop_on_signals(desk: &Arc<Desk>, runtime: &tokio::runtime::Runtime) {
    let desk = Arc::clone(desk);
    runtime.spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
        }
        tracing::info!("signalled: stopping");
        desk.quit().await;
    });
}

/// The desk's surface in this process: windows through the window process, the tray on the
/// event loop's thread, notifications straight to the desktop's service.
#[derive(Debug)]
struct ResidentSurface {
    windows: Arc<Windows>,
    proxy: Mutex<EventLoopProxy<UserEvent>>,
}

impl ResidentSurface {
    fn send(&self, event: UserEvent) {
        let _ = lock(&self.proxy).send_event(event);
    }
}

impl Surface for ResidentSurface {
    fn emit(&self, event: &str, to: Option<&str>, payload: serde_json::Value) {
        self.windows.order(ToWindows::Emit {
            event: event.to_owned(),
            to: to.map(str::to_owned),
            payload,
        });
    }

    fn show_main(&self) {
        self.windows.show(Show::Main);
    }

    fn open_approvals(&self, focus: bool) {
        self.windows.show(Show::Approvals { focus });
    }

    fn close_approvals(&self) {
        self.windows.order(ToWindows::CloseApprovals);
    }

    fn set_tray(&self, shown: &Shown) -> Result<(), String> {
        self.send(UserEvent::Tray(Box::new(shown.clone())));
        Ok(())
    }

    fn notify(&self, title: &str, body: &str) -> Result<(), String> {
        let (title, body) = (title.to_owned(), body.to_owned());
        // The desktop's service answers over D-Bus: not on the desk's threads.
        std::thread::spawn(move || {
            if let Err(err) = notify_rust::Notification::new()
                .summary(&title)
                .body(&body)
                .appname("Postern")
                .show()
            {
                tracing::warn!("cannot show a notification: {err}");
            }
        });
        Ok(())
    }

    fn quitting(&self) {
        self.windows.quitting();
    }

    fn exit(&self) {
        self.windows.order(ToWindows::Quit);
        self.send(UserEvent::Exit);
    }
}

fn create_tray() -> tray_icon::Result<TrayIcon> {
    let shown = Shown::initial();
    TrayIconBuilder::new()
        .with_id(TRAY_ID)
        .with_tooltip(&shown.tooltip)
        .with_menu(Box::new(menu(&shown.entries)))
        .with_icon(icon(&shown))
        .with_icon_as_template(TEMPLATE)
        .with_menu_on_left_click(true)
        .build()
}

fn set_tray(tray: &TrayIcon, shown: &Shown) {
    tray.set_menu(Some(Box::new(menu(&shown.entries))));
    tray.set_title(shown.title.as_deref());
    let applied = tray
        .set_icon_with_as_template(Some(icon(shown)), TEMPLATE)
        .and_then(|()| tray.set_tooltip(Some(&shown.tooltip)));
    if let Err(err) = applied {
        tracing::warn!("cannot update the tray icon: {err}");
    }
}

fn icon(shown: &Shown) -> Icon {
    let Rgba {
        rgba,
        width,
        height,
    } = image(shown.look, TEMPLATE);
    Icon::from_rgba(rgba, width, height).expect("the tray glyph's size matches its pixels")
}

/// The menu for `entries` (the desk routes a click by item id).
fn menu(entries: &[Entry]) -> Menu {
    let menu = Menu::new();
    for entry in entries {
        let appended = match entry {
            Entry::Note(text) => menu.append(&MenuItem::new(text, false, None)),
            Entry::Request {
                id,
                label,
                lines,
                calm,
            } => {
                let mut items: Vec<Box<dyn IsMenuItem>> = Vec::new();
                for line in lines {
                    items.push(Box::new(MenuItem::new(line, false, None)));
                }
                items.push(Box::new(PredefinedMenuItem::separator()));
                let (command, text) = if *calm {
                    (MenuCommand::Approve(*id), "Approve…")
                } else {
                    (MenuCommand::Review(*id), "Review…")
                };
                items.push(Box::new(MenuItem::with_id(command.id(), text, true, None)));
                items.push(Box::new(MenuItem::with_id(
                    MenuCommand::Deny(*id).id(),
                    "Deny",
                    true,
                    None,
                )));
                let refs: Vec<&dyn IsMenuItem> = items.iter().map(AsRef::as_ref).collect();
                Submenu::with_id_and_items(format!("request:{id}"), label, true, &refs)
                    .and_then(|submenu| menu.append(&submenu))
            }
            Entry::Action(action) => {
                menu.append(&MenuItem::with_id(action.id(), action.label(), true, None))
            }
            Entry::Separator => menu.append(&PredefinedMenuItem::separator()),
        };
        if let Err(err) = appended {
            tracing::warn!("cannot build the tray menu: {err}");
        }
    }
    menu
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
