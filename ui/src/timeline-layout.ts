// The Sessions timeline's geometry, from one `Timeline` answer: one lane per agent session,
// named by the agent (its own name, its directory, the server, the session number), its
// server's execution epochs as bands, the times it waited for a person (an approval request to
// its answer) as segments under its line, its calls, refusals, approvals and rebuilds as marks
// (or, when the engine only counted them, bars per bucket), and the time axis. Pure: numbers
// in, numbers out; src/timeline.ts draws them.

import type { ApprovalWait, EpochBand, Timeline, TimelineLane, TimelineMark } from "./bindings";
import { shortEpoch } from "./format";
import { agentWords, answeredWhere, dirWords, sessionName, span } from "./journal-words";

/** How big things are, in pixels. */
export interface Frame {
  /** The whole drawing's width. */
  width: number;
  /** The lane labels' column, left of the plot. */
  labelWidth: number;
  /** One lane's height. */
  laneHeight: number;
  /** The axis' height, above the lanes. */
  axisHeight: number;
  /** Now, for lanes still running. */
  now: number;
  /**
   * How wide a label's text is drawn (src/timeline.ts measures it in the webview's own font);
   * without it, the estimate from its characters (`labelWidth`).
   */
  measure?: Measure;
}

/** How wide `text` is drawn as a label, in pixels. */
export type Measure = (text: string) => number;

export const FRAME: Omit<Frame, "width" | "now"> = { labelWidth: 190, laneHeight: 52, axisHeight: 26 };

export type MarkShape = "call" | "refusal" | "approval" | "grantEnded" | "rebuild";

export interface MarkBox {
  kind: MarkShape;
  x: number;
  /** The audit record to open, when there is one. */
  seq: number | null;
  time: number;
  /** A tone for the CSS: ok, warn, bad, idle. */
  tone: "ok" | "warn" | "bad" | "idle";
  /** What it says on hover. */
  title: string;
  /** Text drawn next to it (a refusal's code), when there is room. */
  label: Label | null;
}

/**
 * A word written in the picture, where it is drawn: `x` its left edge, `y` its baseline, in the
 * lane's coordinates (the axis' for a tick). Its width is measured (`Frame.measure`; else
 * estimated from its characters, `labelWidth`), so labels that would overlap can be left out
 * before anything is drawn.
 */
export interface Label {
  text: string;
  x: number;
  y: number;
}

/** Labels are set in the small monospaced size (--text-xs, 11 px): about this wide a character
 * (the estimate where nothing can measure text, as in tests). */
export const LABEL_CHAR = 6.8;
/** A label's height above its baseline and below it (descenders). */
export const LABEL_ASCENT = 9;
export const LABEL_DESCENT = 3;
/** The least room kept between two labels, so they read as two. */
export const LABEL_GAP = 6;
/** Where a lane's line runs, from its top; marks sit on it. */
export const LANE_MID = 30;

/** A label's estimated width, from its characters. */
export function labelWidth(text: string): number {
  return [...text].length * LABEL_CHAR;
}

/** The box a label covers, its text `measure`d. */
export function labelBox(l: Label, measure: Measure = labelWidth): { x0: number; x1: number; y0: number; y1: number } {
  return { x0: l.x, x1: l.x + measure(l.text), y0: l.y - LABEL_ASCENT, y1: l.y + LABEL_DESCENT };
}

export interface BandBox {
  epoch: string;
  x0: number;
  x1: number;
  /** 0, 1, 0, 1, ... along the lane, so neighbouring epochs look different. */
  shade: number;
  /** The epoch shortened, when the band is wide enough to say it and no other label is there. */
  label: Label | null;
  seq: number;
}

export interface BarBox {
  x: number;
  width: number;
  /** Heights, 0..1 of the tallest bucket in the picture. */
  calls: number;
  refused: number;
  title: string;
}

/** A time the agent waited for a person: an approval request until its answer. */
export interface WaitBox {
  x0: number;
  x1: number;
  /** The request's audit record. */
  seq: number;
  /** `granted`, `denied`, `expired`, or `open` (no answer on record). */
  answer: string;
  title: string;
}

