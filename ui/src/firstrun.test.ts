import { beforeEach, describe, expect, it, vi } from "vitest";

import type { ImportSource, Status } from "./bindings";
import { addServersPanel, guideShown, guideView, NEW_GUIDE, passphraseStep, passphraseStepShown, readServer, snippetLabels, type Guide, type GuideControls } from "./firstrun";
import { server, session, status } from "./fixtures/status";

const text = (el: Element | null): string => (el?.textContent ?? "").replace(/\s+/g, " ").trim();
const all = (root: Element, selector: string): string[] => [...root.querySelectorAll(selector)].map(text);
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

function controls() {
  return {
    addServer: vi.fn<GuideControls["addServer"]>(async () => {}),
    readFile: vi.fn<GuideControls["readFile"]>(),
    importServers: vi.fn<GuideControls["importServers"]>(),
    copy: vi.fn<GuideControls["copy"]>(),
    showApprovals: vi.fn<GuideControls["showApprovals"]>(),
    finish: vi.fn<GuideControls["finish"]>(),
    setPassphrase: vi.fn<GuideControls["setPassphrase"]>(async () => {}),
    previewRewire: vi.fn<GuideControls["previewRewire"]>(),
    rewire: vi.fn<GuideControls["rewire"]>(),
    cancelRewire: vi.fn<GuideControls["cancelRewire"]>(),
    moveToKeychain: vi.fn<GuideControls["moveToKeychain"]>(),
  };
}

const cursor: ImportSource = {
  found: { client: "cursor", path: "/home/ada/.cursor/mcp.json" },
  path: "/home/ada/.cursor/mcp.json",
  entries: [
    { name: "time", route: "direct", command: ["uvx", "mcp-server-time"], envNames: ["TZ"], skipped: null },
    { name: "linear", route: "remote", command: [], envNames: [], skipped: "a remote (HTTP) server: Postern gates stdio servers" },
  ],
  error: null,
  coverage: { servers: 2, throughPostern: 0, remote: ["linear"], direct: ["time"], sentence: "0 of 2 servers through Postern; linear is remote, not gated; time runs directly" },
};

function guide(s: Status = status(), g: Guide = NEW_GUIDE, c = controls()) {
  const root = guideView(s, g, c);
  document.body.replaceChildren(root);
  return root;
}

function type(root: Element, name: string, value: string): void {
  const input = root.querySelector<HTMLInputElement>(`[name="${name}"]`)!;
  input.value = value;
  input.dispatchEvent(new Event("input", { bubbles: true }));
}

beforeEach(() => document.body.replaceChildren());

