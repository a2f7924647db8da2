// The Sessions timeline: a picture of what agents did. One lane per agent run over time, named
// by the agent, its server's execution epochs as bands, the times it waited for you (approval
// request to answer) under its line, calls, refusals (with their codes), approvals and rebuilds
// as marks. The wheel zooms around the pointer and dragging pans; each new window is a new
// query to the engine (which gives at most a few thousand marks, counts per bucket beyond
// that), so nothing ever loads the whole journal. Clicking a mark opens its audit record, and the
// mark stays ringed through zooms, pans and refreshes until another is clicked or the record closes.

import type { JournalApi } from "./api";
import { message } from "./api";
import type { Timeline, TimelineQuery } from "./bindings";
import { h, visible } from "./dom";
import type { EntryPanel } from "./entry";
import { FRAME, LANE_MID, labelWidth, layout, stamp, timeAt, type BandBox, type LaneBox, type Layout, type MarkBox, type Measure, type WaitBox } from "./timeline-layout";

const SVG = "http://www.w3.org/2000/svg";
/** Lanes per query; more come a page at a time. */
const LANES = 50;
/** The narrowest window (ms) and the widest. */
const MIN_SPAN = 1000;
const MAX_SPAN = 5 * 365 * 86_400_000;

export interface TimelineView {
  el: HTMLElement;
  /** The engine reports a change (or the window polled it): while the whole range is shown, read it again, at most every `followMs`. */
  poke(): void;
  /** The tab was opened. */
  shown(): void;
  /** The vault locked: drop what was read (the next opening reads again). */
  forget(): void;
}

export interface TimelineOptions {
  entry: EntryPanel;
  /** Shows the Activity of one session (a lane's label was clicked). */
  openSession?: (session: number) => void;
  now?: () => number;
  /** How long zooming and panning wait before asking the engine (ms). */
  settleMs?: number;
  /** The drawing's width when the page cannot say (tests). */
  width?: number;
  /** How often, at most, the engine's changes read the whole range again (ms). */
  followMs?: number;
}