export interface LaneBox {
  id: number;
  y: number;
  /** The agent by its own name ("claude-code 2.1.3"), else its process. */
  title: string;
  /** Under it: the server and the agent's directory ("deploy · in shop"). */
  subtitle: string;
  /** Everything, for the tooltip: name, directory, server, session, process chain. */
  tooltip: string;
  /** The agent's self-reported name (`clientInfo`), when it gave one. */
  client: string | null;
  status: string;
  /** The lane's line: its session from start to end (or now), clipped to the window. */
  x0: number;
  x1: number;
  bands: BandBox[];
  waits: WaitBox[];
  marks: MarkBox[];
  bars: BarBox[];
}

export interface Tick {
  x: number;
  /** Its time, unless it would run into the previous tick's or past the picture's edge. */
  label: Label | null;
}

export interface Layout {
  since: number;
  until: number;
  width: number;
  height: number;
  plot: { x0: number; x1: number };
  lanes: LaneBox[];
  ticks: Tick[];
}

/** Lays out `timeline` in a drawing `frame.width` wide. */
export function layout(timeline: Timeline, frame: Frame): Layout {
  const { since, until } = timeline;
  const x0 = frame.labelWidth;
  const measure = frame.measure ?? labelWidth;
  const x1 = Math.max(x0 + 1, frame.width - 12);
  const scale = (t: number): number => x0 + ((t - since) / Math.max(1, until - since)) * (x1 - x0);
  const clampX = (t: number): number => Math.min(x1, Math.max(x0, scale(t)));
  const tallest = Math.max(1, ...timeline.lanes.flatMap((l) => l.buckets.map((b) => b.calls)));
  const lanes = timeline.lanes.map((lane, i) => {
    const y = frame.axisHeight + i * frame.laneHeight;
    const end = laneEnd(lane, frame.now);
    const agent = { client: lane.client, process: lane.agent, cwd: lane.cwd };
    const dir = dirWords(lane.cwd);
    const laneBands = bands(lane.bands, end, clampX, measure);
    const laneMarks = marks(lane.marks, scale, x0, x1);
    place([...laneBands, ...laneMarks], frame.width, measure);
    return {
      id: lane.id,
      y,
      title: agentWords(agent),
      subtitle: dir === null ? lane.server : `${lane.server} · in ${dir}`,
      tooltip: [agentWords(agent), lane.cwd === null ? null : `in ${lane.cwd}`, `on ${lane.server}`, sessionName(lane.id), lane.agent]
        .filter((s): s is string => s !== null && s !== "")
        .join(" · "),
      client: lane.client !== null && lane.client !== "" ? lane.client : null,
      status: lane.status,
      x0: clampX(lane.started),
      x1: clampX(end),
      bands: laneBands,
      waits: (lane.waits ?? []).map((w) => waitBox(w, end, clampX)),
      marks: laneMarks,
      bars: bars(lane, timeline.bucketWidth, tallest, clampX),
    };
  });
  return {
    since,
    until,
    width: frame.width,
    height: frame.axisHeight + Math.max(1, lanes.length) * frame.laneHeight,
    plot: { x0, x1 },
    lanes,
    ticks: axisTicks(since, until, x0, x1, scale, frame.width, measure),
  };
}

/**
 * Leaves out the labels that would collide: in order along the lane, a label that would
 * overlap one already kept is dropped (its mark keeps its tooltip), and one that would run past
 * the picture's right edge is shortened to fit, or dropped when too little of it would be left.
 */
export function place(items: { label: Label | null }[], width: number, measure: Measure = labelWidth): void {
  const kept: ReturnType<typeof labelBox>[] = [];
  const order = items.filter((i) => i.label !== null).sort((a, b) => a.label!.x - b.label!.x);
  for (const item of order) {
    const label = fit(item.label!, width, measure);
    const box = label === null ? null : labelBox(label, measure);
    if (box === null || kept.some((k) => box.x0 < k.x1 + LABEL_GAP && k.x0 < box.x1 + LABEL_GAP && box.y0 < k.y1 && k.y0 < box.y1)) {
      item.label = null;
      continue;
    }
    item.label = label;
    kept.push(box);
  }
}

