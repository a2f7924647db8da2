// The approval window: its queue of open requests (pushed by the app on every change, and
// fetched again every few seconds), which one is shown, the lifetime chosen for it, a live
// countdown, the passphrase field, whether the details are open, and the keyboard:
//
//   1–4         outside the passphrase field: chooses how long (the narrowest is chosen when a
//               card shows, and the chosen option has the focus)
//   Enter       allows with the chosen lifetime: in the passphrase field with what it holds;
//               elsewhere with an empty field it moves to the field first (not on Deny)
//   other keys  typed outside the field go into it (a passphrase is typed where it belongs)
//   Escape      denies the request shown
//   ← / →       shows the previous / next request (in the passphrase field: once it is empty)
//
// A request chosen in the tray (Approve… or Review… of one) is shown first, whichever place it
// has in the queue; Review… (of a flagged request) shows it with its details open.
//
// An approval carries the person's proof: the passphrase typed in the field, which is read and
// emptied as the answer goes (a deny needs none, and empties it too). A refused passphrase
// keeps the card, with the engine's message. A card's buttons take no input for a moment after
// it appears (ARM_MS), so a key or click meant for the previous card never answers the next
// one. The window closes itself when the queue empties (crates/desk/src/approvals.rs).

import type { Reply } from "./approval-card";
import { allowWith, renderApprovals, tick, type ApprovalsState } from "./approval";
import type { Approval, Chosen, Proof } from "./bindings";
import { PAINT_MARK, pressHold } from "./dom";
import { isProofRefusal, passphraseField, SYSTEM_PROOF, takeProof } from "./proof";

/** Where the queue comes from and where answers go (src/ipc.ts in the app; a fake in tests). */
export interface ApprovalSource {
  fetch(): Promise<Approval[]>;
  subscribe(onList: (list: Approval[]) => void): Promise<() => void>;
  /** `proof` is the person's for an approval, `null` for a deny. */
  answer(id: string, reply: Reply, proof: Proof | null): Promise<void>;
  /** The request a person chose in the tray, once (`null`: none). */
  focus?(): Promise<Chosen | null>;
  /** Calls `onChosen` with each request a person chooses in the tray while the window is open. */
  onFocus?(onChosen: (chosen: Chosen) => void): Promise<() => void>;
  /** Resizes the window (CSS pixels). */
  fit?(width: number, height: number): Promise<void>;
  /** The OS authentication the engine can ask (status `systemAuth`), or `null`. */
  systemAuth?(): Promise<string | null>;
  /** Until when (unix ms) a plain Allow needs no passphrase (`null`: every one needs it). */
  clicksUntil?(): Promise<number | null>;
  lock(): Promise<void>;
  /** What the window was opened with, if anything: its first paint, before the first fetch returns. */
  initial?(): InitialApprovals | null;
}

/** The queue and the plain-click window, as the app hands them to a new window. */
export interface InitialApprovals {
  approvals: Approval[];
  clicksUntil: number | null;
}

export interface ApprovalsOptions {
  /** How long a new card's buttons wait before they take input (ms). */
  armMs?: number;
  /** How often to fetch the queue again (ms). */
  intervalMs?: number;
  /** How often the countdown moves (ms). */
  tickMs?: number;
  now?: () => number;
}