/** The timeline pane, reading from `api`. */
export function timelineView(api: Pick<JournalApi, "timeline">, options: TimelineOptions): TimelineView {
  const { entry, openSession, now = Date.now, settleMs = 180, followMs = 5000 } = options;
  /** The window asked for; `null` is the whole range (the engine chooses it). */
  let win: { since: number; until: number } | null = null;
  let data: Timeline | null = null;
  let error: string | null = null;
  let loading = false;
  let asked = 0;
  let settle: ReturnType<typeof setTimeout> | undefined;
  let lastPoke = 0;
  let current: Layout | null = null;
  /** The record open in the entry panel: its marks stay marked through every redraw until it closes. */
  let selected: number | null = null;
  entry.onChange((seq) => {
    selected = seq;
    for (const el of canvas.querySelectorAll(".mark[data-seq], .wait[data-seq]")) select(el, el.getAttribute("data-seq") === String(seq));
  });

  const range = h("span", "timeline-range muted", "");
  const status = h("span", "timeline-status muted", "");
  const canvas = h("div", "timeline-canvas");
  const more = h("button", { type: "button", class: "timeline-more", hidden: "" }, "More sessions") as HTMLButtonElement;
  const button = (cls: string, text: string, title: string, run: () => void): HTMLElement => {
    const el = h("button", { type: "button", class: cls, title, "aria-label": title }, text);
    el.addEventListener("click", run);
    return el;
  };
  const el = h(
    "section",
    { class: "panel timeline", "aria-labelledby": "timeline-h" },
    h(
      "div",
      "panel-head timeline-head",
      h("h2", { id: "timeline-h" }, "Sessions timeline"),
      range,
      h(
        "div",
        "timeline-controls",
        status,
        button("zoom-out", "−", "Zoom out", () => zoom(2)),
        button("zoom-in", "+", "Zoom in", () => zoom(0.5)),
        button("zoom-fit", "Fit", "Show everything", () => fit()),
      ),
    ),
    legend(),
    canvas,
    more,
    entry.el,
  );
  const measure = labelMeasure(el);

  const width = (): number => canvas.clientWidth || options.width || 860;

  const query = (extra: Partial<TimelineQuery> = {}): TimelineQuery => ({
    since: win?.since ?? null,
    until: win?.until ?? null,
    lanesAfter: null,
    maxLanes: LANES,
    maxMarks: 0,
    buckets: Math.min(2000, Math.max(20, Math.round((width() - FRAME.labelWidth) / 4))),
    ...extra,
  });

  const load = (): void => {
    const ticket = ++asked;
    loading = true;
    lastPoke = now();
    paintStatus();
    api.timeline(query()).then(
      (answer) => {
        if (ticket !== asked) return;
        loading = false;
        error = null;
        data = answer;
        draw();
      },
      (err: unknown) => {
        if (ticket !== asked) return;
        loading = false;
        error = message(err);
        draw();
      },
    );
  };

  const loadMore = (): void => {
    if (data === null || data.lanes.length === 0) return;
    const last = data.lanes[data.lanes.length - 1]!.id;
    const base = data;
    const ticket = ++asked;
    loading = true;
    paintStatus();
    api.timeline(query({ since: base.since, until: base.until, lanesAfter: last })).then(
      (page) => {
        if (ticket !== asked) return;
        loading = false;
        data = { ...base, lanes: [...base.lanes, ...page.lanes], moreLanes: page.moreLanes };
        draw();
      },
      (err: unknown) => {
        if (ticket !== asked) return;
        loading = false;
        error = message(err);
        draw();
      },
    );
  };
  more.addEventListener("click", loadMore);

  /** Shows `next` at once from the data in hand, then asks the engine once the user pauses. */
  const moveTo = (next: { since: number; until: number }): void => {
    win = next;
    if (data !== null) draw({ ...data, since: next.since, until: next.until });
    clearTimeout(settle);
    settle = setTimeout(load, settleMs);
  };

  const shownWindow = (): { since: number; until: number } | null =>
    win ?? (data === null ? null : { since: data.since, until: data.until });

  const zoom = (factor: number, around?: number): void => {
    const w = shownWindow();
    if (w === null) return;
    const span = w.until - w.since;
    const next = Math.min(MAX_SPAN, Math.max(MIN_SPAN, span * factor));
    const pivot = around ?? w.since + span / 2;
    const left = (pivot - w.since) / span;
    const since = Math.round(pivot - next * left);
    moveTo({ since, until: since + Math.round(next) });
  };

  const fit = (): void => {
    win = null;
    clearTimeout(settle);
    load();
  };

  const draw = (shown: Timeline | null = data): void => {
    paintStatus();
    if (error !== null && shown === null) {
      canvas.replaceChildren(h("p", { class: "action-error", role: "alert" }, `Cannot read the timeline: ${error}`));
      return;
    }
    if (shown === null) return;
    if (shown.lanes.length === 0) {
      current = null;
      range.textContent = "";
      more.hidden = true;
      canvas.replaceChildren(
        h(
          "p",
          "empty-line timeline-empty",
          win === null
            ? "No agent sessions yet. When an agent connects through Postern, its run appears here as a lane."
            : "No agent session in this window. Zoom out, or Fit to see everything.",
        ),
      );
      return;
    }
    current = layout(shown, { ...FRAME, width: width(), now: now(), measure });
    range.textContent = rangeText(shown.since, shown.until);
    more.hidden = !shown.moreLanes;
    canvas.replaceChildren(picture(current, { open: (seq) => entry.show(seq), openSession, selected }));
  };

  const paintStatus = (): void => {
    status.textContent = loading ? "Loading…" : error !== null && data !== null ? `Not updated: ${error}` : data !== null && !data.complete.calls ? "Calls counted per bucket: zoom in to see each" : "";
  };

  // The wheel zooms around the pointer; a drag on the plot pans.
  canvas.addEventListener(
    "wheel",
    (event) => {
      if (current === null) return;
      event.preventDefault();
      const x = event.clientX - canvas.getBoundingClientRect().left;
      zoom(event.deltaY > 0 ? 1.25 : 0.8, timeAt(current, x));
    },
    { passive: false },
  );
  let drag: { x: number; since: number; until: number } | null = null;
  canvas.addEventListener("pointerdown", (event) => {
    const w = shownWindow();
    if (current === null || w === null || (event.target as Element).closest?.(".mark, .lane-label") != null) return;
    drag = { x: event.clientX, ...w };
    canvas.classList.add("dragging");
  });
  canvas.addEventListener("pointermove", (event) => {
    if (drag === null || current === null) return;
    const perPx = (drag.until - drag.since) / Math.max(1, current.plot.x1 - current.plot.x0);
    const shift = Math.round((drag.x - event.clientX) * perPx);
    if (shift !== 0) moveTo({ since: drag.since + shift, until: drag.until + shift });
  });
  const endDrag = (): void => {
    drag = null;
    canvas.classList.remove("dragging");
  };
  canvas.addEventListener("pointerup", endDrag);
  canvas.addEventListener("pointerleave", endDrag);
  if (typeof ResizeObserver !== "undefined") {
    let seen = 0;
    new ResizeObserver(() => {
      const w = canvas.clientWidth;
      if (w > 0 && Math.abs(w - seen) > 8) {
        seen = w;
        draw(data === null || win === null ? data : { ...data, ...win });
      }
    }).observe(canvas);
  }

  return {
    el,
    poke() {
      if (win !== null || loading || now() - lastPoke < followMs) return;
      lastPoke = now();
      load();
    },
    shown() {
      if (!loading && (data === null || win === null)) load();
    },
    forget() {
      asked++;
      clearTimeout(settle);
      lastPoke = 0;
      data = null;
      current = null;
      loading = false;
      error = null;
      canvas.replaceChildren();
      range.textContent = "";
      more.hidden = true;
      entry.hide();
    },
  };
}