describe("the first-run guide", () => {
  it("shows on an empty home, in three steps, with the demo", () => {
    const root = guide();

    expect(text(root.querySelector("h2"))).toBe("Welcome to Postern");
    expect(all(root, ".step-title")).toEqual(["Add a server", "Point your agent at Postern", "See the first gated call"]);
    expect(JSON.parse(text(root.querySelector(".step-snippet .snippet")))).toEqual({ mcpServers: { "<label>": { command: "postern", args: ["mcp", "<label>"] } } });
    expect(text(root.querySelector(".call-state"))).toContain("Waiting for an agent to connect");
    expect(text(root.querySelector(".demo-command"))).toBe("postern --home /home/ada/.local/share/postern demo");
    expect(text(root.querySelector(".import-box"))).toContain("Looking for Claude Desktop, Claude Code and Cursor configurations");
    expect(root.querySelector(".finish-guide")).toBeNull();
  });

  it("adds a server from the form: the command split as a shell would, environment lines kept", async () => {
    const c = controls();
    const root = guide(status(), NEW_GUIDE, c);
    const form = root.querySelector<HTMLFormElement>(".add-server-form")!;
    type(form, "label", "notes");
    type(form, "command", "python3");
    type(form, "args", `-m notes_server --title "My notes" --dir '/srv/my notes'`);
    type(form, "cwd", "/srv/notes");
    form.querySelector<HTMLTextAreaElement>('[name="env"]')!.value = "LOG_LEVEL=debug\n\nNOTES_MODE=ro\n";
    expect(form.dataset.dirty).toBe("true");

    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await settled();

    expect(c.addServer).toHaveBeenCalledWith({
      label: "notes",
      command: ["python3", "-m", "notes_server", "--title", "My notes", "--dir", "/srv/my notes"],
      cwd: "/srv/notes",
      env: ["LOG_LEVEL=debug", "NOTES_MODE=ro"],
    });
    expect(form.querySelector<HTMLInputElement>('[name="label"]')!.value).toBe("");
    expect(form.dataset.dirty).toBeUndefined();
  });

  it("says what is wrong with the form, and what the engine refused", async () => {
    const c = controls();
    c.addServer.mockRejectedValue(new Error("a server 'time' is configured already"));
    const root = guide(status(), NEW_GUIDE, c);
    const form = root.querySelector<HTMLFormElement>(".add-server-form")!;
    expect(readServer(form)).toBe("Give the server a label.");
    type(form, "label", "time");
    expect(readServer(form)).toBe("Say which program runs the server.");
    type(form, "command", "uvx");
    type(form, "args", `"unclosed`);
    expect(readServer(form)).toBe("A double quote is not closed.");
    type(form, "args", "mcp-server-time");
    form.querySelector<HTMLTextAreaElement>('[name="env"]')!.value = "JUSTANAME";
    expect(readServer(form)).toBe('Each environment line is NAME=value; got "JUSTANAME".');
    form.querySelector<HTMLTextAreaElement>('[name="env"]')!.value = "";

    form.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    await settled();
    expect(text(form.querySelector(".form-status"))).toBe("a server 'time' is configured already");
  });

  it("offers the servers of an agent configuration found, those that cannot be imported said why", () => {
    const c = controls();
    const root = guide(status(), { ...NEW_GUIDE, sources: [cursor] }, c);

    expect(text(root.querySelector(".import-title"))).toBe("Cursor /home/ada/.cursor/mcp.json");
    expect(all(root, ".import-entry .entry-name")).toEqual(["time", "linear"]);
    expect(all(root, ".import-entry .entry-cmd")).toEqual(["uvx mcp-server-time"]);
    expect(all(root, ".import-entry.skipped .entry-skip")).toEqual(["a remote (HTTP) server: Postern gates stdio servers"]);
    const boxes = [...root.querySelectorAll<HTMLInputElement>('input[name="entry"]')];
    expect(boxes.map((b) => [b.checked, b.disabled])).toEqual([
      [true, false],
      [false, true],
    ]);

    root.querySelector(".import-source")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    expect(c.importServers).toHaveBeenCalledWith("/home/ada/.cursor/mcp.json", ["time"]);

    type(root, "path", "/work/.mcp.json");
    root.querySelector(".import-path")!.dispatchEvent(new Event("submit", { bubbles: true, cancelable: true }));
    expect(c.readFile).toHaveBeenCalledWith("/work/.mcp.json");
    expect(text(guide(status(), { ...NEW_GUIDE, sources: [] }).querySelector(".import-none"))).toContain("No Claude Desktop, Claude Code or Cursor configuration was found");
  });

  it("gives the snippet with the CLI's absolute path once a server is added, and copies it", () => {
    const c = controls();
    const json = JSON.stringify({ mcpServers: { time: { command: "/opt/postern/bin/postern", args: ["mcp", "time"] } } }, null, 2);
    const withServer = status({ servers: [server({ label: "time" })] });
    const g: Guide = { ...NEW_GUIDE, added: ["time"], snippet: { postern: "/opt/postern/bin/postern", json, claudeCode: ["claude mcp add time -- /opt/postern/bin/postern mcp time"] } };
    const root = guide(withServer, g, c);

    expect(JSON.parse(text(root.querySelector(".agent-snippet")))).toEqual({ mcpServers: { time: { command: "/opt/postern/bin/postern", args: ["mcp", "time"] } } });
    expect(all(root, ".claude-code")).toEqual(["claude mcp add time -- /opt/postern/bin/postern mcp time"]);
    root.querySelector<HTMLButtonElement>(".copy")!.click();
    expect(c.copy).toHaveBeenCalledWith(json);
    expect(root.querySelector(".step-add.done")).not.toBeNull();
    root.querySelector<HTMLButtonElement>(".finish-guide")!.click();
    expect(c.finish).toHaveBeenCalledOnce();
  });

  it("follows the first gated call: an agent connects, then its call waits for an answer", () => {
    const c = controls();
    const connected = status({ servers: [server({ label: "time" })], sessions: [session({ id: "#1", server: "time", client: "claude-code 2.0.14" })] });
    expect(text(guide(connected, { ...NEW_GUIDE, added: ["time"] }, c).querySelector(".call-state"))).toBe(
      "An agent is connected to time (claude-code 2.0.14). Its first tool call opens the approval window.",
    );
    const waiting = { ...connected, gate: { ...connected.gate, approvals: 1 } };
    const root = guide(waiting, { ...NEW_GUIDE, added: ["time"] }, c);
    expect(text(root.querySelector(".call-waiting p"))).toContain("A call is waiting for your answer");
    root.querySelector<HTMLButtonElement>(".review")!.click();
    expect(c.showApprovals).toHaveBeenCalledOnce();
  });

  it("shows on an empty home and while a newcomer follows it, until they are done", () => {
    const empty = status();
    const configured = status({ servers: [server({ label: "time" })] });
    expect(guideShown(empty, NEW_GUIDE)).toBe(true);
    expect(guideShown(configured, NEW_GUIDE)).toBe(false);
    expect(guideShown(configured, { ...NEW_GUIDE, added: ["time"] })).toBe(true);
    expect(guideShown(configured, { ...NEW_GUIDE, added: ["time"], finished: true })).toBe(false);
    expect(snippetLabels(configured, NEW_GUIDE)).toEqual(["time"]);
    expect(snippetLabels(status({ servers: [server({ label: "a" }), server({ label: "b" })] }), { ...NEW_GUIDE, added: ["b"] })).toEqual(["b"]);
  });
});

