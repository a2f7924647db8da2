// The Integrity view: the audit log's hash chain. Where it stands (recording, unavailable,
// quarantined), its head (the last record committed) and the anchor in the OS keychain that
// catches a truncated or rolled-back log, what the engine verified when it started, and a
// full verification on demand. A quarantine says which record failed and what a human does next.

import type { AuditStatus, Verification } from "./bindings";
import { h, icon } from "./dom";

/** A verification asked for from this window: not yet, running, its result, or why it could not run. */
export type VerifyState =
  | { kind: "idle" }
  | { kind: "running"; openBodies: boolean }
  | { kind: "done"; result: Verification; openBodies: boolean; atMs: number }
  | { kind: "error"; message: string };

/** `SEQ:HASH` as its parts. */
export function head(text: string | null): { seq: number; hash: string } | null {
  if (text === null) return null;
  const [seq, hash = ""] = text.split(":");
  const n = Number(seq);
  return Number.isFinite(n) ? { seq: n, hash } : null;
}

/** The Integrity panel for `audit`; `verify` runs a full verification. */
export function integrityPanel(audit: AuditStatus, verification: VerifyState, verify: (openBodies: boolean) => void): HTMLElement {
  const top = head(audit.head);
  const anchored = head(audit.anchored);
  return h(
    "div",
    "integrity-view",
    stateCallout(audit),
    h(
      "section",
      { class: "panel integrity", "aria-labelledby": "integrity-h" },
      h("div", "panel-head", h("h2", { id: "integrity-h" }, "Audit chain"), h("span", "muted", "one encrypted, hash-chained log of every decision")),
      h(
        "dl",
        "integrity-grid",
        h("dt", {}, "head"),
        h(
          "dd",
          "chain-head",
          top === null ? h("span", "muted", "no records yet") : h("span", {}, "sequence ", h("strong", "head-seq", String(top.seq)), " ", h("code", { class: "digest", title: top.hash }, top.hash.slice(0, 16))),
        ),
        h("dt", {}, "anchor"),
        h(
          "dd",
          "chain-anchor",
          anchored === null
            ? h("span", "muted", "none written yet")
            : h("span", {}, "sequence ", h("strong", "anchor-seq", String(anchored.seq)), " in the OS keychain ", h("code", { class: "digest", title: anchored.hash }, anchored.hash.slice(0, 16))),
          audit.anchorError === null ? null : h("div", "anchor-error", `The last anchor write failed: ${audit.anchorError}`),
        ),
        h("dt", {}, "at start"),
        h("dd", "verified-at-start", atStart(audit)),
        audit.failedBatches === 0 && audit.dropped === 0 ? null : h("dt", {}, "losses"),
        audit.failedBatches === 0 && audit.dropped === 0
          ? null
          : h("dd", "losses", `${audit.failedBatches} batch(es) failed to commit (their calls were refused); ${audit.dropped} event(s) could not be recorded`),
      ),
      h("p", "panel-note muted", "The anchor is rewritten about every 100 ms, so records after it are protected by the chain alone until the next write."),
    ),
    verifyPanel(verification, verify),
  );
}

function stateCallout(audit: AuditStatus): HTMLElement {
  switch (audit.state.state) {
    case "ready":
      return h("p", "integrity-state state-ready", h("span", "badge badge-ok", "recording"), " Every decision is appended to the chain before the call it allows goes on.");
    case "closed":
      return h("p", "integrity-state state-closed", h("span", "badge badge-idle", "closed"), " The engine is stopping.");
    case "unavailable":
      return h(
        "div",
        "callout callout-bad integrity-state state-unavailable",
        h("div", "callout-title", icon("alert"), "The audit log is unavailable: every tool call is refused"),
        h("p", {}, audit.state.reason),
        h("p", "callout-hint", "Postern never acts unaudited. Usually the OS keychain is missing or locked; fix that and restart Postern."),
      );
    case "quarantined":
      return h(
        "div",
        "callout callout-bad integrity-state state-quarantined",
        h("div", "callout-title", icon("alert"), `Quarantined: record #${audit.state.seq} failed verification`),
        h("p", "quarantine-reason", audit.state.reason),
        h(
          "p",
          "callout-hint",
          "Every tool call is refused until a human decides. Check the log with ",
          h("code", {}, "postern audit verify"),
          ". If you restored or cut it on purpose, ",
          h("code", {}, "postern audit reanchor --yes"),
          " (with Postern stopped) accepts it as it is now; an altered record is never accepted: restore the database from a backup.",
        ),
      );
  }
}

function atStart(audit: AuditStatus): string {
  switch (audit.state.state) {
    case "ready":
    case "closed":
      return "The engine verified the whole chain against the anchor when it started.";
    case "quarantined":
      return `Verification stopped at record #${audit.state.seq}.`;
    case "unavailable":
      return "Not verified: the log could not be opened.";
  }
}

function verifyPanel(state: VerifyState, verify: (openBodies: boolean) => void): HTMLElement {
  const bodies = h("input", { type: "checkbox", name: "openBodies" }) as HTMLInputElement;
  const button = h("button", { type: "button", class: "verify primary" }, state.kind === "running" ? "Verifying…" : "Verify now") as HTMLButtonElement;
  button.disabled = state.kind === "running";
  button.addEventListener("click", () => verify(bodies.checked));
  return h(
    "section",
    { class: "panel verify-panel", "aria-labelledby": "verify-h" },
    h("div", "panel-head", h("h2", { id: "verify-h" }, "Verify the whole chain")),
    h("p", "panel-note", "Checks every record's structure and hash link, and that the log reaches the keychain's anchor. Read-only: agents keep working meanwhile."),
    h("div", "verify-actions", button, h("label", "check", bodies, " also open every body (slower)")),
    result(state),
  );
}

function result(state: VerifyState): HTMLElement | null {
  switch (state.kind) {
    case "idle":
    case "running":
      return null;
    case "error":
      return h("p", { class: "action-error verify-result", role: "alert" }, `Cannot verify: ${state.message}`);
    case "done": {
      const r = state.result;
      if (r.state === "failed") {
        return h(
          "div",
          { class: "callout callout-bad verify-result verify-failed", role: "alert" },
          h("div", "callout-title", icon("alert"), `Record #${r.seq} failed: ${r.code}`),
          h("p", {}, r.reason),
        );
      }
      const top = head(r.head);
      const anchor =
        r.anchor.state === "checked"
          ? `it reaches the keychain's anchor at sequence ${head(r.anchor.head)?.seq ?? "?"}`
          : r.anchor.state === "empty"
            ? "the keychain's anchor is that of an empty log"
            : `the anchor was not checked (${r.anchor.reason})`;
      return h(
        "div",
        { class: "callout verify-result verify-ok", role: "status" },
        h("div", "callout-title", `Verified up to sequence ${top?.seq ?? 0}`),
        h("p", {}, `${r.records} record${r.records === 1 ? "" : "s"}, every hash link intact; ${anchor}.`),
        h(
          "p",
          "muted",
          r.bodiesOpened
            ? "Every body was opened and read as its event."
            : state.openBodies
              ? `Bodies not opened: ${r.keyNote ?? "the engine gave no reason"}.`
              : "Bodies not opened (tick the box to open and check each one too).",
        ),
      );
    }
  }
}
