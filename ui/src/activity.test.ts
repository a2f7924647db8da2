import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import { activityView, PAGE, readFilter, rowsTable } from "./activity";
import type { ActivityFilter, ActivityRow, AuditEntry } from "./bindings";
import { entryPanel } from "./entry";

const T0 = new Date(2026, 10, 29, 14, 0, 0).getTime();
const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);

function row(seq: number, fields: Partial<ActivityRow> = {}): ActivityRow {
  return {
    seq,
    time: T0 + seq * 1000,
    session: 3,
    server: "deploy",
    epoch: "01JQ7RA0B6G5X3T1M2N4P6R8SV",
    launch: null,
    tool: "deploy",
    call: String(seq),
    decision: "allowed",
    outcome: "ok",
    durationMs: 12,
    agent: { client: "claude-code 2.1.3", process: "zsh -> claude -> postern (pid 4242)", cwd: "/home/u/shop" },
    authority: "grant",
    grant: { grant: "01JQGRANT", end: { kind: "until", unixMs: T0 + 15 * 60_000 }, issued: T0 },
    asked: null,
    ...fields,
  };
}

/** `count` rows, newest first, below `before`. */
function page(before: number | null, count: number): ActivityRow[] {
  const top = (before ?? 1000) - 1;
  return Array.from({ length: count }, (_, i) => row(top - i));
}

beforeEach(() => {
  vi.useFakeTimers();
  document.body.replaceChildren();
});
afterEach(() => vi.useRealTimers());

function setup(answer: (f: ActivityFilter) => ActivityRow[] = (f) => page(f.before, PAGE)) {
  const filters: ActivityFilter[] = [];
  const api = { activity: vi.fn(async (f: ActivityFilter) => (filters.push(f), answer(f))) };
  const entries = { auditEntry: vi.fn(async (seq: number): Promise<AuditEntry | null> => ({ seq, time: T0, kind: "tool_call_intent", version: 1, hash: "cd".repeat(32), problem: null, body: { state: "sealed", reason: "the vault is locked: bodies open only while it is unlocked" }, call: null, session: null })) };
  const view = activityView(api, entryPanel(entries));
  document.body.append(view.el);
  return { view, filters, entries };
}