describe("the passphrase step", () => {
  const PASSPHRASE = "correct horse battery";

  function step(c = controls()) {
    const root = passphraseStep(c);
    document.body.replaceChildren(root);
    const form = root.querySelector<HTMLFormElement>("form")!;
    const fill = (first: string, again: string) => {
      root.querySelector<HTMLInputElement>(".passphrase-new")!.value = first;
      root.querySelector<HTMLInputElement>(".passphrase-again")!.value = again;
      form.dispatchEvent(new Event("input", { bubbles: true }));
    };
    const submit = () => root.querySelector<HTMLButtonElement>(".set-passphrase")!.click();
    const typed = () => [...root.querySelectorAll<HTMLInputElement>("input")].map((i) => i.value);
    return { root, form, fill, submit, typed, status: () => text(root.querySelector(".form-status")) };
  }

  it("is shown only while the engine has no passphrase", () => {
    expect(passphraseStepShown(status({ gate: { ...status().gate, passphraseSet: false, vault: "locked" } }))).toBe(true);
    expect(passphraseStepShown(status())).toBe(false);
    expect(passphraseStepShown(status({ gate: { ...status().gate, passphraseSet: true, vault: "locked" } }))).toBe(false);
  });

  it("says why, in two password fields that are never remembered", () => {
    const { root } = step();

    expect(text(root.querySelector("h2"))).toBe("Choose a Postern passphrase");
    const why = text(root.querySelector(".passphrase-why"));
    for (const said of ["a person, not an agent, approves", "every approval, every unlock", "never stored in the clear", "start a new Postern home"]) {
      expect(why).toContain(said);
    }
    for (const cls of ["passphrase-new", "passphrase-again"]) {
      const input = root.querySelector<HTMLInputElement>(`input.${cls}`)!;
      expect(input.type).toBe("password");
      expect(input.getAttribute("autocomplete")).toBe("new-password");
    }
    expect(root.querySelector<HTMLInputElement>(".passphrase-new")!.dataset.autofocus).toBe("true");
  });

  it("catches a mismatch and a passphrase too short without asking the engine, and empties both fields", () => {
    const c = controls();
    const s = step(c);

    s.fill("", "");
    s.submit();
    expect(s.status()).toBe("Type a passphrase.");
    s.fill("short", "short");
    s.submit();
    expect(s.status()).toBe("A passphrase has at least 8 characters.");
    expect(s.typed()).toEqual(["", ""]);
    s.fill(PASSPHRASE, `${PASSPHRASE}!`);
    s.submit();
    expect(s.status()).toBe("The two passphrases differ: type the same one twice.");
    expect(s.root.querySelector(".form-status")?.getAttribute("role")).toBe("alert");
    expect(s.typed()).toEqual(["", ""]);
    expect(c.setPassphrase).not.toHaveBeenCalled();
  });

  it("sets the passphrase typed twice, and keeps no copy of it", async () => {
    const c = controls();
    const s = step(c);

    s.fill(PASSPHRASE, PASSPHRASE);
    s.submit();
    await settled();

    expect(c.setPassphrase).toHaveBeenCalledExactlyOnceWith(PASSPHRASE);
    expect(s.typed()).toEqual(["", ""]);
    expect(document.body.innerHTML).not.toContain(PASSPHRASE);
    expect(s.form.dataset.dirty).toBeUndefined();
  });

  it("shows the engine's refusal", async () => {
    const c = controls();
    c.setPassphrase.mockRejectedValue(Object.assign(new Error("a passphrase is set already"), { code: "passphrase_already_set" }));
    const s = step(c);

    s.fill(PASSPHRASE, PASSPHRASE);
    s.submit();
    await settled();

    expect(s.status()).toBe("a passphrase is set already");
    expect(s.typed()).toEqual(["", ""]);
  });
});

