// Keeps the status window current: the app pushes `status-changed` when the engine changes, and
// the window also polls, because configuration edited with the `postern` CLI goes straight
// to the database without passing through the engine. It also owns the window's controls and
// what the window knows beyond the engine's status: the page shown, the credentials, a
// verification of the audit log, the first-run guide, the Permissions page (read again on every
// change the engine pushes, so an approval or a revoke shows at once), and the two views that keep their own
// state (the timeline and the Activity feed), which it pokes when the engine changes. Commands
// that need the person's proof go through the "Confirm it's you" dialog (src/proof.ts).

import { message, type Apis } from "./api";
import { activityView, type ActivityView } from "./activity";
import type { CredentialItem, EngineView, Permissions, Proof, Settings, SettingsChange, Status } from "./bindings";
import type { CredentialControls } from "./credentials";
import { openDetails, PAINT_MARK, pressHold, reopenDetails } from "./dom";
import { entryPanel } from "./entry";
import { NEW_GUIDE, snippetLabels, type Guide, type GuideControls } from "./firstrun";
import type { VerifyState } from "./integrity";
import type { LockNote } from "./lock";
import { targetText, type PermissionControls } from "./permissions";
import { ProofCancelled, proofDialog, type Prove } from "./proof";
import { needsProof } from "./settings";
import { timelineView, type TimelineView } from "./timeline";
import { render, type Controls, type Shown, type Tab } from "./view";

/** Where status comes from (src/ipc.ts in the app; a fake in tests). */
export interface StatusSource {
  fetch(): Promise<EngineView>;
  subscribe(onView: (view: EngineView) => void): Promise<() => void>;
  /** The view the window was opened with, if any: its first paint, before the first fetch returns. */
  initial?(): EngineView | null;
}

/** What the window's controls ask of the engine (src/ipc.ts in the app; a fake in tests). */
export interface Actions {
  lock(): Promise<void>;
  /** Clears the leak notices (the person saw them). */
  dismissLeaks(): Promise<void>;
  unlock(proof: Proof): Promise<void>;
  /** `proof` is needed when `needsProof(change)` (src/settings.ts), `null` otherwise. */
  updateSettings(change: SettingsChange, proof: Proof | null): Promise<Settings>;
  /** The first passphrase (`proof` null; it also unlocks), or a new one (`proof`: the current one). */
  setPassphrase(passphrase: string, proof: Proof | null): Promise<void>;
  showApprovals(): Promise<void>;
}

export interface LiveOptions {
  /** What the controls do (without it they do nothing). */
  actions?: Actions;
  /** Servers, credentials, the journals (without them those views say they are unavailable). */
  apis?: Apis;
  /** Copies text to the clipboard. */
  copy?: (text: string) => Promise<void>;
  /** Asks the person's proof before a command that needs it (default: the dialog on this document). */
  prove?: Prove;
  /** How often to poll, in milliseconds. */
  intervalMs?: number;
  /** The clock, for relative times. */
  now?: () => number;
}

const NO_ACTIONS: Actions = {
  lock: async () => {},
  dismissLeaks: async () => {},
  unlock: async () => {},
  updateSettings: async () => Promise.reject(new Error("settings cannot be changed here")),
  setPassphrase: async () => Promise.reject(new Error("the passphrase cannot be set here")),
  showApprovals: async () => {},
};

