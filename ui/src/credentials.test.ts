import { beforeEach, describe, expect, it, vi } from "vitest";

import type { CredentialItem, NewCredential } from "./bindings";
import { credentialsPanel, readAdd, type CredentialControls } from "./credentials";

const NOW = new Date(2026, 10, 29, 15, 30).getTime();
const SECRET = "s3cr3t-canary-value";
const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

const list: CredentialItem[] = [
  {
    name: "inventory-api",
    injection: { kind: "env", var: "INVENTORY_TOKEN" },
    hosts: [],
    looselyHere: [],
    everyUse: true,
    version: 3,
    createdAtMs: NOW - 86_400_000,
    rotatedAtMs: NOW - 5 * 60_000,
    servers: ["inventory"],
    uses: [],
  },
  {
    name: "github",
    injection: { kind: "bearer" },
    hosts: ["api.github.com", "uploads.github.com"],
    looselyHere: [],
    everyUse: false,
    version: 1,
    createdAtMs: new Date(2026, 10, 29, 9, 5).getTime(),
    rotatedAtMs: null,
    servers: [],
    uses: [],
  },
];

function controls() {
  return {
    add: vi.fn<CredentialControls["add"]>(async () => {}),
    rotate: vi.fn<CredentialControls["rotate"]>(async () => {}),
    remove: vi.fn<CredentialControls["remove"]>(async () => {}),
    bind: vi.fn<CredentialControls["bind"]>(async () => {}),
    unbind: vi.fn<CredentialControls["unbind"]>(async () => {}),
  };
}

function panel(c = controls(), items: CredentialItem[] | null = list) {
  const root = credentialsPanel(items, ["inventory", "time"], c, NOW);
  document.body.replaceChildren(root);
  return root;
}

function type(root: Element, selector: string, value: string): void {
  const input = root.querySelector<HTMLInputElement | HTMLSelectElement>(selector)!;
  input.value = value;
  input.dispatchEvent(new Event(input.tagName === "SELECT" ? "change" : "input", { bubbles: true }));
}

/** The value anywhere: the markup, or any field's value. */
function leaked(value: string): boolean {
  const fields = [...document.querySelectorAll<HTMLInputElement>("input, textarea")].map((i) => i.value);
  return document.body.innerHTML.includes(value) || fields.some((v) => v.includes(value));
}

beforeEach(() => document.body.replaceChildren());

