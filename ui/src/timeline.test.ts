import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

import type { AuditEntry, Timeline, TimelineQuery } from "./bindings";
import { entryPanel } from "./entry";
import type { TimelineLane } from "./bindings";
import { bucketed, EPOCH_A, EPOCH_B, EPOCH_C, rebuilt, T0, timeline } from "./fixtures/timeline";
import { timelineView } from "./timeline";
import { FRAME, LABEL_ASCENT, LABEL_CHAR, LABEL_DESCENT, labelWidth, layout, stamp, ticks, timeAt } from "./timeline-layout";

const MIN = 60_000;
const WIDTH = 1000;
const frame = { ...FRAME, width: WIDTH, now: T0 + 9.5 * MIN };
/** Where time `t` lands in a 1000 px drawing of the fixture's ten minutes. */
const x = (t: number): number => FRAME.labelWidth + ((t - T0) / (10 * MIN)) * (WIDTH - 12 - FRAME.labelWidth);

describe("the timeline's layout", () => {
  const l = layout(timeline, frame);

  it("draws one lane per agent session, top to bottom, named by the agent, then its server and directory", () => {
    expect(l.lanes.map((lane) => [lane.id, lane.y, lane.title, lane.subtitle, lane.client, lane.status])).toEqual([
      [1, FRAME.axisHeight, "claude-code 2.0.14", "deploy · in shop", "claude-code 2.0.14", "ended"],
      [2, FRAME.axisHeight + FRAME.laneHeight, "Cursor 1.7.2", "clock", "Cursor 1.7.2", "running"],
    ]);
    // The tooltip says it all, the session by the number Activity and `--session` use.
    expect(l.lanes[0]!.tooltip).toBe("claude-code 2.0.14 · in /home/u/shop · on deploy · session 1 · zsh → claude → postern (pid 4242)");
    expect(l.height).toBe(FRAME.axisHeight + 2 * FRAME.laneHeight);
    // An ended lane stops at its end; a running one goes on to now.
    expect(l.lanes[0]!.x1).toBeCloseTo(x(T0 + 8 * MIN));
    expect(l.lanes[1]!.x1).toBeCloseTo(x(T0 + 9.5 * MIN));
  });

  it("draws each wait for you from the request to its answer, an open one to the lane's end", () => {
    const [granted, denied] = l.lanes[0]!.waits;
    expect([granted!.answer, granted!.seq]).toEqual(["granted", 4]);
    expect(granted!.x0).toBeCloseTo(x(T0 + 0.5 * MIN));
    expect(granted!.x1).toBeCloseTo(x(T0 + 1 * MIN));
    expect(granted!.title).toBe(`${stamp(T0 + 0.5 * MIN)} · waiting for you: deploy · you approved after 30 s`);
    // Never narrower than 3 px, so a quick answer still shows.
    expect(denied!.x1 - denied!.x0).toBeCloseTo(Math.max(3, x(T0 + 4.6 * MIN) - x(T0 + 4.55 * MIN)));
    // Where the person answered, when the log says (the first answer predates it).
    expect(denied!.title).toContain("you denied from the tray after 3.0 s");
    const [open] = l.lanes[1]!.waits;
    expect(open!.answer).toBe("open");
    expect(open!.x1).toBeCloseTo(x(T0 + 9.5 * MIN));
    expect(open!.title).toContain("no answer on record");
  });

  it("draws each epoch as a band until the next one starts, neighbours shaded apart", () => {
    const [a, b] = l.lanes[0]!.bands;
    expect([a!.epoch, a!.shade, b!.epoch, b!.shade]).toEqual([EPOCH_A, 0, EPOCH_B, 1]);
    expect(a!.x0).toBeCloseTo(x(T0 + 0.2 * MIN));
    expect(a!.x1).toBeCloseTo(x(T0 + 4 * MIN));
    expect(b!.x0).toBeCloseTo(x(T0 + 4 * MIN));
    // The last epoch runs to the lane's end.
    expect(b!.x1).toBeCloseTo(x(T0 + 8 * MIN));
    expect(a!.label?.text).toBe("01JQ7R…XWQD");
    expect(l.lanes[1]!.bands.map((band) => band.epoch)).toEqual([EPOCH_C]);
  });

  it("puts calls, refusals with their codes, approvals and rebuilds where they happened", () => {
    const marks = l.lanes[0]!.marks;
    expect(marks.map((m) => [m.kind, m.seq, m.tone])).toEqual([
      ["approval", 5, "ok"],
      ["call", 6, "ok"],
      ["call", 8, "warn"],
      ["rebuild", 11, "warn"],
      ["grantEnded", null, "idle"],
      ["refusal", 13, "bad"],
      ["refusal", 14, "bad"],
      ["call", 20, "ok"],
    ]);
    expect(marks.find((m) => m.seq === 11)!.x).toBeCloseTo(x(T0 + 4 * MIN));
    expect(marks.find((m) => m.seq === 11)!.title).toContain("new epoch: 01JQ7R…XWQD → 01JQ7R…R8SV");
    // A code is written beside its refusal unless it would run into the previous one.
    expect(marks.filter((m) => m.kind === "refusal").map((m) => m.label?.text ?? null)).toEqual(["authorization_stale", null]);
    expect(marks.find((m) => m.seq === 14)!.title).toContain("deploy refused: approval_denied");
    expect(marks.find((m) => m.seq === 20)!.title).toContain("no result yet");
    expect(marks.find((m) => m.seq === 5)!.title).toContain("approved: deploy for epoch 01JQ7R…XWQD");
    expect(l.lanes[1]!.marks.map((m) => [m.kind, m.tone])).toEqual([["call", "idle"]]);
  });

  it("never lets two labels in a lane overlap: the later one is dropped, one far enough away is kept", () => {
    // Refusals 3 s apart (about 40 px; the fourth 126 px after the first, inside its 129 px code), then one well clear of the first's code, with epochs
    // changing among them; a one-minute window so the bands are wide enough to be named.
    const at = (s: number): number => T0 + s * 1000;
    const codes = ["authorization_stale", "approval_denied", "vault_locked", "upstream_gone", "authorization_stale"];
    const seconds = [10, 13, 16, 19.5, 45];
    const lane: TimelineLane = {
      ...rebuilt,
      started: T0,
      ended: at(60),
      lastSeen: at(60),
      bands: [
        { epoch: EPOCH_A, first: at(0), last: at(11), seq: 1 },
        { epoch: EPOCH_B, first: at(12), last: at(40), seq: 2 },
        { epoch: EPOCH_C, first: at(41), last: at(60), seq: 3 },
      ],
      marks: seconds.map((s, i) => ({ kind: "refusal", time: at(s), seq: 100 + i, tool: "deploy", epoch: EPOCH_A, code: codes[i]! })),
      waits: [],
    };
    const l = layout({ ...timeline, since: T0, until: at(60), lanes: [lane] }, frame);
    const shown = [...l.lanes[0]!.bands, ...l.lanes[0]!.marks].flatMap((i) => (i.label === null ? [] : [i.label]));
    const boxes = shown.map((s) => ({ text: s.text, x0: s.x, x1: s.x + s.text.length * LABEL_CHAR, y0: s.y - LABEL_ASCENT, y1: s.y + LABEL_DESCENT }));
    for (const [i, a] of boxes.entries()) {
      for (const b of boxes.slice(i + 1)) {
        const overlap = a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1;
        expect(overlap, `${a.text} and ${b.text}`).toBe(false);
      }
    }
    const refusals = l.lanes[0]!.marks.map((m) => m.label?.text ?? null);
    // The first code is written; the three crowded after it are not, but keep their tooltips.
    expect(refusals).toEqual(["authorization_stale", null, null, null, "authorization_stale"]);
    expect(l.lanes[0]!.marks[1]!.title).toContain("refused: approval_denied");
    // The epochs are named in their bands (a row above the codes), each band wide enough.
    expect(l.lanes[0]!.bands.map((b) => b.label?.text ?? null)).toEqual(["01JQ7R…XWQD", "01JQ7R…R8SV", "01JQ7R…0000"]);
    // The estimate is the same as the layout's.
    expect(labelWidth("authorization_stale")).toBe(19 * LABEL_CHAR);
  });

  it("shortens a label that would run past the picture's right edge, and drops one with too little room", () => {
    const refusal = (time: number, seq: number): TimelineLane["marks"][number] => ({ kind: "refusal", time, seq, tool: "deploy", epoch: null, code: "authorization_stale" });
    const near: TimelineLane = { ...rebuilt, bands: [], waits: [], marks: [refusal(T0 + 9 * MIN, 1)] };
    const edge: TimelineLane = { ...rebuilt, id: 2, bands: [], waits: [], marks: [refusal(T0 + 10 * MIN, 2)] };
    const l = layout({ ...timeline, lanes: [near, edge] }, frame);
    const shortened = l.lanes[0]!.marks[0]!.label!;
    expect(shortened.text).toBe("authorizati…");
    expect(shortened.x + labelWidth(shortened.text)).toBeLessThanOrEqual(WIDTH);
    expect(l.lanes[1]!.marks[0]!.label).toBeNull();
    expect(l.lanes[1]!.marks[0]!.title).toContain("refused: authorization_stale");
  });

  it("places labels by their measured width, not the estimate, when it can measure", () => {
    // A font twice as wide as the estimate: the third code, clear of the first by the
    // estimate (which would keep it), overlaps it as drawn, so it is dropped; the edge
    // shortens by the measure too.
    const wide = (text: string): number => [...text].length * LABEL_CHAR * 2;
    const refusal = (time: number, seq: number): TimelineLane["marks"][number] => ({ kind: "refusal", time, seq, tool: "deploy", epoch: null, code: "authorization_stale" });
    const lane: TimelineLane = { ...rebuilt, bands: [], waits: [], marks: [refusal(T0 + 2 * MIN, 1), refusal(T0 + 4 * MIN, 2), refusal(T0 + 9 * MIN, 3)] };
    const estimated = layout({ ...timeline, lanes: [lane] }, frame);
    expect(estimated.lanes[0]!.marks.map((m) => m.label?.text ?? null)).toEqual(["authorization_stale", "authorization_stale", "authorizati…"]);
    const measured = layout({ ...timeline, lanes: [lane] }, { ...frame, measure: wide });
    const labels = measured.lanes[0]!.marks.map((m) => m.label);
    expect(labels.map((l) => l?.text ?? null)).toEqual(["authorization_stale", null, "autho…"]);
    expect(labels[2]!.x + wide(labels[2]!.text)).toBeLessThanOrEqual(WIDTH);
  });

  it("leaves out marks outside the window (a zoom drawn before its answer arrives)", () => {
    const zoomed = layout({ ...timeline, since: T0 + 3 * MIN, until: T0 + 5 * MIN }, frame);
    expect(zoomed.lanes[0]!.marks.map((m) => m.seq)).toEqual([11, null, 13, 14]);
    // Bands are clipped to the plot.
    expect(zoomed.lanes[0]!.bands[0]!.x0).toBe(FRAME.labelWidth);
  });

  it("draws counts per bucket when the engine did not give every call", () => {
    const b = layout(bucketed, frame);
    expect(b.lanes[0]!.marks.map((m) => m.kind)).toEqual(["rebuild"]);
    const bars = b.lanes[1]!.bars;
    expect(bars.map((bar) => [bar.calls, bar.refused])).toEqual([
      [0.5, 0],
      [1, 0.25],
    ]);
    expect(bars[0]!.x).toBeCloseTo(x(T0 + 5 * MIN));
    expect(bars[1]!.title).toMatch(/: 800 calls, 200 refused, 1 approved$/);
  });

  it("labels the axis at round times and maps x back to time", () => {
    const marks = ticks(T0, T0 + 10 * MIN, 800);
    expect(marks.map((t) => t.label)).toEqual(["14:00", "14:02", "14:04", "14:06", "14:08", "14:10"]);
    expect(ticks(T0, T0 + 30_000, 800).map((t) => t.label).slice(0, 3)).toEqual(["14:00:00", "14:00:05", "14:00:10"]);
    expect(timeAt(l, x(T0 + 4 * MIN))).toBeCloseTo(T0 + 4 * MIN, -1);
    // In the picture, a tick label that would run past the right edge is left out (its line stays).
    expect(l.ticks.map((t) => t.label?.text ?? null)).toEqual(["14:00", "14:02", "14:04", "14:06", "14:08", null]);
  });
});