/** Renders into `root` now and on every change; returns a function that stops it. */
export function live(root: HTMLElement, source: StatusSource, options: LiveOptions = {}): () => void {
  const { actions = NO_ACTIONS, apis, intervalMs = 2000, now = Date.now } = options;
  const copy = options.copy ?? ((text: string) => navigator.clipboard.writeText(text));
  let shown: Shown = { kind: "loading" };
  // The dialog offers system authentication when the engine last said it is available.
  const systemAuth = (): string | null => (shown.kind === "view" && shown.view.state === "running" ? shown.view.status.systemAuth : null);
  const prove = options.prove ?? proofDialog(root.ownerDocument, systemAuth);
  let tab: Tab = "overview";
  let actionError: string | null = null;
  let settingsNote: string | null = null;
  let lockNote: LockNote = { error: null, busy: false };
  let serverNotes: Record<string, string> = {};
  let credentials: { list: CredentialItem[] | null; error: string | null } = { list: null, error: null };
  let permissions: { page: Permissions | null; error: string | null } = { page: null, error: null };
  let verification: VerifyState = { kind: "idle" };
  let guide: Guide = NEW_GUIDE;
  let snippetKey = "";
  let looked = false;
  let shownKey = "";
  let stopped = false;
  let unsubscribe: (() => void) | undefined;

  const act = (what: string, run: () => Promise<unknown>): Promise<void> => {
    actionError = null;
    return run()
      .then(() => refresh())
      .catch((err: unknown) => {
        // Closing the proof dialog is a change of mind, not a failure.
        if (err instanceof ProofCancelled) return;
        actionError = `Cannot ${what}: ${message(err)}`;
        paint();
      });
  };

  // --- the views with their own state ---
  const timeline: TimelineView | null = apis
    ? timelineView(apis.journal, {
        entry: entryPanel(apis.journal),
        now,
        openSession: (session) => {
          activity?.show({ session });
          controls.tab("activity");
        },
      })
    : null;
  const activity: ActivityView | null = apis ? activityView(apis.journal, entryPanel(apis.journal)) : null;
  const panes = { ...(timeline ? { timeline: timeline.el } : {}), ...(activity ? { activity: activity.el } : {}) };

  const readCredentials = (): void => {
    if (!apis) return;
    apis.credentials.list().then(
      (list) => {
        credentials = { list, error: null };
        paint();
      },
      (err: unknown) => {
        credentials = { ...credentials, error: message(err) };
        paint();
      },
    );
  };
  const credentialControls: CredentialControls = {
    add: async (credential) => {
      if (!apis) throw new Error("credentials cannot be changed here");
      // The value is handed on and not kept: `credential` lives only until the dialog answers.
      await prove({ action: `Add the credential ${credential.name}.` }, (proof) => apis.credentials.add(credential, proof));
      readCredentials();
    },
    rotate: async (name, value) => {
      if (!apis) throw new Error("credentials cannot be changed here");
      await prove({ action: `Rotate the credential ${name}.` }, (proof) => apis.credentials.rotate(name, value, proof));
      readCredentials();
    },
    remove: (name) =>
      act(`remove ${name}`, async () => apis && prove({ action: `Remove the credential ${name}.` }, (proof) => apis.credentials.remove(name, proof))).then(readCredentials),
    bind: (server, name) =>
      act(`bind ${name} to ${server}`, async () =>
        apis && prove({ action: `Bind the credential ${name} to ${server}.`, detail: "Its processes may then be given it, once you approve their code for it." }, (proof) => apis.credentials.bind(server, name, proof)),
      ).then(readCredentials),
    unbind: (server, name) => act(`unbind ${name} from ${server}`, async () => apis?.credentials.unbind(server, name)).then(readCredentials),
  };

  // --- the Permissions page ---
  const readPermissions = (): void => {
    if (!apis) return;
    apis.permissions.list().then(
      (page) => {
        permissions = { page, error: null };
        paint();
      },
      (err: unknown) => {
        permissions = { ...permissions, error: message(err) };
        paint();
      },
    );
  };
  const permissionControls: PermissionControls = {
    // Revoking narrows: no proof. The engine's change pushes a new status, which reads the page again.
    revoke: (id) => act("revoke the grant", async () => apis?.permissions.revoke(id)).then(readPermissions),
    revokeRun: (run, agent) => act(`revoke the grants of ${agent}`, async () => apis?.permissions.revokeRun(run)).then(readPermissions),
    addEveryUse: async (target) => {
      if (!apis) throw new Error("rules cannot be changed here");
      const warning = await apis.permissions.setEveryUse(target, true, null);
      readPermissions();
      return warning;
    },
    removeEveryUse: (target) =>
      act(`stop asking on every use of ${targetText(target)}`, async () =>
        apis &&
        prove(
          { action: `Stop asking on every use: ${targetText(target)}.`, detail: "Grants and approvals decide its calls again." },
          (proof) => apis.permissions.setEveryUse(target, false, proof),
        ),
      ).then(readPermissions),
  };

  // --- the first-run guide ---
  const lookForSources = (): void => {
    if (!apis || looked) return;
    looked = true;
    apis.servers.importSources().then(
      (sources) => {
        guide = { ...guide, sources };
        paint();
      },
      (err: unknown) => {
        guide = { ...guide, note: { text: `Cannot look for agent configurations: ${message(err)}`, bad: true } };
        paint();
      },
    );
  };
  const added = (labels: string[]): void => {
    guide = { ...guide, added: [...new Set([...guide.added, ...labels])] };
  };
  const guideControls: GuideControls = {
    addServer: async (server) => {
      if (!apis) throw new Error("servers cannot be added here");
      const label = await apis.servers.addServer(server);
      added([label]);
      guide = { ...guide, note: { text: `Added ${label}. Now point your agent at it (step 2).`, bad: false } };
      await refresh();
    },
    readFile: (path) => {
      apis?.servers.importSources(path).then(
        (more) => {
          const known = (guide.sources ?? []).filter((s) => !more.some((m) => m.path === s.path));
          guide = { ...guide, sources: [...known, ...more] };
          paint();
        },
        (err: unknown) => {
          guide = { ...guide, note: { text: message(err), bad: true } };
          paint();
        },
      );
    },
    importServers: (path, names) => {
      apis?.servers.importServers(path, names).then(
        (outcomes) => {
          const ok = outcomes.flatMap((o) => (o.label === null ? [] : [o.label]));
          const secrets = outcomes.flatMap((o) => (o.label === null ? [] : o.secrets.map((name) => ({ server: o.label!, name }))));
          guide = { ...guide, plainSecrets: [...guide.plainSecrets, ...secrets] };
          const skipped = outcomes.filter((o) => o.skipped !== null).map((o) => `${o.name}: ${o.skipped}`);
          added(ok);
          const said = [ok.length > 0 ? `Imported ${ok.join(", ")}.` : "Nothing imported.", ...skipped.map((s) => `Skipped ${s}.`)];
          guide = { ...guide, note: { text: said.join(" "), bad: ok.length === 0 } };
          void refresh();
        },
        (err: unknown) => {
          guide = { ...guide, note: { text: message(err), bad: true } };
          paint();
        },
      );
    },
    copy: (text) => {
      copy(text).then(
        () => (guide = { ...guide, note: { text: "Copied.", bad: false } }),
        (err: unknown) => (guide = { ...guide, note: { text: `Cannot copy (select the text instead): ${message(err)}`, bad: true } }),
      ).finally(paint);
    },
    previewRewire: (path) => {
      guide = { ...guide, rewire: { path, plan: null, done: null, error: null } };
      apis?.servers.rewirePreview(path).then(
        (plan) => (guide = { ...guide, rewire: { path, plan, done: null, error: null } }),
        (err: unknown) => (guide = { ...guide, rewire: { path, plan: null, done: null, error: message(err) } }),
      ).finally(paint);
      paint();
    },
    rewire: (path, names) => {
      apis?.servers.rewire(path, names).then(
        (done) => {
          guide = { ...guide, rewire: { path, plan: null, done, error: null } };
          void refresh();
        },
        (err: unknown) => {
          const plan = guide.rewire?.path === path ? guide.rewire.plan : null;
          guide = { ...guide, rewire: { path, plan, done: null, error: message(err) } };
          paint();
        },
      );
    },
    moveToKeychain: (secret) =>
      void act(`move ${secret.name} into the keychain`, async () => {
        if (!apis) return;
        const name = await prove(
          { action: `Move ${secret.name} of ${secret.server} into the keychain.`, detail: "It becomes a credential bound to the server, released only to code you approve." },
          (proof) => apis.credentials.moveToKeychain(secret.server, secret.name, proof),
        );
        guide = {
          ...guide,
          plainSecrets: guide.plainSecrets.filter((s) => s !== secret),
          note: { text: `${secret.name} of ${secret.server} is in the keychain now, as the credential ${name}.`, bad: false },
        };
        readCredentials();
      }).then(paint),
    cancelRewire: () => {
      guide = { ...guide, rewire: null };
      paint();
    },
    showApprovals: () => void act("open the approval window", actions.showApprovals),
    finish: () => {
      guide = { ...guide, finished: true, note: null };
      paint();
    },
    setPassphrase: async (passphrase) => {
      await actions.setPassphrase(passphrase, null);
      await refresh();
    },
  };
  /** The snippet's absolute path comes from the app: ask again when the labels change. */
  const snippetFor = (status: Status): void => {
    if (!apis) return;
    const labels = snippetLabels(status, guide);
    const key = JSON.stringify(labels);
    if (labels.length === 0 || key === snippetKey) return;
    snippetKey = key;
    apis.servers.agentSnippet(labels).then(
      (snippet) => {
        guide = { ...guide, snippet };
        paint();
      },
      (err: unknown) => console.warn("no agent snippet:", err),
    );
  };

  const controls: Controls = {
    tab: (next) => {
      tab = next;
      settingsNote = null;
      if (next === "credentials") readCredentials();
      if (next === "permissions") {
        readPermissions();
        // The every-use form offers the credentials by name.
        if (credentials.list === null) readCredentials();
      }
      if (next === "timeline") timeline?.shown();
      if (next === "activity") activity?.shown();
      paint();
    },
    lock: () => {
      lockNote = { error: null, busy: false };
      void act("lock", actions.lock);
    },
    dismissLeaks: () => {
      void act("dismiss the notices", actions.dismissLeaks);
    },
    unlock: (proof) => {
      if (lockNote.busy) return;
      actionError = null;
      lockNote = { error: null, busy: true };
      paint();
      actions.unlock(proof).then(
        () => {
          lockNote = { error: null, busy: false };
          // Read again what the locked window forgot (the timeline and Activity panes follow
          // the status themselves).
          if (tab === "credentials") readCredentials();
          return refresh();
        },
        (err: unknown) => {
          // A wrong passphrase (or a back-off) says when to try again: the screen shows it.
          lockNote = { error: message(err), busy: false };
          paint();
        },
      );
    },
    saveSettings: async (change) => {
      settingsNote = null;
      if (needsProof(change)) {
        const what = change.sessionMode === "observe" ? "Turn on observe mode: every identified agent run is admitted without asking." : "Change the auto-lock.";
        await prove({ action: what }, (proof) => actions.updateSettings(change, proof));
      } else {
        await actions.updateSettings(change, null);
      }
      // The status that follows draws the form again from the engine's settings: say it saved.
      settingsNote = "Saved";
      void refresh();
    },
    changePassphrase: async (passphrase) => {
      await prove({ action: "Change the Postern passphrase.", detail: "Type the current passphrase." }, (proof) => actions.setPassphrase(passphrase, proof));
    },
    showApprovals: () => void act("open the approval window", actions.showApprovals),
    restart: (label) => {
      if (!apis) return;
      void act(`restart ${label}`, async () => {
        const n = await apis.servers.restart(label);
        serverNotes = {
          ...serverNotes,
          [label]:
            n === 0
              ? `${label} is not running: its next call starts it, with a new execution epoch.`
              : `Restarting ${n} process${n === 1 ? "" : "es"} of ${label}: each gets a new execution epoch.`,
        };
      });
    },
    verify: (openBodies) => {
      if (!apis || verification.kind === "running") return;
      verification = { kind: "running", openBodies };
      paint();
      apis.journal.verify(openBodies).then(
        (result) => (verification = { kind: "done", result, openBodies, atMs: now() }),
        (err: unknown) => (verification = { kind: "error", message: message(err) }),
      ).finally(paint);
    },
    credentials: credentialControls,
    permissions: permissionControls,
    guide: guideControls,
  };

  // A repaint waits for a pressed pointer's release (and its click), then paints what is new.
  const hold = pressHold(root.ownerDocument, () => paint());
  const paint = (): void => {
    if (stopped || hold.pressed()) return;
    const at = now();
    // Re-render only when something visible changed (times are shown to the minute), so a
    // selection the user is about to copy survives the refresh.
    const key = JSON.stringify([shown, tab, actionError, settingsNote, lockNote, serverNotes, credentials, permissions, verification, guide]) + Math.floor(at / 60_000);
    if (key === shownKey) return;
    shownKey = key;
    const focused = root.ownerDocument.activeElement;
    const next = render(shown, at, { tab, controls, actionError, settingsNote, lockNote, serverNotes, credentials, permissions, verification, guide, panes });
    // An execution record the user opened stays open across the refresh, and so do forms
    // the user is editing (and the field they are typing in).
    reopenDetails(next, openDetails(root));
    keepEditedForms(next, root, focused);
    root.replaceChildren(next);
    performance.mark(PAINT_MARK, { detail: shown.kind === "view" ? shown.view.state : shown.kind });
    if (focused instanceof HTMLElement && focused !== root.ownerDocument.body && root.contains(focused)) focused.focus();
    else autofocus();
  };

  /** Puts the focus in the field a screen asks for (the passphrase), unless it is elsewhere already. */
  const autofocus = (): void => {
    const active = root.ownerDocument.activeElement;
    if (active !== null && active !== root.ownerDocument.body) return;
    root.querySelector<HTMLElement>("[data-autofocus]")?.focus();
  };
  // The tray's Unlock shows this window on its locked screen: the passphrase field is ready.
  const onWindowFocus = (): void => autofocus();
  root.ownerDocument.defaultView?.addEventListener("focus", onWindowFocus);

  const show = (view: Shown): void => {
    shown = view;
    if (view.kind === "view" && view.view.state === "running" && view.view.status.gate.vault !== "ready") {
      // Locked: nothing read from the vault stays in the window, shown or not.
      timeline?.forget();
      activity?.forget();
      credentials = { list: null, error: null };
      permissions = { page: null, error: null };
    } else if (view.kind === "view" && view.view.state === "running") {
      const status = view.view.status;
      if ((status.servers.length === 0 && status.sessions.length === 0) || tab === "servers") lookForSources();
      snippetFor(status);
      activity?.servers(status.servers.map((s) => s.label));
      // The views with their own reads follow the engine too.
      if (tab === "timeline") timeline?.poke();
      if (tab === "activity") activity?.poke();
      // A grant given in the approval window, revoked, or run out: the page follows.
      if (tab === "permissions") readPermissions();
    }
    paint();
  };

  const refresh = async (): Promise<void> => {
    try {
      show({ kind: "view", view: await source.fetch() });
    } catch (err) {
      show({ kind: "ipcError", message: String(err) });
    }
  };

  const initial = source.initial?.() ?? null;
  if (initial !== null) show({ kind: "view", view: initial });
  else paint();
  source
    .subscribe((view) => {
      show({ kind: "view", view });
      // A change pushed by the engine may be a credential edited from the CLI.
      if (tab === "credentials") readCredentials();
    })
    .then((off) => (stopped ? off() : (unsubscribe = off)))
    .catch((err: unknown) => console.warn("no status-changed events:", err));
  void refresh();
  const timer = setInterval(() => void refresh(), intervalMs);

  return () => {
    stopped = true;
    hold.stop();
    clearInterval(timer);
    root.ownerDocument.defaultView?.removeEventListener("focus", onWindowFocus);
    unsubscribe?.();
  };
}

/**
 * Puts each form the user has edited (`data-dirty`), and the form holding the focus (a field
 * clicked but not yet typed in), from `old` into `next` in place of its fresh copy (the same
 * `data-form` key; the settings form by its class). A push landing between the click and the
 * first keystroke would otherwise take the field away and the keystrokes with it.
 */
function keepEditedForms(next: HTMLElement, old: HTMLElement, focused: Element | null): void {
  const kept = new Set(old.querySelectorAll<HTMLFormElement>("form[data-dirty]"));
  const holding = focused?.closest("form");
  if (holding instanceof HTMLFormElement && old.contains(holding)) kept.add(holding);
  for (const edited of kept) {
    const key = edited.dataset.form;
    const fresh =
      key !== undefined
        ? [...next.querySelectorAll<HTMLFormElement>("form[data-form]")].find((f) => f.dataset.form === key)
        : edited.classList.contains("settings-form")
          ? next.querySelector("form.settings-form")
          : null;
    if (fresh) fresh.replaceWith(edited);
  }
}
