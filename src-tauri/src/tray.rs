//! The tray icon and its menu. The menu's behaviour lives in plain functions
//! ([`MenuAction::perform`]) so tests can drive it without a tray host.

use tauri::{
    AppHandle, Manager, Runtime,
    menu::{Menu, MenuItem, PredefinedMenuItem},
    tray::{TrayIcon, TrayIconBuilder},
};

use crate::{Shell, window};

/// The tray icon's id.
pub const TRAY_ID: &str = "postern";

/// What the tray menu offers, in menu order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MenuAction {
    /// Shows and focuses the status window.
    Open,
    /// Shuts the engine down and exits.
    Quit,
}

impl MenuAction {
    /// Every action, in menu order.
    pub const ALL: [Self; 2] = [Self::Open, Self::Quit];

    /// The menu item id.
    pub fn id(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Quit => "quit",
        }
    }

    /// The menu item text.
    pub fn label(self) -> &'static str {
        match self {
            Self::Open => "Open Postern",
            Self::Quit => "Quit",
        }
    }

    /// The action for a menu item id; `None` for ids that are not ours.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|action| action.id() == id)
    }

    /// Does it. Quitting runs on the async runtime: the engine stops, then the app exits.
    pub fn perform<R: Runtime>(self, app: &AppHandle<R>) {
        match self {
            Self::Open => {
                if let Err(err) = window::show(app) {
                    tracing::warn!("cannot show the window: {err}");
                }
            }
            Self::Quit => {
                let app = app.clone();
                tauri::async_runtime::spawn(async move {
                    app.state::<Shell>().shutdown().await;
                    app.exit(0);
                });
            }
        }
    }
}

/// The tray menu: Open Postern, a separator, Quit.
pub fn menu<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<Menu<R>> {
    let open = item(app, MenuAction::Open)?;
    let quit = item(app, MenuAction::Quit)?;
    let separator = PredefinedMenuItem::separator(app)?;
    Menu::with_items(app, &[&open, &separator, &quit])
}

/// Creates the tray icon. Where no tray host runs (a bare X server), this succeeds and
/// nothing shows; the window works the same.
pub fn create<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<TrayIcon<R>> {
    let builder = TrayIconBuilder::with_id(TRAY_ID)
        .tooltip("Postern")
        .menu(&menu(app)?)
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| on_menu_event(app, event.id().as_ref()));
    let builder = if cfg!(target_os = "macos") {
        builder
            .icon(tauri::include_image!("../icons/tray-template.png"))
            .icon_as_template(true)
    } else {
        builder.icon(tauri::include_image!("../icons/tray.png"))
    };
    builder.build(app)
}

/// Routes a menu click by item id.
pub fn on_menu_event<R: Runtime>(app: &AppHandle<R>, id: &str) {
    match MenuAction::from_id(id) {
        Some(action) => action.perform(app),
        None => tracing::debug!("ignoring menu item {id}"),
    }
}

fn item<R: Runtime>(app: &AppHandle<R>, action: MenuAction) -> tauri::Result<MenuItem<R>> {
    MenuItem::with_id(app, action.id(), action.label(), true, None::<&str>)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EngineView;
    use postern_engine::Home;
    use tauri::test::{mock_builder, mock_context, noop_assets};

    #[test]
    fn ids_round_trip_and_labels_read_as_the_issue_asks() {
        for action in MenuAction::ALL {
            assert_eq!(MenuAction::from_id(action.id()), Some(action));
        }
        assert_eq!(MenuAction::from_id("nope"), None);
        let labels: Vec<_> = MenuAction::ALL.iter().map(|a| a.label()).collect();
        assert_eq!(labels, ["Open Postern", "Quit"]);
    }

    #[test]
    fn the_menu_holds_open_then_quit() {
        let app = crate::builder(mock_builder())
            .build(mock_context(noop_assets()))
            .unwrap();
        let menu = menu(app.handle()).unwrap();
        let items = menu.items().unwrap();
        let ids: Vec<_> = items.iter().map(|i| i.id().as_ref().to_string()).collect();
        assert_eq!(ids.len(), 3, "{ids:?}");
        assert_eq!(ids[0], "open");
        assert_eq!(ids[2], "quit");
    }

    #[test]
    fn open_shows_a_hidden_window() {
        let app = crate::builder(mock_builder())
            .build(mock_context(noop_assets()))
            .unwrap();
        let window = tauri::WebviewWindowBuilder::new(&app, window::MAIN, Default::default())
            .visible(false)
            .build()
            .unwrap();
        on_menu_event(app.handle(), "open");
        assert!(window.is_visible().unwrap());
    }

    #[test]
    fn quit_stops_the_engine() {
        let home = tempfile::tempdir().unwrap();
        let app = crate::builder(mock_builder())
            .build(mock_context(noop_assets()))
            .unwrap();
        crate::shell::start_with(
            app.handle(),
            Ok(Home::at(home.path())),
            crate::shell::test_engine,
        );
        wait_for(&app, |view| matches!(view, EngineView::Running { .. }));

        // After stopping the engine, Quit calls `app.exit(0)`, which the mock runtime does not
        // implement: that spawned task ends in a logged panic once the engine is stopped.
        on_menu_event(app.handle(), "quit");

        wait_for(&app, |view| matches!(view, EngineView::Stopped { .. }));
    }

    fn wait_for(app: &tauri::App<tauri::test::MockRuntime>, done: impl Fn(&EngineView) -> bool) {
        for _ in 0..500 {
            if done(&app.state::<Shell>().view()) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("timed out; the engine is {:?}", app.state::<Shell>().view());
    }
}