/** "2026-11-29 14:00 → 16:30", to the second when the window is short, the date twice when it spans days. */
export function rangeText(since: number, until: number): string {
  const precision = until - since < 10 * 60_000 ? 19 : 16;
  const a = stamp(since).slice(0, precision);
  const b = stamp(until).slice(0, precision);
  return a.slice(0, 10) === b.slice(0, 10) ? `${a} → ${b.slice(11)}` : `${a} → ${b}`;
}

// --- drawing -----------------------------------------------------------------------------------

interface Handlers {
  open(seq: number): void;
  openSession: ((session: number) => void) | undefined;
  /** The record open in the entry panel: the marks and waits that open it are drawn selected. */
  selected?: number | null;
}

/** Draws `el` (a mark or a wait) as the one whose record is open, or not. */
function select(el: Element, on: boolean): void {
  el.classList.toggle("selected", on);
  if (on) el.setAttribute("aria-current", "true");
  else el.removeAttribute("aria-current");
}

/** The SVG for `l` (pure DOM construction, apart from the handlers). */
export function picture(l: Layout, handlers: Handlers = { open() {}, openSession: undefined }): SVGSVGElement {
  const svg = svgEl("svg", {
    class: "timeline-svg",
    width: String(l.width),
    height: String(l.height),
    viewBox: `0 0 ${l.width} ${l.height}`,
    role: "img",
    "aria-label": `Sessions timeline, ${l.lanes.length} lane${l.lanes.length === 1 ? "" : "s"}`,
  }) as SVGSVGElement;
  const axis = svgEl("g", { class: "axis" });
  for (const t of l.ticks) {
    axis.append(
      svgEl("line", { class: "tick", x1: n(t.x), x2: n(t.x), y1: "18", y2: String(l.height) }),
    );
    if (t.label !== null) axis.append(text("tick-label", t.label.x, t.label.y, t.label.text));
  }
  svg.append(axis);
  for (const lane of l.lanes) svg.append(laneGroup(lane, l, handlers));
  return svg;
}

