// Whether a launch runs in the OS sandbox (issue 16), as the session cards, the Servers view and
// the approval card say it: confined is a calm badge whose title says what it cannot do;
// unconfined is a flag on every surface. Pure DOM construction.

import { h, icon } from "./dom";

/** The sandbox a launch runs in (`SandboxView`, and the approval card's `epoch.sandbox`). */
export type Sandbox = { tool: string; hidden: string[]; writable: string[]; network: string };

/** The badge beside a launch: `null` sandbox is an unconfined launch. */
export function sandboxBadge(sandbox: Sandbox | null | undefined): HTMLElement {
  if (sandbox === null || sandbox === undefined) return unconfinedBadge();
  return confinedBadge(sandboxSentence(sandbox));
}

/** The badge of a server by its configuration (`ServerStatus.confinement`). */
export function confinementBadge(confinement: string): HTMLElement {
  return confinement === "unconfined" ? unconfinedBadge() : confinedBadge("Its launches run in the OS sandbox");
}

/** "Confined (bubblewrap): writes only to …; network only through the egress broker; cannot see …". */
export function sandboxSentence(s: Sandbox): string {
  const writes = s.writable.length === 0 ? "only a private /tmp" : `${s.writable.join(", ")} and a private /tmp`;
  return `Confined (${s.tool}): writes ${writes}; network ${s.network}; cannot see ${s.hidden.length} credential and session paths (~/.ssh, the Postern home, …).`;
}

function confinedBadge(title: string): HTMLElement {
  return h("span", { class: "badge badge-outline confinement confined", title }, icon("lock"), "confined");
}

function unconfinedBadge(): HTMLElement {
  return h(
    "span",
    { class: "badge confinement unconfined", title: "Unconfined: it can read every file you can (~/.ssh, the Postern home) and connect anywhere" },
    icon("unlock"),
    "UNCONFINED",
  );
}