describe("the timeline view", () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  function setup(answer: (q: TimelineQuery) => Timeline = () => timeline) {
    const queries: TimelineQuery[] = [];
    const api = {
      timeline: vi.fn(async (q: TimelineQuery) => {
        queries.push(q);
        return answer(q);
      }),
    };
    const entries = { auditEntry: vi.fn(async (seq: number): Promise<AuditEntry | null> => entry(seq)) };
    const openSession = vi.fn();
    const view = timelineView(api, { entry: entryPanel(entries), openSession, now: () => T0 + 9.5 * MIN, settleMs: 100, width: WIDTH });
    document.body.replaceChildren(view.el);
    return { view, api, queries, entries, openSession };
  }

  it("asks for the whole range first, then draws lanes, bands and marks as SVG", async () => {
    const { view, queries } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);

    expect(queries[0]).toMatchObject({ since: null, until: null, lanesAfter: null, maxLanes: 50 });
    const lanes = [...document.querySelectorAll(".timeline-svg .lane")];
    expect(lanes.map((l) => l.getAttribute("data-lane"))).toEqual(["1", "2"]);
    expect([...lanes[0]!.querySelectorAll(".band")].map((b) => b.getAttribute("data-epoch"))).toEqual([EPOCH_A, EPOCH_B]);
    expect(lanes[0]!.querySelectorAll(".mark-rebuild").length).toBe(1);
    expect([...lanes[0]!.querySelectorAll(".mark-refusal .mark-label")].map((t) => t.textContent)).toEqual(["authorization_stale"]);
    expect(document.querySelector(".timeline-range")?.textContent).toBe("2026-11-29 14:00 → 14:10");
  });

  it("zooms with a new query for the narrower window, and Fit asks for everything again", async () => {
    const { view, queries } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);

    // − and + are named for a screen reader.
    expect(["zoom-out", "zoom-in"].map((c) => document.querySelector(`.${c}`)?.getAttribute("aria-label"))).toEqual(["Zoom out", "Zoom in"]);
    document.querySelector<HTMLButtonElement>(".zoom-in")!.click();
    await vi.advanceTimersByTimeAsync(100);
    expect(queries[1]).toMatchObject({ since: T0 + 2.5 * MIN, until: T0 + 7.5 * MIN });

    document.querySelector<HTMLButtonElement>(".zoom-out")!.click();
    document.querySelector<HTMLButtonElement>(".zoom-out")!.click();
    await vi.advanceTimersByTimeAsync(100);
    // Two clicks while the user is still zooming: one query, for where they stopped.
    expect(queries.length).toBe(3);
    expect(queries[2]).toMatchObject({ since: T0 - 5 * MIN, until: T0 + 15 * MIN });

    document.querySelector<HTMLButtonElement>(".zoom-fit")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(queries[3]).toMatchObject({ since: null, until: null });
  });

  it("zooms around the pointer with the wheel", async () => {
    const { view, queries } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const canvas = document.querySelector(".timeline-canvas")!;
    const wheel = new WheelEvent("wheel", { deltaY: -100, cancelable: true });
    // happy-dom's WheelEvent leaves out the pointer's position.
    Object.defineProperty(wheel, "clientX", { value: x(T0 + 2 * MIN) });
    canvas.dispatchEvent(wheel);
    await vi.advanceTimersByTimeAsync(100);

    const q = queries[1]!;
    expect((q.until! - q.since!) / MIN).toBeCloseTo(8);
    // The time under the pointer stays under the pointer.
    expect((T0 + 2 * MIN - q.since!) / (q.until! - q.since!)).toBeCloseTo(0.2, 1);
  });

  it("opens the audit record of a clicked mark, and a lane's Activity from its label", async () => {
    const { view, entries, openSession } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);

    document.querySelector('.mark[data-seq="13"]')!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(entries.auditEntry).toHaveBeenCalledWith(13);
    expect(document.querySelector(".entry h2")?.textContent).toBe("Audit record #13");
    expect(document.querySelector(".entry .entry-body")?.textContent).toContain('"code": "authorization_stale"');
    // The JSON is folded under the record's facts.
    expect(document.querySelector(".entry details.entry-details .entry-body")).not.toBeNull();
    expect(document.querySelector<HTMLDetailsElement>(".entry details.entry-details")!.open).toBe(false);

    document.querySelector('.lane[data-lane="2"] .lane-label')!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(openSession).toHaveBeenCalledWith(2);
  });

  it("keeps the clicked mark selected across zooms and refreshes, until another is clicked or the panel closes", async () => {
    let answer = timeline;
    const { view } = setup(() => answer);
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const selected = (): string[] => [...document.querySelectorAll(".timeline-svg .selected")].map((el) => `${el.getAttribute("class")}#${el.getAttribute("data-seq")}`);
    expect(selected()).toEqual([]);

    document.querySelector('.mark[data-seq="6"]')!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(selected()).toEqual(["mark mark-call tone-ok selected#6"]);
    expect(document.querySelector('.mark[data-seq="6"]')!.getAttribute("aria-current")).toBe("true");

    // Zoomed: drawn again at once from the data in hand, then from the engine's answer.
    document.querySelector<HTMLButtonElement>(".zoom-out")!.click();
    expect(selected()).toEqual(["mark mark-call tone-ok selected#6"]);
    // The engine's answer is new data: the same record, its call now failed, a new call after it.
    const [lane] = timeline.lanes;
    answer = {
      ...timeline,
      since: T0 - 5 * MIN,
      until: T0 + 15 * MIN,
      lanes: [
        {
          ...lane!,
          marks: [
            ...lane!.marks.map((m) => (m.kind === "call" && m.seq === 6 ? { ...m, outcome: "tool_error" } : m)),
            { kind: "call", time: T0 + 7.5 * MIN, seq: 30, tool: "deploy", epoch: EPOCH_B, decision: "allowed", outcome: "ok" },
          ],
        },
      ],
    };
    await vi.advanceTimersByTimeAsync(100);
    expect(document.querySelector('.mark[data-seq="30"]')).not.toBeNull();
    expect(selected()).toEqual(["mark mark-call tone-warn selected#6"]);

    // Another mark: it takes the selection (and a wait opening the same record is selected with it).
    document.querySelector('.mark[data-seq="13"]')!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(selected()).toEqual(["wait wait-denied selected#13", "mark mark-refusal tone-bad selected#13"]);
    expect(document.querySelector('.mark[data-seq="6"]')!.hasAttribute("aria-current")).toBe(false);

    // Closing the panel clears it, and a redraw does not bring it back.
    document.querySelector<HTMLButtonElement>(".entry .entry-close")!.click();
    expect(selected()).toEqual([]);
    document.querySelector<HTMLButtonElement>(".zoom-fit")!.click();
    await vi.advanceTimersByTimeAsync(0);
    expect(document.querySelectorAll(".timeline-svg .mark").length).toBeGreaterThan(0);
    expect(selected()).toEqual([]);
  });

  it("labels each lane with the agent's own name, its server and directory under it, the process chain in the tooltip", async () => {
    const { view } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const label = document.querySelector('.lane[data-lane="1"] .lane-label')!;
    expect(label.querySelector(".lane-title")?.textContent).toBe("claude-code 2.0.14");
    expect(label.querySelector(".lane-sub")?.textContent).toBe("deploy · in shop");
    expect(label.querySelector("title")?.textContent).toContain("zsh → claude → postern (pid 4242)");
    expect(label.querySelector("title")?.textContent).toContain("session 1");
  });

  it("draws the waits for you under the lane, each opening its request's record", async () => {
    const { view, entries } = setup();
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const waits = [...document.querySelectorAll(".timeline-svg .wait")];
    expect(waits.map((w) => w.getAttribute("class"))).toEqual(["wait wait-granted", "wait wait-denied", "wait wait-open"]);
    expect(waits[0]!.querySelector("title")?.textContent).toContain("waiting for you: deploy · you approved after 30 s · record #4");
    waits[1]!.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    await vi.advanceTimersByTimeAsync(0);
    expect(entries.auditEntry).toHaveBeenCalledWith(13);
    expect(document.querySelector(".timeline-legend")?.textContent).toContain("waiting for you");
  });

  it("loads more lanes a page at a time", async () => {
    const first = { ...timeline, lanes: [timeline.lanes[0]!], moreLanes: true };
    const second = { ...timeline, lanes: [timeline.lanes[1]!], moreLanes: false };
    const { view, queries } = setup((q) => (q.lanesAfter === null ? first : second));
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    const more = document.querySelector<HTMLButtonElement>(".timeline-more")!;
    expect(more.hidden).toBe(false);

    more.click();
    await vi.advanceTimersByTimeAsync(0);

    expect(queries[1]).toMatchObject({ lanesAfter: 1, since: T0, until: T0 + 10 * MIN });
    expect([...document.querySelectorAll(".timeline-svg .lane")].map((l) => l.getAttribute("data-lane"))).toEqual(["1", "2"]);
    expect(more.hidden).toBe(true);
  });

  it("follows the engine while it shows the whole range, not while zoomed", async () => {
    let clock = T0 + 9.5 * MIN;
    const queries: TimelineQuery[] = [];
    const api = { timeline: async (q: TimelineQuery) => (queries.push(q), timeline) };
    const view = timelineView(api, { entry: entryPanel({ auditEntry: async () => null }), now: () => clock, settleMs: 100, width: WIDTH });
    document.body.replaceChildren(view.el);
    view.shown();
    await vi.advanceTimersByTimeAsync(0);

    view.poke();
    await vi.advanceTimersByTimeAsync(0);
    expect(queries.length).toBe(1); // too soon after the last read
    clock += 6000;
    view.poke();
    view.poke();
    await vi.advanceTimersByTimeAsync(0);
    expect(queries.length).toBe(2);

    document.querySelector<HTMLButtonElement>(".zoom-in")!.click();
    await vi.advanceTimersByTimeAsync(100);
    clock += 6000;
    view.poke();
    await vi.advanceTimersByTimeAsync(0);
    expect(queries.length).toBe(3); // the zoom's own query, and no more
  });

  it("says when there is nothing yet", async () => {
    const { view } = setup(() => ({ ...timeline, lanes: [] }));
    view.shown();
    await vi.advanceTimersByTimeAsync(0);
    expect(document.querySelector(".timeline-empty")?.textContent).toContain("No agent sessions yet");
  });
});

function entry(seq: number): AuditEntry {
  return {
    seq,
    time: T0 + 4.5 * MIN,
    kind: "call_refused",
    version: 1,
    hash: "ab".repeat(32),
    problem: null,
    body: { state: "opened", event: { kind: "call_refused", tool: "deploy", code: "authorization_stale", arguments: { branch: "string" } } },
    call: null,
    session: null,
  };
}
