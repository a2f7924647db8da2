// The only module that talks to the Rust side. Everything else receives plain typed values,
// which keeps the views testable without a Tauri runtime.
import { invoke } from "@tauri-apps/api/core";
import { listen } from "@tauri-apps/api/event";

import type { EngineView } from "./bindings";
import type { StatusSource } from "./live";

/** The event the app emits whenever the engine reports a change (src-tauri/src/shell.rs). */
export const STATUS_CHANGED = "status-changed";

/** Status from the app's `status` command, and pushes of the `status-changed` event. */
export const tauriStatus: StatusSource = {
  fetch: () => invoke<EngineView>("status"),
  subscribe: (onView) => listen<EngineView>(STATUS_CHANGED, (event) => onView(event.payload)),
};
