// A tray host for the app under Xvfb, so tests and screenshots reach its real tray menu.
//
// A bare X server has no StatusNotifier host. Without one, libayatana-appindicator (Tauri's
// tray on Linux) falls back to an XEmbed status icon, which any system tray can hold: trayer
// holds it here, docked at the screen's top right. xdotool works the menu as a person would
// (a click on the icon, then the keyboard), and ImageMagick's `import` takes its picture.
// Start the tray before the app, so the icon finds its host when it is created.

import { execFileSync, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

import { sleep, until } from "./webdriver.mjs";

/** The programs a tray needs here (Debian packages: trayer, xdotool, imagemagick). */
export const TRAY_PROGRAMS = ["trayer", "xdotool", "import"];

/** The panel's height, in pixels; the icon is a square of it. */
const HEIGHT = 28;

/** Starts trayer on `$DISPLAY`; `stop()` ends it. */
export async function startTray() {
  for (const program of TRAY_PROGRAMS) {
    try {
      execFileSync("sh", ["-c", `command -v ${program}`], { stdio: "ignore" });
    } catch {
      throw new Error(`the tray needs ${program} (Debian: apt-get install trayer xdotool imagemagick)`);
    }
  }
  // trayer now and then never maps its panel under Xvfb (a tray selection still held by the
  // last one, seen once in a few runs): a start that shows no panel within 10 s is tried again.
  let child = null;
  for (let attempt = 1; ; attempt++) {
    child = spawn(
      "trayer",
      ["--edge", "top", "--align", "right", "--widthtype", "request", "--height", String(HEIGHT), "--SetDockType", "true", "--transparent", "false"],
      { stdio: "ignore" },
    );
    try {
      await until(() => panel() !== null, 10_000, "trayer's panel");
      break;
    } catch (err) {
      child.kill("SIGKILL");
      if (attempt === 3) throw err;
      await sleep(500);
    }
  }
  return {
    /** Waits for the app's icon to sit in the tray. */
    async waitForIcon() {
      await until(() => (panel()?.width ?? 0) >= HEIGHT - 4, 15_000, "the app's icon in the tray");
    },
    /** Opens the icon's menu with a click, as a person does, and waits for it to show. */
    async openMenu() {
      const before = new Set(visibleWindows());
      const { width } = screen();
      xdotool("mousemove", String(width - HEIGHT / 2), String(HEIGHT / 2), "click", "1");
      await until(() => visibleWindows().some((id) => !before.has(id)), 5000, "the tray menu to open");
      await sleep(300);
    },
    /** Types keys into the open menu (xdotool key names: Down, Right, Return, Escape). */
    async keys(...names) {
      for (const name of names) {
        xdotool("key", name);
        await sleep(150);
      }
      await sleep(400);
    },
    /** Presses one key in the open menu and returns at once (for timing what it starts). */
    press(name) {
      xdotool("key", name);
    },
    /** A PNG of the screen's top right corner, where the icon and its menu are. */
    picture(width = 520, height = 225) {
      const screenWidth = screen().width;
      return execFileSync("import", ["-window", "root", "-crop", `${width}x${height}+${screenWidth - width}+0`, "png:-"], {
        maxBuffer: 64 << 20,
      });
    },
    async stop() {
      child.kill("SIGTERM");
      await Promise.race([new Promise((r) => child.once("exit", r)), sleep(3000)]);
    },
  };
}

/**
 * Closes the shown top-level window titled `title` as a window manager's close button does
 * (close-window.py: WM_DELETE_WINDOW), so the app gets a close request. Waits up to 5 s for
 * it to be shown: right after another of the app's windows closed, X may not list it as
 * viewable for a moment.
 */
export async function closeWindow(title) {
  const shown = () => {
    try {
      return xdotool("search", "--onlyvisible", "--name", `^${title}$`).split("\n").filter(Boolean);
    } catch {
      return []; // None shown.
    }
  };
  let ids = shown();
  for (const until = Date.now() + 5000; ids.length === 0 && Date.now() < until; ids = shown()) {
    await new Promise((r) => setTimeout(r, 100));
  }
  if (ids.length === 0) throw new Error(`no window titled ${JSON.stringify(title)} is shown`);
  for (const id of ids) execFileSync("python3", [fileURLToPath(new URL("close-window.py", import.meta.url)), id]);
}

/** The geometry of trayer's panel window, or null while it has none. */
function panel() {
  let ids;
  try {
    ids = xdotool("search", "--onlyvisible", "--class", "trayer").split("\n").filter(Boolean);
  } catch {
    return null;
  }
  const panels = ids.map(geometry).filter((g) => g.height === HEIGHT);
  return panels[0] ?? null;
}

/** The ids of the screen's mapped windows (an open menu is one more). */
function visibleWindows() {
  try {
    return xdotool("search", "--onlyvisible", "--name", "").split("\n").filter(Boolean);
  } catch {
    return [];
  }
}

function geometry(id) {
  const out = xdotool("getwindowgeometry", "--shell", id);
  const value = (key) => Number(out.match(new RegExp(`^${key}=(\\d+)`, "m"))?.[1] ?? 0);
  return { x: value("X"), y: value("Y"), width: value("WIDTH"), height: value("HEIGHT") };
}

function screen() {
  const [width, height] = xdotool("getdisplaygeometry").trim().split(/\s+/).map(Number);
  return { width, height };
}

function xdotool(...args) {
  return execFileSync("xdotool", args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
}
