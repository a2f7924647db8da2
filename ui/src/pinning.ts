// Whether the digests cover the code that runs, as the session cards and the approval card say it:
// pinned is a calm badge; partly pinned (the server's own file is hashed, not all it loads) is a
// calm badge and a quiet note saying what is covered and what is not; unpinned is a flag and the
// reason. Pure DOM construction.

import type { PinningView } from "./bindings";
import { h, icon } from "./dom";

/** The badge beside a launch. */
export function pinBadge(p: PinningView): HTMLElement {
  switch (p.state) {
    case "pinned":
      return h("span", { class: "badge badge-ok pin pinned", title: "The digests pin the code that runs" }, icon("lock"), "PINNED");
    case "partly":
      return h("span", { class: "badge badge-outline pin partly", title: partlySentence(p) }, "partly pinned");
    case "unpinned":
      return h("span", { class: "badge pin unpinned", title: p.reason }, icon("unlock"), "UNPINNED");
  }
}

/** What the digests cover, in one sentence, unless they cover it all. */
export function pinNote(p: PinningView): HTMLElement | null {
  switch (p.state) {
    case "pinned":
      return null;
    case "partly":
      return h("p", "pin-note muted", partlySentence(p));
    case "unpinned":
      return h("p", "unpinned-reason", h("span", "strong", "Unpinned: "), p.reason);
  }
}

/** "Partly pinned: the digests cover the entry file server.py, not the code it loads: …." */
function partlySentence(p: PinningView & { state: "partly" }): string {
  return `Partly pinned: the digests cover ${p.covered}, not ${p.uncovered}.`;
}
