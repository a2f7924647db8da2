import { describe, expect, it } from "vitest";

import type { ActivityRow, AuditEntry } from "./bindings";
import { renderEntry } from "./entry";
import { agentWords, allowedHow, entrySentence, lifetimeWords, span } from "./journal-words";

const T0 = new Date(2026, 10, 29, 14, 0, 0).getTime();
const EPOCH = "01JQ7RA0B6G5X3T1M2N4P6R8SV";
const AGENT = { client: "claude-code 2.1.3", process: "zsh -> claude -> postern (pid 4242)", cwd: "/home/u/shop" };

function call(fields: Partial<ActivityRow> = {}): ActivityRow {
  return {
    seq: 40,
    time: T0,
    session: 27,
    server: "ci",
    epoch: EPOCH,
    launch: null,
    tool: "deploy",
    call: "7",
    decision: "allowed",
    outcome: "error",
    durationMs: 1200,
    agent: AGENT,
    authority: "grant",
    grant: { grant: "G", end: { kind: "until", unixMs: T0 + 15 * 60_000 }, issued: T0 },
    asked: null,
    ...fields,
  };
}

function entry(fields: Partial<AuditEntry> = {}): AuditEntry {
  return {
    seq: 40,
    time: T0,
    kind: "tool_call_intent",
    version: 1,
    hash: "ab".repeat(32),
    problem: null,
    body: { state: "sealed", reason: "the vault is locked" },
    call: call(),
    session: { id: 27, server: "ci", agent: AGENT },
    ...fields,
  };
}

describe("the journals in words", () => {
  it("says a grant's lifetime as it was given", () => {
    const life = (end: unknown, issued: number | null = T0) => lifetimeWords({ grant: "G", end, issued });
    expect(life({ kind: "thisCallOnly", call: "01JQ" })).toBe("this call");
    expect(life({ kind: "untilRunEnds" })).toBe("until the run ends");
    expect(life({ kind: "until", unixMs: T0 + 15 * 60_000 })).toBe("15 min");
    expect(life({ kind: "until", unixMs: T0 + 60 * 60_000 })).toBe("1 h");
    expect(life({ kind: "until", unixMs: T0 + 60 * 60_000 }, null)).toBe("for a time");
    expect(life(null, null)).toBe("a grant the journal has no record of");
  });

  it("names the agent by its own name, else the process before the shim", () => {
    expect(agentWords(AGENT)).toBe("claude-code 2.1.3");
    expect(agentWords({ client: null, process: "bash -> codex -> postern (pid 77)", cwd: null })).toBe("codex (pid 77)");
    expect(agentWords({ client: "", process: null, cwd: null })).toBe("an unnamed agent");
  });

  it("says how a call went, or why it was refused", () => {
    expect(allowedHow(call())).toBe("your grant · 15 min");
    expect(allowedHow(call({ decision: "observed", authority: "observed", grant: null }))).toBe("observe mode (nobody asked)");
    expect(allowedHow(call({ authority: "admitted", grant: null }))).toBe("the run you admitted");
    expect(allowedHow(call({ decision: "vault_locked", outcome: "refused", authority: null, grant: null }))).toBe("Postern was locked");
    expect(allowedHow(call({ decision: "some_new_code", outcome: "refused", authority: null, grant: null }))).toBe("some_new_code");
  });

  it("writes durations short", () => {
    expect([span(850), span(1200), span(45_000), span(15 * 60_000), span(150 * 60_000)]).toEqual(["850 ms", "1.2 s", "45 s", "15 min", "2 h 30 min"]);
  });
});

describe("an audit record's sentence", () => {
  it("says who called what, under which launch, allowed how, and how it ended", () => {
    expect(entrySentence(entry())).toBe("claude-code 2.1.3 called deploy on ci (launch 01JQ7R…R8SV), allowed by your grant · 15 min; it returned an error after 1.2 s.");
    const asked = call({ asked: { approval: "A", requested: T0 - 12_000, answered: T0, answer: "granted", by: "terminal" }, outcome: "ok", durationMs: 30 });
    expect(entrySentence(entry({ call: asked }))).toBe(
      "claude-code 2.1.3 called deploy on ci (launch 01JQ7R…R8SV), allowed by your grant · 15 min (you approved on a terminal after 12 s); it returned after 30 ms.",
    );
    const denied = call({ decision: "approval_denied", outcome: "refused", authority: null, grant: null, durationMs: null, asked: { approval: "A", requested: T0 - 3_000, answered: T0, answer: "denied", by: "tray" } });
    expect(entrySentence(entry({ call: denied }))).toBe("claude-code 2.1.3 called deploy on ci (launch 01JQ7R…R8SV); refused: you denied it from the tray (it waited 3.0 s for you).");
    const refused = call({ decision: "approval_timeout", outcome: "refused", authority: null, grant: null, durationMs: null, asked: { approval: "A", requested: T0 - 120_000, answered: T0, answer: "expired", by: null } });
    expect(entrySentence(entry({ call: refused }))).toBe("claude-code 2.1.3 called deploy on ci (launch 01JQ7R…R8SV); refused: nobody answered in time (it waited 2 min for you).");
    expect(entrySentence(entry({ call: call({ outcome: null, durationMs: null }) }))).toContain("no result is on record");
    // A launch the journal numbers is said by its number, as everywhere else.
    expect(entrySentence(entry({ call: call({ launch: 7 }) }))).toMatch(/^claude-code 2\.1\.3 called deploy on ci \(launch 7\), allowed/);
  });

  it("says what other records are about, naming the agent of their session", () => {
    const opened = (kind: string, event: Record<string, unknown>) => entry({ kind, call: null, body: { state: "opened", event: { type: kind, session: 1, ...event } } });
    expect(entrySentence(opened("approval_requested", { tool: "deploy", server: "ci" }))).toBe("claude-code 2.1.3 asked you to approve deploy on ci.");
    expect(entrySentence(opened("server_replaced", { reason: "restart" }))).toBe("ci moved to a new launch for claude-code 2.1.3: restart.");
    expect(entrySentence(opened("approval_granted", { by: "window" }))).toBe("You approved a request of claude-code 2.1.3 in the approval window.");
    expect(entrySentence(opened("approval_denied", { by: "terminal" }))).toBe("You denied a request of claude-code 2.1.3 on a terminal.");
    // A record from before the log kept where: just "you".
    expect(entrySentence(opened("approval_granted", {}))).toBe("You approved a request of claude-code 2.1.3.");
    expect(entrySentence(entry({ kind: "vault_unlocked", call: null, session: null }))).toBeNull();
  });

  it("leads the record panel, the session by its journal id, the JSON folded", () => {
    const opened = entry({ body: { state: "opened", event: { type: "tool_call_intent", session: 1, tool: "deploy" } } });
    const root = document.createElement("div");
    root.append(...renderEntry(opened));
    expect(root.querySelector(".entry-summary")?.textContent).toMatch(/^claude-code 2\.1\.3 called deploy on ci/);
    expect(root.querySelector(".entry-session")?.textContent).toBe("session 27 · claude-code 2.1.3 on ci");
    const details = root.querySelector<HTMLDetailsElement>("details.entry-details")!;
    expect(details.open).toBe(false);
    expect(details.querySelector(".entry-body")?.textContent).toContain('"tool": "deploy"');
    // The summary comes before the facts, which come before the JSON.
    const order = [...root.children].map((c) => c.className.split(" ")[0]);
    expect(order).toEqual(["panel-head", "entry-summary", "entry-grid", "entry-ok", "entry-details"]);
  });
});