/** `label`, shortened with an ellipsis to end before `width`; `null` when fewer than 4 characters would fit. */
function fit(label: Label, width: number, measure: Measure): Label | null {
  const room = width - label.x;
  if (measure(label.text) <= room) return label;
  const chars = [...label.text];
  for (let keep = chars.length - 1; keep >= 3; keep--) {
    const text = `${chars.slice(0, keep).join("")}…`;
    if (measure(text) <= room) return { ...label, text };
  }
  return null;
}

function axisTicks(since: number, until: number, x0: number, x1: number, scale: (t: number) => number, width: number, measure: Measure): Tick[] {
  const out = ticks(since, until, x1 - x0).map((t): Tick => {
    const x = scale(t.time);
    return { x, label: { text: t.label, x: x + 3, y: 13 } };
  });
  place(out, width, measure);
  return out;
}

/** Where a lane stops: its end, its last record when interrupted, now while it runs. */
export function laneEnd(lane: TimelineLane, now: number): number {
  if (lane.ended !== null) return lane.ended;
  if (lane.status === "running") return Math.max(now, lane.lastSeen);
  return lane.lastSeen;
}

/** The time at `x` in a layout's plot (for zooming around the pointer). */
export function timeAt(l: Pick<Layout, "since" | "until" | "plot">, x: number): number {
  const f = (x - l.plot.x0) / Math.max(1, l.plot.x1 - l.plot.x0);
  return l.since + Math.min(1, Math.max(0, f)) * (l.until - l.since);
}

/**
 * Each epoch from its first record until the next epoch's first (or the lane's end): it ran
 * until it was replaced. At least 2 px wide, so a short epoch still shows.
 */
function bands(list: EpochBand[], end: number, x: (t: number) => number, measure: Measure): BandBox[] {
  const sorted = [...list].sort((a, b) => a.first - b.first);
  return sorted.map((band, i) => {
    const next = sorted[i + 1];
    const stop = next === undefined ? Math.max(band.last, end) : next.first;
    const a = x(band.first);
    const b = Math.max(a + 2, x(stop));
    const name = shortEpoch(band.epoch);
    // Said inside its band only: a narrower band leaves it to the tooltip.
    const label = b - a > measure(name) + 8 ? { text: name, x: a + 4, y: 16 } : null;
    return { epoch: band.epoch, x0: a, x1: b, shade: i % 2, label, seq: band.seq };
  });
}

/** An approval request from its asking to its answer (unanswered: to the lane's end), at least 3 px wide. */
function waitBox(wait: ApprovalWait, end: number, x: (t: number) => number): WaitBox {
  const stop = wait.answered ?? Math.max(end, wait.requested);
  const a = x(wait.requested);
  const b = Math.max(a + 3, x(stop));
  const answer = wait.answer ?? "open";
  const how: Record<string, string> = { granted: "you approved", denied: "you denied", expired: "nobody answered" };
  const where = answer === "expired" ? null : answeredWhere(wait.by);
  const ending = wait.answered === null ? "no answer on record" : `${how[answer] ?? answer}${where === null ? "" : ` ${where}`} after ${span(stop - wait.requested)}`;
  return { x0: a, x1: b, seq: wait.seq, answer, title: `${stamp(wait.requested)} · waiting for you: ${wait.tool} · ${ending}` };
}

function marks(list: TimelineMark[], scale: (t: number) => number, x0: number, x1: number): MarkBox[] {
  const out: MarkBox[] = [];
  for (const mark of [...list].sort((a, b) => a.time - b.time)) {
    const x = scale(mark.time);
    if (x < x0 - 0.5 || x > x1 + 0.5) continue;
    out.push(describe(mark, x));
  }
  return out;
}

