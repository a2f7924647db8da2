//! What the desk asks of whatever draws the app: events to its windows, the two windows
//! opened and closed, the tray's icon and menu, native notifications, the exit.

use serde_json::Value;

use crate::tray::Shown;

/// The status window's label (`app.windows[0].label` in tauri.conf.json).
pub const MAIN: &str = "main";
/// The approval window's label.
pub const APPROVALS: &str = "approvals";

/// The app's windows, tray and notifications, as the desk drives them. Calls come from any
/// thread; an implementation hands them to its UI thread as it needs to and never blocks on
/// the desk.
pub trait Surface: Send + Sync + 'static {
    /// Sends `event` with `payload` to the window labelled `to`, or to every window.
    fn emit(&self, event: &str, to: Option<&str>, payload: Value);

    /// Shows, unminimizes and focuses the status window, building it when it was closed.
    fn show_main(&self);

    /// Opens the approval window, or shows it if it is open. It takes the keyboard focus only
    /// when `focus` is set (a human asked for it); a request arriving never steals it.
    fn open_approvals(&self, focus: bool);

    /// Closes the approval window, if it is open.
    fn close_approvals(&self);

    /// Shows `shown` in the tray: its icon, tooltip, title and menu. An error is logged and
    /// the same state is offered again on the next change.
    fn set_tray(&self, shown: &Shown) -> Result<(), String>;

    /// A native notification.
    fn notify(&self, title: &str, body: &str) -> Result<(), String>;

    /// The app is quitting (its engine is stopping): open no window from now on.
    fn quitting(&self) {}

    /// Ends the app (its engine has stopped).
    fn exit(&self);
}

/// A surface that records what it was asked, for tests.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct Recorded {
    pub orders: std::sync::Mutex<Vec<Order>>,
}

/// One thing a [`Recorded`] surface was asked.
#[cfg(test)]
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Order {
    Emit {
        event: String,
        to: Option<String>,
        payload: Value,
    },
    ShowMain,
    OpenApprovals {
        focus: bool,
    },
    CloseApprovals,
    Tray(Box<Shown>),
    Notify {
        title: String,
        body: String,
    },
    Exit,
}

#[cfg(test)]
impl Recorded {
    fn push(&self, order: Order) {
        self.orders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(order);
    }

    /// Everything asked so far.
    pub fn orders(&self) -> Vec<Order> {
        self.orders
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The last tray state shown.
    pub fn tray(&self) -> Option<Shown> {
        self.orders()
            .into_iter()
            .rev()
            .find_map(|order| match order {
                Order::Tray(shown) => Some(*shown),
                _ => None,
            })
    }

    /// Whether the approval window is open, from the orders to open and close it.
    pub fn approvals_open(&self) -> bool {
        self.orders()
            .into_iter()
            .rev()
            .find_map(|order| match order {
                Order::OpenApprovals { .. } => Some(true),
                Order::CloseApprovals => Some(false),
                _ => None,
            })
            .unwrap_or(false)
    }
}

#[cfg(test)]
impl Surface for Recorded {
    fn emit(&self, event: &str, to: Option<&str>, payload: Value) {
        self.push(Order::Emit {
            event: event.to_owned(),
            to: to.map(str::to_owned),
            payload,
        });
    }
    fn show_main(&self) {
        self.push(Order::ShowMain);
    }
    fn open_approvals(&self, focus: bool) {
        self.push(Order::OpenApprovals { focus });
    }
    fn close_approvals(&self) {
        self.push(Order::CloseApprovals);
    }
    fn set_tray(&self, shown: &Shown) -> Result<(), String> {
        self.push(Order::Tray(Box::new(shown.clone())));
        Ok(())
    }
    fn notify(&self, title: &str, body: &str) -> Result<(), String> {
        self.push(Order::Notify {
            title: title.to_owned(),
            body: body.to_owned(),
        });
        Ok(())
    }
    fn exit(&self) {
        self.push(Order::Exit);
    }
}