describe("the credentials list", () => {
  it("shows names, kinds, hosts, bindings, every-use and versions, never a value", () => {
    const root = panel();

    expect(all(root, ".credential-name")).toEqual(["inventory-api", "github"]);
    expect(all(root, ".credential .kind")).toEqual(["env INVENTORY_TOKEN", "bearer"]);
    expect(all(root, '[data-name="inventory-api"] .every-use')).toEqual(["every use"]);
    expect(root.querySelector('[data-name="github"] .every-use')).toBeNull();
    expect(all(root, '[data-name="github"] .host')).toEqual(["api.github.com", "uploads.github.com"]);
    expect(all(root, ".credential-version")).toEqual(["v3 · rotated 15:25 · 5 min ago", "v1 · added 09:05"]);
    expect(all(root, '[data-name="inventory-api"] .bound code')).toEqual(["inventory"]);
    expect(all(root, '[data-name="github"] .unbound')).toEqual(["no server"]);
    expect(all(root.querySelector(".panel-head")!, ".muted")).toEqual(["2 credentials"]);
    expect(root.querySelector(".credential-any-port")).toBeNull();
  });

  it("warns of a host naming this machine loosely, where any program can listen", () => {
    const local: CredentialItem = { ...list[1]!, name: "dev-api", hosts: ["localhost", "api.github.com"], looselyHere: ["localhost"] };
    const root = credentialsPanel([local], ["time"], controls(), NOW);
    expect(all(root, '[data-name="dev-api"] .credential-any-port')).toEqual([
      "localhost: not one address and port of this machine, so any program of yours listening where a request connects receives it. Add the credential again as the address and port your service listens on (e.g. 127.0.0.1:8080).",
    ]);
  });

  it("offers binding an env credential to the other servers, a header one to the built-in server only", () => {
    const c = controls();
    const root = panel(c);

    const options = (name: string) => [...root.querySelectorAll(`[data-name="${name}"] .bind-form option`)].map((o) => o.getAttribute("value"));
    expect(options("inventory-api")).toEqual(["time"]);
    expect(options("github")).toEqual(["postern"]);

    root.querySelector('[data-name="github"] .bind-form')!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    expect(c.bind).toHaveBeenCalledWith("postern", "github");
    // The × says what it does to a screen reader.
    expect(root.querySelector('[data-name="inventory-api"] .unbind')?.getAttribute("aria-label")).toBe("Unbind inventory-api from inventory");
    root.querySelector<HTMLButtonElement>('[data-name="inventory-api"] .unbind')!.click();
    expect(c.unbind).toHaveBeenCalledWith("inventory", "inventory-api");
  });

  it("removes only when asked twice", () => {
    const c = controls();
    const root = panel(c);
    const remove = root.querySelector<HTMLButtonElement>('[data-name="github"] .remove')!;

    remove.click();
    expect(c.remove).not.toHaveBeenCalled();
    expect(text(remove)).toBe("Remove github? Click again");
    remove.click();
    expect(c.remove).toHaveBeenCalledWith("github");
  });

  it("rotates with a value typed in, and empties its field at once", async () => {
    const c = controls();
    const root = panel(c);
    const form = root.querySelector('[data-name="inventory-api"] .rotate-form')!;
    type(form, 'input[name="value"]', SECRET);
    expect(form.getAttribute("data-dirty")).toBe("true");

    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));

    expect(c.rotate).toHaveBeenCalledWith("inventory-api", SECRET);
    expect(leaked(SECRET)).toBe(false);
    await settled();
    expect(text(form.querySelector(".form-status"))).toBe("Rotated: servers holding it restart with the new value");
  });

  it("says it is reading, or that there are none", () => {
    expect(text(panel(controls(), null).querySelector(".empty-line"))).toBe("Reading…");
    expect(text(panel(controls(), []).querySelector(".empty-line"))).toContain("No credentials yet");
  });
});

