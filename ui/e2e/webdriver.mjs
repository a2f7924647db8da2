// A small W3C WebDriver client for driving the real app through WebKitWebDriver (Linux).
// No browser download and no dependencies: Node's fetch and child_process only.
//
// WebKitWebDriver launches the app binary itself (with TAURI_WEBVIEW_AUTOMATION=true in its
// environment, wry enables WebKit's automation); the app inherits the driver's environment,
// which is how a test hands it POSTERN_HOME.

import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";

const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

/** Starts WebKitWebDriver on a free port with `env` added to its environment. */
export async function startDriver({ env = {}, driver = "WebKitWebDriver", log } = {}) {
  const port = await freePort();
  const child = spawn(driver, [`--port=${port}`], {
    env: { ...process.env, TAURI_WEBVIEW_AUTOMATION: "true", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output = [];
  for (const stream of [child.stdout, child.stderr]) {
    stream.on("data", (chunk) => {
      output.push(String(chunk));
      log?.(String(chunk));
    });
  }
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const url = `http://127.0.0.1:${port}`;
  await until(async () => {
    if (child.exitCode !== null) throw new Error(`${driver} exited: ${output.join("")}`);
    try {
      return (await fetch(`${url}/status`)).ok;
    } catch {
      return false;
    }
  }, 10_000, `${driver} to listen on ${port}`);
  return {
    url,
    output: () => output.join(""),
    /**
     * Stops the driver and the apps it launched. Deleting a session closes the app's window,
     * and Postern lives on in the tray without one, so the app is terminated here; otherwise
     * it would outlive the test holding the driver's output pipes.
     */
    async stop() {
      const apps = childrenOf(child.pid);
      for (const pid of apps) signal(pid, "SIGTERM");
      await until(() => apps.every((pid) => !alive(pid)), 5000, "the app to exit").catch(() => {
        for (const pid of apps) signal(pid, "SIGKILL");
      });
      if (child.exitCode === null) child.kill("SIGTERM");
      await Promise.race([exited, sleep(3000)]);
      if (child.exitCode === null) child.kill("SIGKILL");
    },
  };
}

/** The live processes (zombies left out), as [pid, { comm, ppid }] (Linux: from /proc). */
export function processes() {
  const found = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // /proc/PID/stat: "pid (comm) state ppid ..."; comm may contain spaces, so split after ")".
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
      const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (state !== "Z") found.push([Number(entry), { comm, ppid: Number(ppid) }]);
    } catch {
      // The process ended while we looked.
    }
  }
  return found;
}

/** The direct children of `pid` that still run. */
function childrenOf(pid) {
  return processes()
    .filter(([, p]) => p.ppid === pid)
    .map(([child]) => child);
}

/** Whether `pid` still runs (a zombie waiting for its parent to reap it does not). */
function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

function signal(pid, name) {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/** A WebDriver session on the app at `binary` (an absolute path). */
export class Session {
  static async create(driverUrl, binary, args = []) {
    const body = {
      capabilities: { alwaysMatch: { "webkitgtk:browserOptions": { binary, args } } },
    };
    const value = await call("POST", `${driverUrl}/session`, body);
    return new Session(`${driverUrl}/session/${value.sessionId}`);
  }

  constructor(base) {
    this.base = base;
  }

  /** Elements matching `css`, as WebDriver element ids. */
  async findAll(css) {
    const found = await call("POST", `${this.base}/elements`, { using: "css selector", value: css });
    return found.map((el) => el[ELEMENT]);
  }

  /** The rendered text of each element matching `css`. */
  async texts(css) {
    return fresh(async () => {
      const ids = await this.findAll(css);
      return Promise.all(ids.map((id) => call("GET", `${this.base}/element/${id}/text`)));
    });
  }

  /** The attribute `name` of each element matching `css` (null where it is absent). */
  async attributes(css, name) {
    return fresh(async () => {
      const ids = await this.findAll(css);
      return Promise.all(ids.map((id) => call("GET", `${this.base}/element/${id}/attribute/${name}`)));
    });
  }

  /** Clicks the first element matching `css`. */
  async click(css) {
    // The window redraws as the engine's state changes: an element found just before a redraw
    // is gone by the click. Find it again then (a few times), as a person would aim again.
    for (let attempt = 1; ; attempt++) {
      const [id] = await this.findAll(css);
      if (id === undefined) throw new Error(`nothing to click: no element matches ${css}`);
      try {
        await call("POST", `${this.base}/element/${id}/click`, {});
        return;
      } catch (err) {
        if (attempt >= 5 || !String(err.message).includes("stale element reference")) throw err;
        await sleep(50);
      }
    }
  }

  /** Runs `script` in the page and returns its result. */
  async execute(script, args = []) {
    return call("POST", `${this.base}/execute/sync`, { script, args });
  }

  /**
   * Polls `texts(css)` until `accept` returns true; returns the last texts. The window
   * re-renders when the status changes, so an element can go stale between finding it and
   * reading it: that read is retried.
   */
  async waitForTexts(css, accept, timeoutMs = 15_000) {
    let last = [];
    const check = async () => {
      try {
        return accept((last = await this.texts(css)));
      } catch (err) {
        if (String(err.message).includes("stale element")) return false;
        throw err;
      }
    };
    try {
      await until(check, timeoutMs, css);
    } catch (err) {
      throw new Error(`${err.message}; last seen ${JSON.stringify(last)}`);
    }
    return last;
  }

  /** Types `keys` into the first element matching `css` (WebDriver key codes: "\uE007" is Enter). */
  async sendKeys(css, keys) {
    const [id] = await this.findAll(css);
    if (id === undefined) throw new Error(`nothing to type into: no element matches ${css}`);
    await call("POST", `${this.base}/element/${id}/value`, { text: keys });
  }

  /** The handles of the app's windows (one webview each). */
  async windowHandles() {
    return call("GET", `${this.base}/window/handles`);
  }

  /** The handle of the window commands go to. */
  async windowHandle() {
    return call("GET", `${this.base}/window`);
  }

  /** Sends the next commands to the window with `handle`. */
  async switchToWindow(handle) {
    await call("POST", `${this.base}/window`, { handle });
  }

  /**
   * Waits for the app's window labelled `label` (tauri.conf.json, src-tauri/src/window.rs) and
   * switches to it; returns its handle.
   */
  async waitForWindow(label, timeoutMs = 15_000) {
    let found;
    await until(async () => {
      for (const handle of await this.windowHandles()) {
        await this.switchToWindow(handle);
        const shown = await this.execute("return window.__TAURI_INTERNALS__?.metadata?.currentWindow?.label ?? null").catch(() => null);
        if (shown === label) {
          found = handle;
          return true;
        }
      }
      return false;
    }, timeoutMs, `the ${label} window`);
    return found;
  }

  /** Polls `attributes(css, name)` until `accept` returns true; returns the last values. */
  async waitForAttributes(css, name, accept, timeoutMs = 15_000) {
    let last = [];
    try {
      await until(async () => {
        try {
          return accept((last = await this.attributes(css, name)));
        } catch (err) {
          if (String(err.message).includes("stale element")) return false;
          throw err;
        }
      }, timeoutMs, `${css} [${name}]`);
    } catch (err) {
      throw new Error(`${err.message}; last seen ${JSON.stringify(last)}`);
    }
    return last;
  }

  async setWindowRect(width, height) {
    return call("POST", `${this.base}/window/rect`, { width, height });
  }

  /** A PNG of the window's web content, once the latest DOM change has been painted. */
  async screenshot() {
    await this.execute("return new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))");
    await sleep(300);
    return Buffer.from(await call("GET", `${this.base}/screenshot`), "base64");
  }

  async delete() {
    await call("DELETE", this.base).catch(() => {});
  }
}

async function call(method, url, body) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) {
    const { error, message } = json.value ?? {};
    throw new Error(`${method} ${url}: ${response.status} ${error ?? ""} ${message ?? ""}`.trim());
  }
  return json.value;
}

/** Polls `check` until it returns true or `timeoutMs` passes. */
/**
 * Runs `read` (find elements, then read each) again when the window re-rendered between the
 * two and an element went stale, a few times; any other error is the caller's.
 */
async function fresh(read) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (err) {
      if (attempt >= 5 || !String(err.message).includes("stale element")) throw err;
      await sleep(50);
    }
  }
}

export async function until(check, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
