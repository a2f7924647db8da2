import { beforeEach, describe, expect, it, vi } from "vitest";

import { catalog, digest, execution, server, session, status } from "./fixtures/status";
import { serversView } from "./servers";

const NOW = new Date(2026, 10, 29, 15, 30).getTime();
const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);

beforeEach(() => document.body.replaceChildren());

/** Two servers: `inventory` with two processes (one rebuilt, one starting), `time` stopped. */
const busy = status({
  servers: [
    server({ label: "inventory", command: ["node", "dist/server.js"], cwd: "/srv/inventory", restart: "on-change", identityPaths: ["/srv/inventory/dist"], passMethods: ["vendor/search"], running: 2 }),
    server({ label: "time", command: ["uvx", "mcp-server-time"] }),
  ],
  sessions: [
    session({
      id: "#1",
      server: "inventory",
      client: "claude-code 2.0.14",
      serverPid: 48192,
      execution: execution({ epoch: "01JQ7RA0B6G5X3T1M2N4P6R8SV", runtime: "node v20.20.2" }),
      catalog: catalog({
        revision: digest("c1"),
        presentedRevision: digest("c0"),
        changes: ["publish: inputSchema.properties.target added (default \"preview\")", "publish: annotation readOnlyHint: false -> true [escalation]"],
        escalation: true,
      }),
      artifactsNewer: ["/srv/inventory/dist/server.js"],
      credentials: { released: ["inventory-read", "db-password"], brokered: ["inventory-read"], withheld: ["inventory-api"], reason: "identity changed since approval" },
    }),
    session({ id: "#2", server: "inventory", state: "identityPending", serverPid: 48300, execution: execution({ pinning: { state: "unpinned", reason: "no lockfile" } }) }),
  ],
});

describe("the Servers view", () => {
  it("shows each server's configuration and a state summary", () => {
    const root = serversView(busy, NOW, () => {});
    document.body.append(root);

    expect(all(root, ".server-card-label")).toEqual(["inventory", "time"]);
    expect(all(root, ".server-state")).toEqual(["2 running · 1 starting", "stopped"]);
    expect(all(root, '[data-label="inventory"] .server-config dd')).toEqual(["node dist/server.js", "/srv/inventory", "/srv/inventory/dist", "vendor/search"]);
    expect(all(root, ".restart")).toEqual(["restart on-change", "restart manual"]);
    expect(text(root.querySelector('[data-label="time"] .process-none'))).toContain("Stopped: no agent session runs it now");
  });

  it("says each server's confinement on its card, where a confined one may write, and UNCONFINED for one opted out", () => {
    const root = serversView(
      status({
        servers: [
          server({ label: "inventory", writable: ["/home/ada/.cache/inventory"] }),
          server({ label: "legacy", confinement: "unconfined" }),
        ],
      }),
      NOW,
      () => {},
    );
    expect(text(root.querySelector('[data-label="inventory"] .server-card-head .confinement'))).toBe("confined");
    expect(all(root, '[data-label="inventory"] .server-config dd')).toContain("/home/ada/.cache/inventory");
    const open = root.querySelector('[data-label="legacy"] .server-card-head .confinement.unconfined');
    expect(text(open)).toBe("UNCONFINED");
    expect(open?.getAttribute("title")).toContain("can read every file you can");
  });

  it("shows each process's state, epoch, record, newer files, credentials and catalog diff", () => {
    const root = serversView(busy, NOW, () => {});
    const card = root.querySelector('[data-label="inventory"]')!;

    expect(all(card, ".session .state")).toEqual(["Ready · 2 tools", "Reading its tools…"]);
    expect([...card.querySelectorAll(".session .state")].map((el) => el.getAttribute("data-state"))).toEqual(["catalog-ready", "identity-pending"]);
    expect(card.querySelector('[data-session="#1"] .facts .launch')?.getAttribute("title")).toBe("execution epoch 01JQ7RA0B6G5X3T1M2N4P6R8SV");
    expect(all(card, '[data-session="#1"] .record-grid dt')).toContain("runtime");
    expect(all(card, '[data-session="#1"] .artifact .path')).toContain("/usr/bin/node");
    expect(all(card, ".newer .paths li")).toEqual(["/srv/inventory/dist/server.js"]);
    expect(all(card, ".pin")).toEqual(["PINNED", "UNPINNED"]);
    // Credentials: held by this launch, and withheld with the reason.
    // A credential bound to hosts is held as a placeholder; one without is the value itself.
    expect(all(card, ".credentials-line .released .chip")).toEqual(["inventory-read · placeholder", "db-password · value, exposed to its code"]);
    expect(card.querySelector(".credentials-line .held-value")?.getAttribute("title")).toContain("send it anywhere");
    expect(all(card, ".credentials-line .withheld .chip")).toEqual(["inventory-api"]);
    expect(text(card.querySelector(".withheld-reason"))).toBe("identity changed since approval");
    // The catalog diff, the escalation flagged.
    expect(all(card, ".changes li")).toEqual(['publish: inputSchema.properties.target added (default "preview")', "publish: annotation readOnlyHint: false -> true"]);
    expect(card.querySelectorAll(".changes .change-escalation").length).toBe(1);
    expect(card.querySelector(".changes.escalation .flag")).not.toBeNull();
    expect(text(card.querySelector(".stale"))).toBe("agent has a stale tool list");
  });

  it("restarts a server from its card and says what the restart did", () => {
    const restart = vi.fn();
    const root = serversView(busy, NOW, restart, { inventory: "Restarting 2 processes of inventory: each gets a new execution epoch." });

    root.querySelector<HTMLButtonElement>('[data-label="inventory"] .restart-button')!.click();
    expect(restart).toHaveBeenCalledWith("inventory");
    expect(all(root, ".restart-note")).toEqual(["Restarting 2 processes of inventory: each gets a new execution epoch."]);
  });

  it("says so when nothing is configured", () => {
    expect(text(serversView(status(), NOW, () => {}).querySelector(".empty-line"))).toContain("No servers configured yet");
  });
});
