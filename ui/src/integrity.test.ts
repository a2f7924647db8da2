import { beforeEach, describe, expect, it, vi } from "vitest";

import type { AuditStatus } from "./bindings";
import { status } from "./fixtures/status";
import { head, integrityPanel } from "./integrity";

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const HASH = "9a0d1d1cbb2181214c7b0e0f2d5b8f17d3a4b2c1e0f9a8b7c6d5e4f3a2b1c0d9";

const audit = (fields: Partial<AuditStatus> = {}): AuditStatus => ({
  ...status().audit,
  head: `1204:${HASH}`,
  anchored: `1198:${"1".repeat(64)}`,
  ...fields,
});

beforeEach(() => document.body.replaceChildren());

describe("the Integrity view", () => {
  it("shows the chain's head and the anchor in the keychain", () => {
    const root = integrityPanel(audit(), { kind: "idle" }, () => {});

    expect(text(root.querySelector(".integrity-state"))).toContain("recording");
    expect(text(root.querySelector(".head-seq"))).toBe("1204");
    expect(root.querySelector(".chain-head .digest")?.getAttribute("title")).toBe(HASH);
    expect(text(root.querySelector(".anchor-seq"))).toBe("1198");
    expect(text(root.querySelector(".verified-at-start"))).toBe("The engine verified the whole chain against the anchor when it started.");
    expect(root.querySelector(".losses, .anchor-error")).toBeNull();
  });

  it("says which record failed when the log is quarantined, and what a human can do", () => {
    const root = integrityPanel(audit({ state: { state: "quarantined", seq: 812, reason: "the chain hash does not match" } }), { kind: "idle" }, () => {});

    expect(text(root.querySelector(".state-quarantined .callout-title"))).toBe("Quarantined: record #812 failed verification");
    expect(text(root.querySelector(".quarantine-reason"))).toBe("the chain hash does not match");
    expect(text(root.querySelector(".state-quarantined"))).toContain("postern audit verify");
    expect(text(root.querySelector(".verified-at-start"))).toBe("Verification stopped at record #812.");
  });

  it("says when the log is unavailable, and any losses and anchor failures", () => {
    const root = integrityPanel(
      audit({ state: { state: "unavailable", reason: "no keychain" }, anchorError: "the keychain is locked", failedBatches: 2, dropped: 5 }),
      { kind: "idle" },
      () => {},
    );

    expect(text(root.querySelector(".state-unavailable .callout-title"))).toBe("The audit log is unavailable: every tool call is refused");
    expect(text(root.querySelector(".anchor-error"))).toBe("The last anchor write failed: the keychain is locked");
    expect(text(root.querySelector(".losses"))).toContain("2 batch(es) failed");
    expect(root.querySelector(".head-seq")).not.toBeNull();
  });

  it("verifies on demand and shows the result", () => {
    const verify = vi.fn();
    const root = integrityPanel(audit(), { kind: "idle" }, verify);
    root.querySelector<HTMLInputElement>('input[name="openBodies"]')!.checked = true;
    root.querySelector<HTMLButtonElement>(".verify")!.click();
    expect(verify).toHaveBeenCalledWith(true);

    const running = integrityPanel(audit(), { kind: "running", openBodies: true }, verify);
    expect(running.querySelector<HTMLButtonElement>(".verify")!.disabled).toBe(true);

    const done = integrityPanel(
      audit(),
      {
        kind: "done",
        openBodies: false,
        atMs: 0,
        result: { state: "verified", records: 1204, head: `1204:${HASH}`, anchor: { state: "checked", head: `1204:${HASH}` }, bodiesOpened: false, keyNote: "not asked to open bodies" },
      },
      verify,
    );
    expect(text(done.querySelector(".verify-ok .callout-title"))).toBe("Verified up to sequence 1204");
    expect(text(done.querySelector(".verify-ok"))).toContain("1204 records, every hash link intact; it reaches the keychain's anchor at sequence 1204.");

    const failed = integrityPanel(
      audit(),
      { kind: "done", openBodies: true, atMs: 0, result: { state: "failed", seq: 77, code: "audit_chain_broken", reason: "record 77 does not follow record 76" } },
      verify,
    );
    expect(text(failed.querySelector(".verify-failed .callout-title"))).toBe("Record #77 failed: audit_chain_broken");

    const error = integrityPanel(audit(), { kind: "error", message: "no engine" }, verify);
    expect(text(error.querySelector(".verify-result"))).toBe("Cannot verify: no engine");
  });

  it("reads SEQ:HASH heads", () => {
    expect(head(`7:${HASH}`)).toEqual({ seq: 7, hash: HASH });
    expect(head(null)).toBeNull();
  });
});