function laneGroup(lane: LaneBox, l: Layout, handlers: Handlers): SVGElement {
  const mid = LANE_MID;
  const g = svgEl("g", { class: `lane lane-${lane.status}`, "data-lane": String(lane.id), transform: `translate(0 ${lane.y})` });
  g.append(svgEl("rect", { class: "lane-bg", x: "0", y: "4", width: String(l.width), height: "44" }));
  const label = svgEl("g", { class: "lane-label", tabindex: handlers.openSession ? "0" : "-1", role: "button" });
  label.append(title(`${lane.tooltip} · ${lane.status}${handlers.openSession ? " · show its Activity" : ""}`));
  // The agent by its own name ("claude-code 2.1.3"), under it the server and its directory.
  label.append(text("lane-title", 10, 22, truncate(lane.title, 24)), text("lane-sub", 10, 38, truncate(lane.subtitle, 30)));
  if (handlers.openSession) {
    const open = handlers.openSession;
    activate(label, () => open(lane.id));
  }
  g.append(label);
  g.append(svgEl("line", { class: "lane-line", x1: n(lane.x0), x2: n(lane.x1), y1: String(mid), y2: String(mid) }));
  for (const band of lane.bands) g.append(bandEl(band));
  for (const wait of lane.waits) g.append(waitEl(wait, mid, handlers));
  for (const bar of lane.bars) {
    const h1 = Math.max(1, bar.calls * 18);
    const bar0 = svgEl("g", { class: "bar" });
    bar0.append(title(bar.title), svgEl("rect", { class: "bar-calls", x: n(bar.x), y: n(mid + 9 - h1), width: n(bar.width), height: n(h1) }));
    if (bar.refused > 0) {
      const h2 = Math.max(1, bar.refused * 18);
      bar0.append(svgEl("rect", { class: "bar-refused", x: n(bar.x), y: n(mid + 9 - h2), width: n(bar.width), height: n(h2) }));
    }
    g.append(bar0);
  }
  for (const mark of lane.marks) g.append(markEl(mark, mid, handlers));
  return g;
}

function bandEl(band: BandBox): SVGElement {
  const g = svgEl("g", { class: `band shade-${band.shade}`, "data-epoch": band.epoch });
  g.append(title(`execution epoch ${band.epoch}`), svgEl("rect", { class: "band-rect", x: n(band.x0), y: "18", width: n(band.x1 - band.x0), height: "24", rx: "3" }));
  if (band.label !== null) g.append(text("band-label", band.label.x, band.label.y, band.label.text));
  return g;
}

/** A time the agent waited for a person: a bar under the lane's line, from request to answer; it opens the request's record. */
function waitEl(wait: WaitBox, mid: number, handlers: Handlers): SVGElement {
  const g = svgEl("g", { class: `wait wait-${wait.answer}`, "data-seq": String(wait.seq), tabindex: "0", role: "button" });
  g.append(title(`${wait.title} · record #${wait.seq}`), svgEl("rect", { class: "wait-rect", x: n(wait.x0), y: String(mid + 6), width: n(wait.x1 - wait.x0), height: "5", rx: "2" }));
  activate(g, () => handlers.open(wait.seq));
  if (handlers.selected === wait.seq) select(g, true);
  return g;
}