describe("adding a credential", () => {
  it("sends the form once, then never renders the value back or keeps it in a field", async () => {
    const c = controls();
    const root = panel(c);
    const form = root.querySelector<HTMLFormElement>(".add-credential-form")!;
    type(form, 'input[name="name"]', "inventory-api-staging");
    type(form, 'input[name="envVar"]', "INVENTORY_TOKEN");
    form.querySelector<HTMLInputElement>('input[name="everyUse"]')!.checked = true;
    type(form, 'input[name="value"]', SECRET);
    expect(form.querySelector('input[name="value"]')?.getAttribute("type")).toBe("password");

    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));

    expect(c.add).toHaveBeenCalledOnce();
    expect(c.add).toHaveBeenCalledWith({
      name: "inventory-api-staging",
      injection: { kind: "env", var: "INVENTORY_TOKEN" },
      hosts: [],
      everyUse: true,
      value: SECRET,
    } satisfies NewCredential);
    expect(leaked(SECRET)).toBe(false);
    await settled();
    expect(text(form.querySelector(".form-status"))).toBe("Added inventory-api-staging");
    expect(form.querySelector<HTMLInputElement>('input[name="name"]')!.value).toBe("");
    expect(leaked(SECRET)).toBe(false);
  });

  it("empties the value field even when the engine refuses", async () => {
    const c = controls();
    c.add.mockRejectedValue(new Error("a credential named 'github' exists; rotate it or remove it first"));
    const root = panel(c);
    const form = root.querySelector<HTMLFormElement>(".add-credential-form")!;
    type(form, 'select[name="kind"]', "bearer");
    type(form, 'input[name="name"]', "github");
    type(form, 'input[name="hosts"]', "api.github.com, uploads.github.com");
    type(form, 'input[name="value"]', SECRET);

    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await settled();

    expect(c.add.mock.calls[0]![0].hosts).toEqual(["api.github.com", "uploads.github.com"]);
    expect(text(form.querySelector(".form-status"))).toBe("a credential named 'github' exists; rotate it or remove it first (type the value again)");
    expect(leaked(SECRET)).toBe(false);
    // The name stays, so only the value needs typing again.
    expect(form.querySelector<HTMLInputElement>('input[name="name"]')!.value).toBe("github");
  });

  it("shows the fields of the kind chosen", () => {
    const root = panel();
    const form = root.querySelector<HTMLFormElement>(".add-credential-form")!;
    const shown = () => [...form.querySelectorAll<HTMLElement>(".only-env, .only-header, .only-http")].filter((f) => !f.hidden).map((f) => f.className.split(" ")[1]);

    expect(shown()).toEqual(["only-env"]);
    type(form, 'select[name="kind"]', "header");
    expect(shown()).toEqual(["only-header", "only-http"]);
    type(form, 'select[name="kind"]', "basic");
    expect(shown()).toEqual(["only-http"]);
  });

  it("says what is missing before sending anything", () => {
    const form = panel().querySelector<HTMLFormElement>(".add-credential-form")!;
    expect(readAdd(form, "env", "v")).toBe("Give the credential a name.");
    (form.elements.namedItem("name") as HTMLInputElement).value = "x";
    expect(readAdd(form, "env", "v")).toBe("Name the environment variable the server reads.");
    expect(readAdd(form, "header", "v")).toBe("Name the header.");
    (form.elements.namedItem("header") as HTMLInputElement).value = "X-Key";
    expect(readAdd(form, "header", "v")).toBe("Name at least one host a request may carry it to.");
    (form.elements.namedItem("hosts") as HTMLInputElement).value = "a.example";
    expect(readAdd(form, "header", "")).toBe("Type the value.");
    expect(readAdd(form, "header", "v")).toEqual({ name: "x", injection: { kind: "header", name: "X-Key" }, hosts: ["a.example"], everyUse: false, value: "v" });
  });
});

/** A credential bound to a host, which a server's launches sent through the broker. */
const deployToken: CredentialItem = {
    name: "deploy-token",
    injection: { kind: "env", var: "DEPLOY_TOKEN" },
    hosts: ["deploy.example.com"],
    looselyHere: [],
    everyUse: false,
    version: 1,
    createdAtMs: NOW - 3_600_000,
    rotatedAtMs: null,
    servers: ["ci"],
    uses: [
      { server: "ci", host: "evil.example", uses: 0, leaks: 1, firstMs: NOW - 60_000, lastMs: NOW - 60_000 },
      { server: "ci", host: "deploy.example.com", uses: 12, leaks: 0, firstMs: NOW - 3_000_000, lastMs: NOW - 120_000 },
    ],
  };

describe("where a credential went", () => {
  it("says how a server holds it, where the broker sent it and where its placeholder was refused", () => {
    const root = panel(controls(), [...list, deployToken]);
    const env = root.querySelector('[data-name="inventory-api"]')!;
    expect(text(env.querySelector(".credential-exposure.exposed"))).toContain("their code can send it anywhere");
    expect(env.querySelector(".credential-uses")).toBeNull();
    const brokered = root.querySelector('[data-name="deploy-token"]')!;
    expect(text(brokered.querySelector(".credential-exposure.brokered"))).toBe("Servers get a placeholder; Postern puts the value in their requests to deploy.example.com only.");
    const lines = all(brokered, ".credential-uses li");
    expect(lines[0]).toMatch(/^ci headed to evil\.example · 1 request refused: not a host of this credential · last /);
    expect(lines[1]).toMatch(/^ci sent it to deploy\.example\.com in 12 requests · last /);
    expect(brokered.querySelector('.use-refused[data-host="evil.example"] .leak')?.getAttribute("role")).toBe("note");
    // The built-in's header credentials are not environment values: no such line.
    expect(root.querySelector('[data-name="github"] .credential-exposure')).toBeNull();
  });
});
