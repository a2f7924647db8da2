// Keeps the window current: the app pushes `status-changed` when the engine changes, and
// the window also polls, because configuration edited with the `postern` CLI goes straight
// to the database without passing through the engine.

import type { EngineView } from "./bindings";
import { openDetails, reopenDetails } from "./dom";
import { render, type Shown } from "./view";

/** Where status comes from (src/ipc.ts in the app; a fake in tests). */
export interface StatusSource {
  fetch(): Promise<EngineView>;
  subscribe(onView: (view: EngineView) => void): Promise<() => void>;
}

export interface LiveOptions {
  /** How often to poll, in milliseconds. */
  intervalMs?: number;
  /** The clock, for relative times. */
  now?: () => number;
}

/** Renders into `root` now and on every change; returns a function that stops it. */
export function live(root: HTMLElement, source: StatusSource, options: LiveOptions = {}): () => void {
  const { intervalMs = 2000, now = Date.now } = options;
  let shownKey = "";
  let stopped = false;
  let unsubscribe: (() => void) | undefined;

  const show = (shown: Shown): void => {
    if (stopped) return;
    const at = now();
    // Re-render only when something visible changed (times are shown to the minute), so a
    // selection the user is about to copy survives the refresh.
    const key = JSON.stringify(shown) + Math.floor(at / 60_000);
    if (key === shownKey) return;
    shownKey = key;
    // An execution record the user opened stays open across the refresh.
    const next = render(shown, at);
    reopenDetails(next, openDetails(root));
    root.replaceChildren(next);
  };

  const refresh = async (): Promise<void> => {
    try {
      show({ kind: "view", view: await source.fetch() });
    } catch (err) {
      show({ kind: "ipcError", message: String(err) });
    }
  };

  show({ kind: "loading" });
  source
    .subscribe((view) => show({ kind: "view", view }))
    .then((off) => (stopped ? off() : (unsubscribe = off)))
    .catch((err: unknown) => console.warn("no status-changed events:", err));
  void refresh();
  const timer = setInterval(() => void refresh(), intervalMs);

  return () => {
    stopped = true;
    clearInterval(timer);
    unsubscribe?.();
  };
}
