// Which IPC commands each window may call. One list for the desk's own check
// ([`crate::allowed`]) and for the app's build script, which `include!`s this file to name
// every command in Tauri's app manifest (src-tauri/build.rs); a test there holds the windows'
// capabilities in tauri.conf.json to the same split. Plain constants only: the build script
// compiles this file on its own.

// The status window's commands: its views, the lock, the settings; not the queue's answer.
pub const STATUS_WINDOW: &[&str] = &[
    "status",
    "lock",
    "dismiss_leaks",
    "unlock",
    "set_passphrase",
    "update_settings",
    "show_approvals",
    "restart",
    "add_server",
    "import_sources",
    "import_servers",
    "rewire_preview",
    "rewire",
    "agent_snippet",
    "credentials",
    "add_credential",
    "rotate_credential",
    "remove_credential",
    "bind_credential",
    "move_to_keychain",
    "unbind_credential",
    "timeline",
    "activity",
    "sessions_journal",
    "audit_entry",
    "verify_audit",
    "permissions",
    "revoke_grant",
    "revoke_run",
    "set_every_use",
];

// The approval window's commands: the queue, the answer, the lock.
pub const APPROVAL_WINDOW: &[&str] = &[
    "approvals",
    "approval_focus",
    "clicks_until",
    "system_auth",
    "answer",
    "lock",
];
