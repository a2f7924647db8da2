// One audit record, opened for a clicked timeline mark or Activity row: one sentence saying what
// happened (who, what, under which launch, allowed how, how it ended; from the journals, so even
// a sealed record gets one when it is a call), its clear header (seq, time, kind, the session by
// its journal id, chain hash, whether it checks against the previous record) and its body folded
// under them, which the engine opens only while the vault is unlocked (tool-call arguments by
// their shape only).

import type { JournalApi } from "./api";
import { message } from "./api";
import type { AuditEntry } from "./bindings";
import { h } from "./dom";
import { agentWords, entrySentence, sessionName } from "./journal-words";
import { stamp } from "./timeline-layout";

export interface EntryPanel {
  el: HTMLElement;
  /** Fetches and shows record `seq`. */
  show(seq: number): void;
  hide(): void;
  /** Calls `listener` with the record now shown, or `null` when the panel closes. */
  onChange(listener: (seq: number | null) => void): void;
}

/** A panel that shows one audit record at a time; hidden until asked. */
export function entryPanel(api: Pick<JournalApi, "auditEntry">): EntryPanel {
  const el = h("section", { class: "entry panel", "aria-live": "polite", hidden: "" });
  let wanted = 0;
  const listeners: ((seq: number | null) => void)[] = [];
  const tell = (seq: number | null): void => listeners.forEach((l) => l(seq));
  const put = (...children: (HTMLElement | null)[]): void => {
    el.hidden = false;
    el.replaceChildren(...children.filter((c): c is HTMLElement => c !== null));
  };
  const close = (): HTMLElement => {
    const button = h("button", { type: "button", class: "entry-close", title: "Close" }, "Close");
    button.addEventListener("click", () => hide());
    return button;
  };
  const hide = (): void => {
    wanted = 0;
    el.hidden = true;
    el.replaceChildren();
    tell(null);
  };
  const show = (seq: number): void => {
    wanted = seq;
    el.dataset.seq = String(seq);
    tell(seq);
    put(h("div", "panel-head", h("h2", {}, `Audit record #${seq}`), close()), h("p", "muted entry-loading", "Opening…"));
    api.auditEntry(seq).then(
      (entry) => {
        if (wanted !== seq) return;
        put(...(entry === null ? [head(seq, close()), h("p", "muted", "There is no such record.")] : renderEntry(entry, close())));
      },
      (err: unknown) => {
        if (wanted !== seq) return;
        put(head(seq, close()), h("p", { class: "action-error", role: "alert" }, `Cannot open record #${seq}: ${message(err)}`));
      },
    );
  };
  return { el, show, hide, onChange: (listener) => void listeners.push(listener) };
}

/** The record's header and body (pure). */
export function renderEntry(entry: AuditEntry, closeButton: HTMLElement | null = null): HTMLElement[] {
  const sentence = entrySentence(entry);
  return [
    head(entry.seq, closeButton, entry.kind),
    sentence === null ? null : h("p", "entry-summary", sentence),
    h(
      "dl",
      "entry-grid",
      h("dt", {}, "time"),
      h("dd", {}, h("code", {}, stamp(entry.time))),
      h("dt", {}, "kind"),
      h("dd", {}, h("code", "entry-kind", entry.kind)),
      ...(entry.session === null
        ? []
        : [h("dt", {}, "session"), h("dd", "entry-session", `${sessionName(entry.session.id)} · ${agentWords(entry.session.agent)} on ${entry.session.server}`)]),
      h("dt", {}, "chain hash"),
      h("dd", {}, h("code", { class: "entry-hash", title: entry.hash }, entry.hash.slice(0, 16))),
      h("dt", {}, "format"),
      h("dd", {}, `version ${entry.version}`),
    ),
    entry.problem === null
      ? h("p", "entry-ok", "Checks against the previous record.")
      : h("p", { class: "callout callout-bad entry-problem", role: "alert" }, `This record does not check out: ${entry.problem}`),
    entry.body.state === "opened"
      ? h(
          "details",
          "entry-details",
          h("summary", {}, "The record as logged (JSON)"),
          h("pre", "entry-body snippet", h("code", {}, JSON.stringify(entry.body.event, null, 2))),
        )
      : h("p", "entry-sealed muted", `The body stays sealed: ${entry.body.reason}`),
  ].filter((el): el is HTMLElement => el !== null);
}

function head(seq: number, closeButton: HTMLElement | null, kind?: string): HTMLElement {
  return h("div", "panel-head", h("h2", {}, `Audit record #${seq}`), kind === undefined ? null : h("span", "muted", kind), closeButton);
}
