//! The tray icon as Tauri draws it: the desk decides what it shows ([`postern_desk::tray`]),
//! this builds it, and routes a click on the menu back to the desk by item id.

use std::sync::Arc;

use postern_desk::Desk;
use postern_desk::tray::{Entry, Look, MenuCommand, Rgba, Shown, TEMPLATE, TRAY_ID, image};
use tauri::image::Image;
use tauri::menu::{IsMenuItem, Menu, MenuItem, PredefinedMenuItem, Submenu};
use tauri::tray::{TrayIcon, TrayIconBuilder};
use tauri::{AppHandle, Manager, Runtime};

/// Creates the tray icon. Where no tray host runs (a bare X server), this succeeds and
/// nothing shows; the windows work the same.
pub fn create<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<TrayIcon<R>> {
    let shown = Shown::initial();
    TrayIconBuilder::with_id(TRAY_ID)
        .tooltip(&shown.tooltip)
        .menu(&menu(app, &shown.entries)?)
        .icon(icon(shown.look))
        .icon_as_template(TEMPLATE)
        .show_menu_on_left_click(true)
        .on_menu_event(|app, event| {
            if let Some(desk) = app.try_state::<Arc<Desk>>() {
                desk.menu_click(event.id().as_ref());
            }
        })
        .build(app)
}

/// Shows `shown` on the tray icon.
pub fn set<R: Runtime>(app: &AppHandle<R>, shown: &Shown) -> tauri::Result<()> {
    let Some(tray) = app.tray_by_id(TRAY_ID) else {
        return Ok(());
    };
    tray.set_menu(Some(menu(app, &shown.entries)?))?;
    tray.set_icon_with_as_template(Some(icon(shown.look)), TEMPLATE)?;
    tray.set_tooltip(Some(&shown.tooltip))?;
    tray.set_title(shown.title.as_deref())
}

fn icon(look: Look) -> Image<'static> {
    let Rgba {
        rgba,
        width,
        height,
    } = image(look, TEMPLATE);
    Image::new_owned(rgba, width, height)
}

/// The menu for `entries`.
pub fn menu<R: Runtime>(app: &AppHandle<R>, entries: &[Entry]) -> tauri::Result<Menu<R>> {
    let menu = Menu::new(app)?;
    for entry in entries {
        let item: Box<dyn IsMenuItem<R>> = match entry {
            Entry::Note(text) => Box::new(MenuItem::new(app, text, false, None::<&str>)?),
            Entry::Request {
                id,
                label,
                lines,
                calm,
            } => {
                let mut items: Vec<Box<dyn IsMenuItem<R>>> = Vec::new();
                for line in lines {
                    items.push(Box::new(MenuItem::new(app, line, false, None::<&str>)?));
                }
                items.push(Box::new(PredefinedMenuItem::separator(app)?));
                let (command, text) = if *calm {
                    (MenuCommand::Approve(*id), "Approve…")
                } else {
                    (MenuCommand::Review(*id), "Review…")
                };
                items.push(Box::new(MenuItem::with_id(
                    app,
                    command.id(),
                    text,
                    true,
                    None::<&str>,
                )?));
                items.push(Box::new(MenuItem::with_id(
                    app,
                    MenuCommand::Deny(*id).id(),
                    "Deny",
                    true,
                    None::<&str>,
                )?));
                let refs: Vec<&dyn IsMenuItem<R>> = items.iter().map(AsRef::as_ref).collect();
                Box::new(Submenu::with_id_and_items(
                    app,
                    format!("request:{id}"),
                    label,
                    true,
                    &refs,
                )?)
            }
            Entry::Action(action) => Box::new(MenuItem::with_id(
                app,
                action.id(),
                action.label(),
                true,
                None::<&str>,
            )?),
            Entry::Separator => Box::new(PredefinedMenuItem::separator(app)?),
        };
        menu.append(item.as_ref())?;
    }
    Ok(menu)
}

#[cfg(test)]
mod tests {
    use postern_desk::approvals::Approval;
    use postern_desk::sample::gate;
    use postern_desk::tray::{Counts, entries};
    use postern_domain::ApprovalId;
    use postern_engine::authority::VaultState;
    use tauri::menu::MenuItemKind;

    use super::*;

    const COUNTS: Counts = Counts {
        servers: 2,
        agents: 1,
    };

    /// A request's submenu: its title, its items (id, text, enabled), and the ids of its choices.
    fn submenu(
        item: &MenuItemKind<tauri::test::MockRuntime>,
    ) -> (String, Vec<(String, String, bool)>, Vec<String>) {
        let MenuItemKind::Submenu(request) = item else {
            panic!("a submenu: {:?}", item.id())
        };
        let inner = request
            .items()
            .unwrap()
            .iter()
            .map(|i| match i {
                MenuItemKind::MenuItem(m) => (
                    m.id().as_ref().to_owned(),
                    m.text().unwrap(),
                    m.is_enabled().unwrap(),
                ),
                other => (other.id().as_ref().to_owned(), String::new(), false),
            })
            .collect::<Vec<(String, String, bool)>>();
        let choices = inner
            .iter()
            .filter(|(id, _, _)| id.contains(':'))
            .map(|(id, _, _)| id.clone())
            .collect();
        (request.text().unwrap(), inner, choices)
    }

    #[test]
    fn the_menu_holds_a_submenu_per_request_its_arguments_and_risks_before_the_choices() {
        let app = tauri::test::mock_app();
        let card = postern_desk::sample::card();
        let mut calm = card.clone();
        calm.id = ApprovalId::new(postern_desk::sample::ASKED_AT, 7);
        calm.risks.clear();
        let entries = entries(
            Some(&gate(VaultState::Ready, 2)),
            COUNTS,
            &[Approval::of(card.clone()), Approval::of(calm.clone())],
        );
        let menu = menu(app.handle(), &entries).unwrap();
        let items = menu.items().unwrap();
        let ids: Vec<_> = items.iter().map(|i| i.id().as_ref().to_owned()).collect();
        assert_eq!(ids.len(), 12, "{ids:?}");
        assert_eq!(ids[4], format!("request:{}", card.id));

        let (label, inner, choices) = submenu(&items[4]);
        assert_eq!(label, "⚠ claude-code 2.1.3 · deployer · deploy");
        let texts: Vec<&str> = inner.iter().map(|(_, t, _)| t.as_str()).collect();
        assert_eq!(
            &texts[..3],
            [
                "branch = \"main\"",
                "options = {}",
                "target = \"preview\" (default)"
            ]
        );
        assert!(
            texts.iter().any(|t| t.starts_with("⚠ The code changed")),
            "{texts:?}"
        );
        assert!(
            inner
                .iter()
                .filter(|(id, _, _)| id.contains(':'))
                .all(|(_, _, on)| *on)
        );
        assert!(
            inner
                .iter()
                .filter(|(_, t, _)| t.starts_with('⚠'))
                .all(|(_, _, on)| !*on),
            "lines are text, not choices"
        );
        assert_eq!(
            choices,
            [format!("review:{}", card.id), format!("deny:{}", card.id)]
        );

        let (label, _, choices) = submenu(&items[5]);
        assert_eq!(label, "claude-code 2.1.3 · deployer · deploy");
        assert_eq!(
            choices,
            [format!("approve:{}", calm.id), format!("deny:{}", calm.id)]
        );
    }
}