describe("the Activity feed", () => {
  it("shows the newest page of calls, one row each", async () => {
    const { view, filters } = setup(() => [
      row(12, { tool: "deploy", decision: "authorization_stale", outcome: "refused", durationMs: null, launch: 7 }),
      row(11, { tool: "status", decision: "observed", outcome: null, epoch: null }),
      row(10),
    ]);
    view.shown();
    await vi.advanceTimersByTimeAsync(0);

    expect(filters[0]).toEqual({ session: null, server: null, epoch: null, tool: null, decision: null, since: null, until: null, before: null, limit: PAGE });
    expect(all(document.body, ".activity-row .col-tool")).toEqual(["deploy", "status", "deploy"]);
    expect(all(document.body, ".activity-row .col-decision")).toEqual(["authorization_stale", "observed", "allowed"]);
    expect(all(document.body, ".activity-row .col-outcome")).toEqual(["refused", "pending", "ok"]);
    // Launches by number, as the Servers view says them; the epoch itself in the title (a row
    // whose launch the journal could not number shows its epoch short).
    expect(all(document.body, ".activity-row .col-epoch")).toEqual(["launch 7", "—", "launch 01JQ7R…R8SV"]);
    expect(document.querySelector(".activity-row .col-epoch .launch")!.getAttribute("title")).toBe("01JQ7RA0B6G5X3T1M2N4P6R8SV");
    expect(all(document.body, "thead th")[4]).toBe("launch");
    expect([...document.querySelectorAll(".activity-row")].map((r) => r.className)).toEqual(["activity-row tone-bad", "activity-row tone-idle", "activity-row tone-ok"]);
    expect(all(document.body, ".activity-row .col-took")).toEqual(["", "12 ms", "12 ms"]);
  });

  it("filters by session, server, epoch, tool, decision and time", async () => {
    const { view, filters } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const form = document.querySelector<HTMLFormElement>(".activity-filter")!;
    const set = (name: string, value: string) => ((form.elements.namedItem(name) as HTMLInputElement).value = value);
    set("session", "3");
    set("server", "deploy");
    set("epoch", "01JQ7RA0B6G5X3T1M2N4P6R8SV");
    set("tool", "deploy");
    set("decision", "denied");
    set("since", "2026-11-29T14:00:00");
    set("until", "2026-11-29T15:00:00");

    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await vi.advanceTimersByTimeAsync(0);

    expect(filters[1]).toEqual({
      session: 3,
      server: "deploy",
      epoch: "01JQ7RA0B6G5X3T1M2N4P6R8SV",
      tool: "deploy",
      decision: "denied",
      since: T0,
      until: T0 + 3_600_000,
      before: null,
      limit: PAGE,
    });
    set("session", "three");
    expect(readFilter(form)).toBe("The session is a number (a lane's id).");
  });

  it("pages back by the last row's seq, and forward again", async () => {
    const { view, filters } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const button = (cls: string) => document.querySelector<HTMLButtonElement>(`.page-${cls}`)!;
    expect(button("newer").disabled).toBe(true);

    button("older").click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters[1]!.before).toBe(950);
    button("older").click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters[2]!.before).toBe(900);
    button("newer").click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters[3]!.before).toBe(950);
    button("newest").click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters[4]!.before).toBe(null);
  });

  it("follows the engine on the newest page only", async () => {
    const { view, filters } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    view.poke();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters.length).toBe(2);
    document.querySelector<HTMLButtonElement>(".page-older")!.click();
    await vi.advanceTimersByTimeAsync(0);
    view.poke();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters.length).toBe(3);
  });

  it("shows one session's calls when asked (a timeline lane), and a row's audit record", async () => {
    const { view, filters, entries } = setup();
    view.show({ session: 7 });
    await vi.advanceTimersByTimeAsync(0);
    expect(filters[0]!.session).toBe(7);
    expect((document.querySelector<HTMLInputElement>('input[name="session"]'))!.value).toBe("7");

    document.querySelector<HTMLElement>('.activity-row[data-seq="998"]')!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(entries.auditEntry).toHaveBeenCalledWith(998);
    expect(text(document.querySelector(".activity .entry h2"))).toBe("Audit record #998");
    expect(text(document.querySelector(".entry-sealed"))).toBe("The body stays sealed: the vault is locked: bodies open only while it is unlocked");
  });

  it("says when nothing matches, and when the journal cannot be read", async () => {
    const empty = setup(() => []);
    empty.view.shown();
    await vi.advanceTimersByTimeAsync(0);
    expect(text(document.querySelector(".activity-rows"))).toBe("No call matches.");

    document.body.replaceChildren();
    const api = { activity: async () => Promise.reject(new Error("database is locked")) };
    const broken = activityView(api, entryPanel({ auditEntry: async () => null }));
    document.body.append(broken.el);
    broken.shown();
    await vi.advanceTimersByTimeAsync(0);
    expect(text(document.querySelector(".activity-rows"))).toBe("Cannot read the Activity journal: database is locked");
  });

  it("says who called and how each call was allowed, in words", async () => {
    const { view } = setup(() => [
      row(14, { decision: "approval_denied", outcome: "refused", authority: null, grant: null, durationMs: null, asked: { approval: "A2", requested: T0, answered: T0 + 3000, answer: "denied", by: "terminal" } }),
      row(13, { decision: "observed", authority: "observed", grant: null, agent: { client: null, process: "bash -> codex -> postern (pid 77)", cwd: null } }),
      row(12, { grant: { grant: "G1", end: { kind: "thisCallOnly", call: "01JQCALL" }, issued: T0 }, asked: { approval: "A1", requested: T0, answered: T0 + 12_000, answer: "granted", by: "window" } }),
      row(111, { grant: { grant: "G0", end: { kind: "thisCallOnly", call: "01JQCALL0" }, issued: T0 }, asked: { approval: "A0", requested: T0, answered: T0 + 5_000, answer: "granted", by: null } }),
      row(11, { grant: { grant: "G2", end: { kind: "untilRunEnds" }, issued: T0 } }),
      row(10),
      row(9, { decision: "catalog_stale", outcome: "refused", authority: null, grant: null, agent: { client: null, process: null, cwd: null } }),
      row(8, { authority: null, grant: null }),
    ]);
    view.shown();
    await vi.advanceTimersByTimeAsync(0);

    expect(all(document.body, ".activity-row .col-agent")).toEqual([
      "claude-code 2.1.3 in shop",
      "codex (pid 77)",
      "claude-code 2.1.3 in shop",
      "claude-code 2.1.3 in shop",
      "claude-code 2.1.3 in shop",
      "claude-code 2.1.3 in shop",
      "an unnamed agent",
      "claude-code 2.1.3 in shop",
    ]);
    expect(all(document.body, ".activity-row .col-how")).toEqual([
      "you denied it on a terminal",
      "observe mode (nobody asked)",
      "your grant · this call · you approved in the approval window after 12 s",
      // An answer recorded before the log kept where it was given.
      "your grant · this call · you approved after 5.0 s",
      "your grant · until the run ends",
      "your grant · 15 min",
      "the tool changed since the agent listed it",
      "allowed (how was not journaled: rebuild the journals to see)",
    ]);
    expect(all(document.body, "thead th")).toEqual(["time", "session", "agent", "server", "launch", "tool", "decision", "allowed how", "outcome", "took"]);
    expect(document.querySelector(".activity-row .col-session")!.getAttribute("title")).toBe("session 3");
  });

  it("quick filters set the form in one click, and a second click clears them", async () => {
    const { view, filters } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const chip = (cls: string) => document.querySelector<HTMLButtonElement>(`.quick-${cls}`);
    expect(all(document.body, ".quick-filters .chip-filter")).toEqual(["Refused", "Asked you", "Observe mode"]);
    expect(chip("agent")).toBeNull();

    chip("refused")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters.at(-1)!.decision).toBe("denied");
    expect((document.querySelector<HTMLSelectElement>('select[name="decision"]'))!.value).toBe("denied");
    expect(chip("refused")!.getAttribute("aria-pressed")).toBe("true");

    chip("asked")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters.at(-1)!.decision).toBe("asked");
    expect(chip("refused")!.getAttribute("aria-pressed")).toBe("false");

    // Opening a row names its agent and server on two more chips.
    document.querySelector<HTMLElement>('.activity-row[data-seq="997"]')!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(text(chip("agent"))).toBe("This agent: claude-code 2.1.3 (session 3)");
    expect(text(chip("server"))).toBe("This server: deploy");
    chip("agent")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters.at(-1)).toMatchObject({ session: 3, decision: "asked", server: null });
    chip("server")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters.at(-1)).toMatchObject({ session: 3, decision: "asked", server: "deploy" });

    // Pressed again: that part of the filter is cleared, the rest kept.
    chip("agent")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(filters.at(-1)).toMatchObject({ session: null, decision: "asked", server: "deploy" });
  });

  it("shows the time of day, and the date only for another day", () => {
    const today = rowsTable([row(1)], () => {}, T0 + 3_600_000);
    expect(text(today.querySelector(".col-when"))).toBe("14:00:01");
    expect(today.querySelector(".col-when code")!.getAttribute("title")).toBe("2026-11-29 14:00:01.000");
    const later = rowsTable([row(1)], () => {}, T0 + 2 * 86_400_000);
    expect(text(later.querySelector(".col-when"))).toBe("2026-11-29 14:00:01");
  });

  it("renders rows as text, never markup", () => {
    const table = rowsTable([row(1, { tool: "<img src=x onerror=alert(1)>" })]);
    expect(table.querySelector("img")).toBeNull();
    expect(text(table.querySelector(".col-tool"))).toBe("<img src=x onerror=alert(1)>");
  });
});
