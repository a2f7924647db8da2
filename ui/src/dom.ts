// A tiny element builder. Text always goes in through `textContent`, never as markup, so
// labels, commands and paths from the configuration cannot inject anything.

type Attrs = Record<string, string | undefined>;
export type Child = Node | string | null | undefined | false;

/** Creates `<tag class=... attr=...>children</tag>`. */
export function h(tag: string, attrs: Attrs | string = {}, ...children: Child[]): HTMLElement {
  const el = document.createElement(tag);
  const all = typeof attrs === "string" ? { class: attrs } : attrs;
  for (const [name, value] of Object.entries(all)) {
    if (value !== undefined) el.setAttribute(name, value);
  }
  append(el, children);
  return el;
}

/** Appends children, skipping the empty ones; text as [`visible`] shows it. */
export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    parent.appendChild(typeof child === "string" ? document.createTextNode(visible(child)) : child);
  }
}

/** Control characters (but newline and tab) and bidirectional controls. */
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with what would act instead of being read shown as `\uXXXX`: much of what the
 * windows show comes from agents and servers (arguments, process and client names), and a
 * right-to-left override or a control character in it must not reorder or hide the rest.
 * The same escapes as the CLI's (crates/cli/src/terminal.rs).
 */
export function visible(text: string): string {
  return text.replace(HIDDEN, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

const SVG = "http://www.w3.org/2000/svg";

/** Small line icons (16×16, drawn in the text colour), for badges and notices. */
const ICONS = {
  lock: ["M4.5 7.5h7a1 1 0 0 1 1 1v5a1 1 0 0 1-1 1h-7a1 1 0 0 1-1-1v-5a1 1 0 0 1 1-1z", "M5.5 7.5V5a2.5 2.5 0 0 1 5 0v2.5"],
  unlock: ["M4.5 7.5h7a1 1 0 0 1 1 1v5a1 1 0 0 1-1 1h-7a1 1 0 0 1-1-1v-5a1 1 0 0 1 1-1z", "M5.5 7.5V4.5a2.5 2.5 0 0 1 5 0"],
  alert: ["M8 2 14.5 13.5h-13z", "M8 6.5v3", "M8 11.6v.1"],
  files: ["M4 1.5h5l3 3v10H4z", "M9 1.5v3h3", "M6 8.5h4", "M6 11h4"],
  check: ["M3 8.5 6.5 12 13 4.5"],
  info: ["M8 1.75a6.25 6.25 0 1 1 0 12.5a6.25 6.25 0 0 1 0-12.5z", "M8 7.25v4", "M8 4.9v.1"],
} as const;

export type IconName = keyof typeof ICONS;

/** An inline icon; decorative (the text next to it says the same). */
export function icon(name: IconName): SVGElement {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("class", `icon icon-${name}`);
  svg.setAttribute("aria-hidden", "true");
  for (const d of ICONS[name]) {
    const path = document.createElementNS(SVG, "path");
    path.setAttribute("d", d);
    svg.appendChild(path);
  }
  return svg;
}

/** The longest a press holds a window's repaints. */
export const HOLD_MAX_MS = 2000;

/**
 * Holds a window's repaints while a pointer is pressed in it. A repaint between a press and its
 * release replaces the element pressed, and the browser then fires no click (the press and the
 * release landed on different elements): a busy agent's pushes would swallow a person's clicks,
 * and a drag to select text would lose its selection. `pressed()` says whether to wait; once
 * the pointer is released (or the window loses it), `release` runs after the click it made.
 */
export function pressHold(doc: Document, release: () => void): { pressed: () => boolean; stop: () => void } {
  let down = false;
  let cap: ReturnType<typeof setTimeout> | undefined;
  const press = (): void => {
    down = true;
    // A release the page never hears of (a native popup, a select's menu, took it): the hold
    // ends anyway. No click takes this long; a slow drag to select text may lose its selection.
    clearTimeout(cap);
    cap = setTimeout(up, HOLD_MAX_MS);
  };
  const up = (): void => {
    clearTimeout(cap);
    if (!down) return;
    down = false;
    // After this task: the click that follows the release goes to the element pressed first.
    setTimeout(release, 0);
  };
  // A release the window never heard of (outside it, say): the next move says no button is down.
  const move = (event: Event): void => {
    if ((event as PointerEvent).buttons === 0) up();
  };
  const view = doc.defaultView;
  doc.addEventListener("pointerdown", press, true);
  doc.addEventListener("pointerup", up, true);
  doc.addEventListener("pointercancel", up, true);
  doc.addEventListener("pointermove", move, true);
  view?.addEventListener("blur", up);
  return {
    pressed: () => down,
    stop: () => {
      clearTimeout(cap);
      doc.removeEventListener("pointerdown", press, true);
      doc.removeEventListener("pointerup", up, true);
      doc.removeEventListener("pointercancel", up, true);
      doc.removeEventListener("pointermove", move, true);
      view?.removeEventListener("blur", up);
    },
  };
}

/** The `data-keep` keys of the `<details>` under `root` that are open. */
export function openDetails(root: ParentNode): Set<string> {
  const keys = new Set<string>();
  for (const el of root.querySelectorAll<HTMLDetailsElement>("details[data-keep]")) {
    if (el.open) keys.add(el.dataset.keep ?? "");
  }
  return keys;
}

/** Opens the `<details>` under `root` whose `data-keep` key is in `keys` (a re-render keeps them open). */
export function reopenDetails(root: ParentNode, keys: Set<string>): void {
  if (keys.size === 0) return;
  for (const el of root.querySelectorAll<HTMLDetailsElement>("details[data-keep]")) {
    if (keys.has(el.dataset.keep ?? "")) el.open = true;
  }
}

/** The app mark: an arched door, drawn inline so it follows the text colour. */
export function mark(): SVGElement {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", "mark");
  svg.setAttribute("aria-hidden", "true");
  const bg = document.createElementNS(SVG, "rect");
  for (const [k, v] of Object.entries({ x: "1", y: "1", width: "22", height: "22", rx: "5.5" })) {
    bg.setAttribute(k, v);
  }
  bg.setAttribute("class", "mark-bg");
  const arch = document.createElementNS(SVG, "path");
  arch.setAttribute("d", "M8 18.5V11a4 4 0 0 1 8 0v7.5");
  arch.setAttribute("class", "mark-arch");
  const sill = document.createElementNS(SVG, "path");
  sill.setAttribute("d", "M6 18.5h12");
  sill.setAttribute("class", "mark-arch");
  svg.append(bg, arch, sill);
  return svg;
}

/**
 * The User Timing mark each window sets when it paints (`performance.mark`), its detail what it
 * painted (the status window: the engine's state, `running`, or `loading`; the approval window:
 * the card's id): how long a window takes to show something is read from the page
 * (ui/e2e/idle-memory.mjs), and a profiler shows it too.
 */
export const PAINT_MARK = "postern:paint";