function describe(mark: TimelineMark, x: number): MarkBox {
  const at = stamp(mark.time);
  switch (mark.kind) {
    case "call": {
      const failed = mark.outcome !== null && mark.outcome !== "ok";
      const tone = mark.decision === "no_intent" ? "warn" : failed ? "warn" : mark.decision === "observed" ? "idle" : "ok";
      const outcome = mark.outcome === null ? "no result yet" : mark.outcome;
      return {
        kind: "call",
        x,
        seq: mark.seq,
        time: mark.time,
        tone,
        title: `${at} · ${mark.tool} · ${mark.decision} · ${outcome}${epochNote(mark.epoch)}`,
        label: null,
      };
    }
    case "refusal":
      return {
        kind: "refusal",
        x,
        seq: mark.seq,
        time: mark.time,
        tone: "bad",
        title: `${at} · ${mark.tool} refused: ${mark.code}${epochNote(mark.epoch)}`,
        // Its code, beside and under the cross.
        label: { text: mark.code, x: x + 7, y: LANE_MID + 15 },
      };
    case "grantIssued":
      return {
        kind: "approval",
        x,
        seq: mark.seq,
        time: mark.time,
        tone: "ok",
        title: `${at} · approved: ${scope(mark.tools)} for epoch ${shortEpoch(mark.epoch)}`,
        label: null,
      };
    case "grantEnded":
      return {
        kind: "grantEnded",
        x,
        seq: mark.seq,
        time: mark.time,
        tone: "idle",
        title: `${at} · grant ended${mark.reason === null ? "" : `: ${mark.reason}`}`,
        label: null,
      };
    case "rebuild":
      return {
        kind: "rebuild",
        x,
        seq: mark.seq,
        time: mark.time,
        tone: "warn",
        title: `${at} · new epoch: ${shortEpoch(mark.from)} → ${shortEpoch(mark.to)}`,
        label: null,
      };
  }
}

function bars(lane: TimelineLane, width: number | null, tallest: number, x: (t: number) => number): BarBox[] {
  if (width === null) return [];
  return lane.buckets.map((b) => {
    const a = x(b.start);
    const w = Math.max(1, x(b.start + width) - a - 0.5);
    const refused = b.refused > 0 ? `, ${b.refused} refused` : "";
    const grants = b.grants > 0 ? `, ${b.grants} approved` : "";
    return {
      x: a,
      width: w,
      calls: b.calls / tallest,
      refused: b.refused / tallest,
      title: `${stamp(b.start)}: ${b.calls} call${b.calls === 1 ? "" : "s"}${refused}${grants}`,
    };
  });
}

/** What a grant's tool scope covers, in words. */
function scope(tools: unknown): string {
  if (tools === null || typeof tools !== "object") return "calls";
  const t = tools as { tools?: unknown; allToolsOfCatalog?: unknown };
  if (Array.isArray(t.tools)) return t.tools.join(", ");
  if (typeof t.allToolsOfCatalog === "string") return "every tool of its catalog";
  return "calls";
}

function epochNote(epoch: string | null): string {
  return epoch === null ? "" : ` · epoch ${shortEpoch(epoch)}`;
}

// --- the axis ----------------------------------------------------------------------------------

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const STEPS = [
  SECOND, 2 * SECOND, 5 * SECOND, 10 * SECOND, 15 * SECOND, 30 * SECOND,
  MINUTE, 2 * MINUTE, 5 * MINUTE, 10 * MINUTE, 15 * MINUTE, 30 * MINUTE,
  HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
  DAY, 2 * DAY, 7 * DAY, 14 * DAY, 30 * DAY, 90 * DAY, 365 * DAY,
];

/** Round times across `[since, until]`, about one per 110 px, labelled at their precision. */
export function ticks(since: number, until: number, pixels: number): { time: number; label: string }[] {
  const span = Math.max(1, until - since);
  const wanted = Math.max(2, Math.floor(pixels / 110));
  const step = STEPS.find((s) => span / s <= wanted) ?? STEPS[STEPS.length - 1]!;
  // Round in local time, so "14:00" and midnight land where a clock says they are.
  const offset = new Date(since).getTimezoneOffset() * MINUTE;
  const first = Math.ceil((since - offset) / step) * step + offset;
  const out: { time: number; label: string }[] = [];
  for (let t = first; t <= until && out.length < 40; t += step) out.push({ time: t, label: tickLabel(t, step) });
  return out;
}

function tickLabel(t: number, step: number): string {
  const d = new Date(t);
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  if (step < MINUTE) return `${hm}:${pad(d.getSeconds())}`;
  if (step < DAY) return d.getHours() === 0 && d.getMinutes() === 0 ? `${d.getMonth() + 1}/${d.getDate()}` : hm;
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
}

/** "2026-11-29 14:03:27.120", for titles. */
export function stamp(t: number): string {
  const d = new Date(t);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}