function markEl(mark: MarkBox, mid: number, handlers: Handlers): SVGElement {
  const attrs: Record<string, string> = { class: `mark mark-${mark.kind} tone-${mark.tone}`, "data-kind": mark.kind };
  if (mark.seq !== null) {
    attrs["data-seq"] = String(mark.seq);
    attrs.tabindex = "0";
    attrs.role = "button";
  }
  const g = svgEl("g", attrs);
  g.append(title(mark.seq === null ? mark.title : `${mark.title} · record #${mark.seq}`));
  const x = mark.x;
  switch (mark.kind) {
    case "call":
      g.append(svgEl("circle", { cx: n(x), cy: String(mid), r: "4" }));
      break;
    case "refusal":
      g.append(svgEl("path", { d: `M${n(x - 4.5)} ${mid - 4.5} l9 9 M${n(x + 4.5)} ${mid - 4.5} l-9 9` }));
      if (mark.label !== null) g.append(text("mark-label", mark.label.x, mark.label.y, mark.label.text));
      break;
    case "approval":
      g.append(svgEl("path", { d: `M${n(x)} ${mid - 12} l5 8 h-10 z` }));
      break;
    case "grantEnded":
      g.append(svgEl("path", { d: `M${n(x)} ${mid - 12} v7` }));
      break;
    case "rebuild":
      g.append(
        svgEl("line", { class: "rebuild-line", x1: n(x), x2: n(x), y1: "10", y2: "48" }),
        svgEl("path", { class: "rebuild-glyph", d: `M${n(x)} 6 l4 4 l-4 4 l-4 -4 z` }),
      );
      break;
  }
  // A generous invisible target: marks are small.
  g.append(svgEl("rect", { class: "hit", x: n(x - 6), y: String(mid - 14), width: "12", height: "28" }));
  if (mark.seq !== null) {
    const seq = mark.seq;
    activate(g, () => handlers.open(seq));
    if (handlers.selected === seq) select(g, true);
  }
  return g;
}

/** Click, Enter or Space runs `run`. */
function activate(el: Element, run: () => void): void {
  el.addEventListener("click", run);
  el.addEventListener("keydown", (event) => {
    const key = (event as KeyboardEvent).key;
    if (key === "Enter" || key === " ") {
      event.preventDefault();
      run();
    }
  });
}

function legend(): HTMLElement {
  const item = (cls: string, words: string): HTMLElement => h("span", `legend-item ${cls}`, h("span", "legend-swatch"), words);
  return h(
    "div",
    "timeline-legend muted",
    item("legend-band", "execution epoch"),
    item("legend-call", "call"),
    item("legend-refusal", "refused (code)"),
    item("legend-wait", "waiting for you"),
    item("legend-approval", "approved"),
    item("legend-rebuild", "rebuild / restart"),
  );
}

/**
 * How wide a label is drawn, measured in the webview: an invisible SVG text of the labels' own
 * class (so the stylesheet's font applies) inside `host`, `getComputedTextLength()`, each text
 * once. Where nothing is laid out (the view hidden, or no layout engine as in tests), the
 * estimate from its characters (`labelWidth`), not kept.
 */
export function labelMeasure(host: Element): Measure {
  const svg = svgEl("svg", { class: "timeline-svg measure-probe", width: "0", height: "0", "aria-hidden": "true" });
  const probe = svgEl("text", { class: "mark-label" }) as SVGTextElement;
  svg.append(probe);
  host.append(svg);
  const known = new Map<string, number>();
  return (content) => {
    const seen = known.get(content);
    if (seen !== undefined) return seen;
    probe.textContent = visible(content);
    const width = typeof probe.getComputedTextLength === "function" ? probe.getComputedTextLength() : 0;
    if (!(width > 0)) return labelWidth(content);
    known.set(content, width);
    return width;
  };
}

function svgEl(tag: string, attrs: Record<string, string> = {}): SVGElement {
  const el = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

function text(cls: string, x: number, y: number, content: string): SVGElement {
  const t = svgEl("text", { class: cls, x: n(x), y: n(y) });
  t.textContent = visible(content);
  return t;
}

function title(content: string): SVGElement {
  const t = svgEl("title");
  t.textContent = visible(content);
  return t;
}

function truncate(s: string, max: number): string {
  return s.length <= max ? s : `${s.slice(0, max - 1)}…`;
}

function n(v: number): string {
  return String(Math.round(v * 10) / 10);
}