describe("rewiring an agent's configuration", () => {
  const withServer = () => status({ servers: [server({ label: "time" })] });
  const plan = {
    path: cursor.path,
    changes: [{ name: "time", label: "time", before: ["uvx", "mcp-server-time"], after: ["/abs/postern", "mcp", "time"], envNames: ["TZ"] }],
  };

  it("says per agent how many of its servers go through Postern, and offers Rewire while some do not", () => {
    const c = controls();
    const root = guide(withServer(), { ...NEW_GUIDE, sources: [cursor] }, c);

    expect(all(root, ".rewire-source .coverage")).toEqual(["0 of 2 servers through Postern; linear is remote, not gated; time runs directly."]);
    root.querySelector<HTMLButtonElement>(".rewire-preview")!.click();
    expect(c.previewRewire).toHaveBeenCalledWith(cursor.path);
    const covered = { ...cursor, coverage: { ...cursor.coverage!, throughPostern: 1, direct: [], sentence: "1 of 2 servers through Postern; linear is remote, not gated" } };
    expect(guide(withServer(), { ...NEW_GUIDE, sources: [covered] }).querySelector(".rewire-preview")).toBeNull();
  });

  it("previews each change, command before and after, then rewires exactly what it showed", () => {
    const c = controls();
    const root = guide(withServer(), { ...NEW_GUIDE, sources: [cursor], rewire: { path: cursor.path, plan, done: null, error: null } }, c);

    expect(all(root, ".rewire-changes del")).toEqual(["uvx mcp-server-time"]);
    expect(all(root, ".rewire-changes ins")).toEqual(["/abs/postern mcp time"]);
    expect(text(root.querySelector(".rewire-changes li"))).toContain("TZ now comes from Postern.");
    root.querySelector<HTMLButtonElement>(".rewire-apply")!.click();
    expect(c.rewire).toHaveBeenCalledWith(cursor.path, ["time"]);
    root.querySelector<HTMLButtonElement>(".rewire-cancel")!.click();
    expect(c.cancelRewire).toHaveBeenCalled();
  });

  it("says where the backup is, and the coverage after", () => {
    const done = { backup: `${cursor.path}.postern-backup-1`, coverage: { servers: 2, throughPostern: 1, remote: ["linear"], direct: [], sentence: "1 of 2 servers through Postern; linear is remote, not gated" } };
    const root = guide(withServer(), { ...NEW_GUIDE, sources: [cursor], rewire: { path: cursor.path, plan: null, done, error: null } });

    expect(all(root, ".coverage")).toEqual(["1 of 2 servers through Postern; linear is remote, not gated."]);
    expect(text(root.querySelector(".rewired"))).toContain(`kept at ${done.backup}`);
    expect(root.querySelector(".rewire-apply")).toBeNull();
  });
});

describe("secrets an import stored in plain text", () => {
  it("are named with Move to keychain, and nothing shows when there are none", () => {
    const c = controls();
    const secret = { server: "github", name: "GITHUB_TOKEN" };
    const root = guide(status(), { ...NEW_GUIDE, sources: [cursor], plainSecrets: [secret] }, c);

    expect(text(root.querySelector(".plain-secrets .callout-title"))).toBe("Stored in plain text, as the file had them");
    expect(all(root, ".plain-secret-list li")).toEqual(["GITHUB_TOKEN of github Move to keychain"]);
    root.querySelector<HTMLButtonElement>(".move-to-keychain")!.click();
    expect(c.moveToKeychain).toHaveBeenCalledWith(secret);
    expect(guide(status(), { ...NEW_GUIDE, sources: [cursor] }).querySelector(".plain-secrets")).toBeNull();
  });
});

describe("add and import on the Servers view", () => {
  it("offers the same form, import box, plain-text secrets and Rewire, folded under one summary", () => {
    const c = controls();
    const secret = { server: "time", name: "TIME_TOKEN" };
    const panel = addServersPanel(status({ servers: [server({ label: "time" })] }), { ...NEW_GUIDE, sources: [cursor], plainSecrets: [secret] }, c);
    document.body.replaceChildren(panel);

    expect(panel.tagName).toBe("DETAILS");
    expect(panel.getAttribute("data-keep")).toBe("add-servers");
    expect(text(panel.querySelector("summary"))).toBe("Add or import a server");
    expect(panel.querySelector("form.add-server-form")).not.toBeNull();
    expect(all(panel, ".import-entry .entry-name")).toEqual(["time", "linear"]);
    expect(all(panel, ".plain-secret-list li")).toEqual(["TIME_TOKEN of time Move to keychain"]);
    expect(all(panel, ".rewire-source .coverage")).toHaveLength(1);
    type(panel, "label", "clock");
    type(panel, "command", "python3");
    panel.querySelector<HTMLFormElement>("form.add-server-form")!.requestSubmit();
    expect(c.addServer).toHaveBeenCalledWith(expect.objectContaining({ label: "clock", command: ["python3"] }));
  });
});