/** Runs the approval window in `root`; returns a function that stops it. */
export function approvalsWindow(root: HTMLElement, source: ApprovalSource, options: ApprovalsOptions = {}): () => void {
  const { armMs = 600, intervalMs = 2000, tickMs = 250, now = Date.now } = options;
  const doc = root.ownerDocument;
  let queue: Approval[] = [];
  let currentId: string | null = null;
  let armedId: string | null = null;
  let busy = false;
  let error: string | null = null;
  let armTimer: ReturnType<typeof setTimeout> | undefined;
  let shownKey = "";
  let stopped = false;
  let unsubscribe: (() => void) | undefined;
  // The lifetime chosen for the card shown (an index into its choices; 0 is the narrowest).
  let choice = 0;
  // Whether the details are open: the window remembers it across cards and launches.
  let details = readDetails();
  // Whether the engine can ask the OS instead of the passphrase (asked again at each refresh).
  let systemAuth: string | null = null;
  // The window's one passphrase field, mounted by every render: what is typed survives them.
  const passphrase = passphraseField();
  // Until when a plain Allow needs no passphrase (the engine's word, fetched with the queue).
  let clicksUntil: number | null = null;
  const clicks = (): boolean => clicksUntil !== null && now() < clicksUntil;
  const allow = (): void => {
    const card = queue[index()]?.card;
    if (card !== undefined && card.id === currentId) answer(allowWith(card, choice));
  };

  const index = (): number => Math.max(0, queue.findIndex((a) => a.card.id === currentId));

  // A repaint waits for a pressed pointer's release, so the click lands on the card pressed.
  const hold = pressHold(doc, () => render());
  const render = (): void => {
    if (stopped || hold.pressed()) return;
    const state: ApprovalsState = { queue, index: index(), armed: armedId !== null && armedId === currentId, busy, error, choice, details, clicksUntil, systemAuth };
    const key = JSON.stringify([queue.map((a) => a.card.id), state.index, state.armed, busy, error, choice, details, clicks() ? clicksUntil : null, systemAuth]);
    if (key === shownKey) return;
    shownKey = key;
    // Keep the focused button focused across a re-render of the same card.
    const focusKey = doc.activeElement instanceof HTMLElement ? doc.activeElement.dataset.focus : undefined;
    const sameCard = root.querySelector(".approval")?.getAttribute("data-approval") === currentId;
    const scrolled = sameCard ? (root.querySelector(".content")?.scrollTop ?? 0) : 0;
    root.replaceChildren(renderApprovals(state, now(), { answer, move, lock, choose, details: setDetails }, passphrase));
    performance.mark(PAINT_MARK, { detail: currentId });
    // A new card opens scrolled to the top; the same card stays where the person scrolled.
    const content = root.querySelector(".content");
    if (content !== null) content.scrollTop = scrolled;
    // A new card: the chosen lifetime has the focus (1–4 and Enter work from there), or the
    // passphrase field when there is no lifetime to choose. The same card keeps the focus
    // where the person put it (the field is the same element, mounted again).
    const target =
      (sameCard && focusKey !== undefined ? root.querySelector<HTMLElement>(`[data-focus="${focusKey}"]`) : null) ??
      root.querySelector<HTMLElement>(".lifetime.checked") ??
      (currentId !== null && root.contains(passphrase) ? passphrase : null);
    if (target !== null && !(target as HTMLButtonElement).disabled) target.focus();
    const fitKey = `${currentId}:${details}`;
    if (fitKey !== fittedKey) {
      fittedKey = fitKey;
      fit();
      // Again when the layout has settled, and once the window is surely on screen: a new
      // window may be mapped at its default size after the first try (a busy machine).
      for (const timer of fitTimers) clearTimeout(timer);
      fitTimers = FIT_AGAIN_MS.map((ms) => setTimeout(fit, ms));
    }
  };

  /** The window fits the card shown, up to the screen (a new card, details opened or folded). */
  let fittedKey = "";
  let fitTimers: ReturnType<typeof setTimeout>[] = [];
  const fit = (): void => {
    const view = doc.defaultView;
    const card = root.firstElementChild;
    if (source.fit === undefined || view === null || card === null || currentId === null) return;
    const height = fittedHeight(card.getBoundingClientRect().height, view.screen?.availHeight ?? 0);
    if (Math.abs(height - view.innerHeight) <= FIT_SLACK) return;
    source.fit(view.innerWidth, height).catch((err: unknown) => console.warn("cannot fit the window:", err));
  };

  /** Shows `id`; a card not shown before waits ARM_MS before it takes input. */
  const show = (id: string | null): void => {
    if (id !== currentId) {
      currentId = id;
      armedId = null;
      error = null;
      choice = 0;
      clearTimeout(armTimer);
      if (id !== null) {
        armTimer = setTimeout(() => {
          armedId = id;
          shownKey = "";
          render();
        }, armMs);
      }
    }
    render();
  };

  const update = (list: Approval[]): void => {
    if (stopped) return;
    const at = index();
    queue = list;
    // Nothing left to approve: nothing typed stays behind.
    if (list.length === 0) passphrase.value = "";
    if (currentId !== null && list.some((a) => a.card.id === currentId)) {
      render();
      return;
    }
    // The request shown was answered (or timed out): show the one that took its place.
    show(list[Math.min(at, list.length - 1)]?.card.id ?? null);
  };

  const refresh = async (): Promise<void> => {
    try {
      // Not knowing only means every Allow asks for the passphrase.
      if (source.clicksUntil !== undefined) clicksUntil = await source.clicksUntil().catch(() => null);
      if (source.systemAuth !== undefined) systemAuth = await source.systemAuth().catch(() => null);
      update(await source.fetch());
    } catch (err) {
      console.warn("cannot read the approval queue:", err);
    }
  };

  /** Shows the request chosen in the tray, when it is in the queue; Review… (of a flagged
   * one) opens its details, without changing what the window remembers. */
  const focusOn = (chosen: Chosen | null): void => {
    if (chosen === null || !queue.some((a) => a.card.id === chosen.id)) return;
    if (chosen.review) details = true;
    show(chosen.id);
  };

  function answer(reply: Reply, system = false): void {
    const id = currentId;
    if (id === null || busy || armedId !== id) return;
    // The field is emptied as any answer goes; only an approval carries what it held (or,
    // with system authentication, the request that the OS ask the person).
    const typed = takeProof(passphrase);
    const proof = system ? SYSTEM_PROOF : typed;
    if (reply.reply === "approve" && proof === null && !clicks()) {
      error = "Type your Postern passphrase to approve.";
      render();
      passphrase.focus();
      return;
    }
    busy = true;
    error = null;
    render();
    let again = false;
    source
      .answer(id, reply, reply.reply === "approve" ? proof : null)
      .catch((err: unknown) => {
        error = err instanceof Error ? err.message : String(err);
        again = isProofRefusal(err);
      })
      .finally(() => {
        busy = false;
        render();
        // A wrong passphrase: the card stays, with the message, ready for another try.
        if (again) passphrase.focus();
        void refresh();
      });
  }

  function move(delta: number): void {
    const next = queue[index() + delta];
    if (next !== undefined) show(next.card.id);
  }

  function choose(i: number): void {
    const card = queue[index()]?.card;
    if (card === undefined || i < 0 || i >= card.choices.length) return;
    choice = i;
    render();
    root.querySelector<HTMLElement>(`[data-focus="lifetime-${i}"]`)?.focus();
  }

  function setDetails(open: boolean): void {
    if (open === details) return;
    details = open;
    writeDetails(open);
    render();
  }

  function lock(): void {
    passphrase.value = "";
    source.lock().catch((err: unknown) => {
      error = err instanceof Error ? err.message : String(err);
      render();
    });
  }

  const onKey = (event: KeyboardEvent): void => {
    const inField = event.target === passphrase;
    const target = event.target instanceof HTMLElement ? event.target : null;
    const plain = !event.altKey && !event.ctrlKey && !event.metaKey;
    if (event.key === "Escape") {
      event.preventDefault();
      answer({ reply: "deny" });
    } else if (event.key === "Enter") {
      // Enter on Deny, a folded value or a link does what it says there; anywhere else it allows.
      if (!inField && target !== null && target.closest("button:not(.lifetime), summary, a") !== null) return;
      event.preventDefault();
      if (!inField && passphrase.value === "" && !clicks()) {
        error = "Type your Postern passphrase, then Enter, to allow.";
        render();
        passphrase.focus();
        return;
      }
      allow();
    } else if (inField) {
      if (passphrase.value !== "") return; // the arrows move the caret in a passphrase being typed
      if (event.key === "ArrowLeft") move(-1);
      else if (event.key === "ArrowRight") move(1);
    } else if (plain && /^[1-9]$/.test(event.key)) {
      event.preventDefault();
      choose(Number(event.key) - 1);
    } else if (event.key === "ArrowLeft") {
      move(-1);
    } else if (event.key === "ArrowRight") {
      move(1);
    } else if (plain && event.key.length === 1 && event.key !== " " && currentId !== null && root.contains(passphrase)) {
      // Typed outside the field: it goes where a passphrase belongs.
      event.preventDefault();
      passphrase.value += event.key;
      passphrase.focus();
    }
  };
  doc.addEventListener("keydown", onKey);

  const initial = source.initial?.() ?? null;
  if (initial !== null) {
    clicksUntil = initial.clicksUntil;
    update(initial.approvals);
  } else render();
  source
    .subscribe(update)
    .then((off) => (stopped ? off() : (unsubscribe = off)))
    .catch((err: unknown) => console.warn("no approvals-changed events:", err));
  // The request chosen in the tray comes first: read once the queue is here, then followed.
  void refresh().then(async () => focusOn((await source.focus?.()) ?? null)).catch((err: unknown) => console.warn("no tray focus:", err));
  let offFocus: (() => void) | undefined;
  source.onFocus?.((chosen) => {
    void refresh().then(() => focusOn(chosen));
  })
    .then((off) => (stopped ? off() : (offFocus = off)))
    .catch((err: unknown) => console.warn("no approvals-focus events:", err));
  const poll = setInterval(() => void refresh(), intervalMs);
  const ticker = setInterval(() => {
    tick(root, queue, now());
    // The plain-click window closed: the card asks for the passphrase again.
    if (!clicks() && root.querySelector(".clicks") !== null) render();
  }, tickMs);

  return () => {
    stopped = true;
    hold.stop();
    clearInterval(poll);
    clearInterval(ticker);
    clearTimeout(armTimer);
    for (const timer of fitTimers) clearTimeout(timer);
    doc.removeEventListener("keydown", onKey);
    unsubscribe?.();
    offFocus?.();
  };
}

/** The window's own minimum height (src-tauri/src/window.rs), and how far below the screen's
 * usable height it stops. */
const MIN_HEIGHT = 480;
const SCREEN_MARGIN = 48;
/** A difference this small is left alone (no resize for a pixel or two). */
const FIT_SLACK = 8;
/** When the window fits its card again, after the first try (ms). */
const FIT_AGAIN_MS = [300, 1500];

/** The window height that fits `content` (CSS px), between the window's minimum and the
 * screen's usable height (`screen`, 0 when unknown: the content's own height then). */
export function fittedHeight(content: number, screen: number): number {
  const most = screen > 0 ? Math.max(MIN_HEIGHT, screen - SCREEN_MARGIN) : Number.POSITIVE_INFINITY;
  return Math.round(Math.min(Math.max(content, MIN_HEIGHT), most));
}

const DETAILS_KEY = "postern.approvals.details";

function readDetails(): boolean {
  try {
    return globalThis.localStorage?.getItem(DETAILS_KEY) === "open";
  } catch {
    return false;
  }
}

function writeDetails(open: boolean): void {
  try {
    globalThis.localStorage?.setItem(DETAILS_KEY, open ? "open" : "closed");
  } catch {
    // Nowhere to remember it: the details open folded next time.
  }
}
