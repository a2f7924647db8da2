// A small W3C WebDriver client for driving the real app through WebKitWebDriver (Linux).
// No browser download and no dependencies: Node's fetch and child_process only.
//
// The app is launched here, with WebKit's inspector server on a port of its own and
// TAURI_WEBVIEW_AUTOMATION=true (wry then allows WebKit's automation), and WebKitWebDriver
// attaches to its window process (`--target`); see startDriver.

import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";

const ELEMENT = "element-6066-11e4-a52e-4f735466cecf";

/**
 * Runs the app (its window processes and its resident process) for a test, with `env` added to
 * its environment, and drives its windows through WebKitWebDriver.
 *
 * The app's windows live in a window process that ends with its last window; the resident
 * process starts a new one for the next window. So the driver is not the one to launch the app
 * (it would lose it with its first window): the app is launched here with WebKit's inspector
 * server on a port of its own (`WEBKIT_INSPECTOR_SERVER`, inherited by the resident and so by
 * every window process after the first) and automation allowed (`TAURI_WEBVIEW_AUTOMATION`),
 * and a WebKitWebDriver attaches to whichever window process runs (`--target`); a session
 * whose process ended attaches again ([`Session`]). The port also marks the test's processes:
 * `stop` ends every process whose environment holds it.
 */
export async function startDriver({ env = {}, driver = "WebKitWebDriver", log } = {}) {
  const port = await freePort();
  const marker = `WEBKIT_INSPECTOR_SERVER=127.0.0.1:${port}`;
  const appEnv = { ...process.env, TAURI_WEBVIEW_AUTOMATION: "true", WEBKIT_INSPECTOR_SERVER: `127.0.0.1:${port}`, ...env };
  const output = [];
  const collect = (stream) =>
    stream.on("data", (chunk) => {
      output.push(String(chunk));
      log?.(String(chunk));
    });
  let current;
  const stopDriver = async () => {
    const child = current?.child;
    current = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once("exit", resolve));
    child.kill("SIGTERM");
    await Promise.race([exited, sleep(2000)]);
    if (child.exitCode === null) child.kill("SIGKILL");
  };
  /** The test's app processes that still run (window processes and the resident). */
  const appProcesses = () => processes().filter(([pid]) => environ(pid).includes(marker));
  /** The window process drawing a window (one with WebKit's processes under it; not one on standby). */
  const drawing = () => {
    const all = processes();
    return appProcesses().find(([pid, p]) => p.comm === "postern-app" && all.some(([, c]) => c.ppid === pid && c.comm.startsWith("WebKit")));
  };
  return {
    port,
    output: () => output.join(""),
    appProcesses,
    /** Starts the app's first window process (it starts the resident). */
    launch(binary, args = []) {
      const child = spawn(binary, args, { env: appEnv, stdio: ["ignore", "pipe", "pipe"] });
      collect(child.stdout);
      collect(child.stderr);
      return child;
    },
    /**
     * A new WebDriver session on the window process now drawing a window (a driver of its
     * own): the session's URL, and the process's pid. Fails when none does within `timeoutMs`.
     */
    async connect(timeoutMs = 15_000) {
      await stopDriver();
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const [windowProcess] = drawing() ?? [];
        if (windowProcess !== undefined) {
          const driverPort = await freePort();
          const child = spawn(driver, [`--port=${driverPort}`, `--target=127.0.0.1:${port}`], { stdio: ["ignore", "pipe", "pipe"] });
          collect(child.stdout);
          collect(child.stderr);
          current = { child };
          const url = `http://127.0.0.1:${driverPort}`;
          try {
            await until(async () => {
              if (child.exitCode !== null) throw new Error(`${driver} exited`);
              return fetch(`${url}/status`).then((r) => r.ok, () => false);
            }, 5000, `${driver} to listen`);
            const body = { capabilities: { alwaysMatch: {} } };
            const value = await call("POST", `${url}/session`, body, 10_000);
            return { url: `${url}/session/${value.sessionId}`, pid: windowProcess };
          } catch (err) {
            await stopDriver();
            if (Date.now() > deadline) throw new Error(`no WebDriver session on the app's window process: ${err.message}`);
          }
        } else if (Date.now() > deadline) {
          throw new NoWindowProcess();
        }
        await sleep(200);
      }
    },
    /** Ends the driver and every process of the test's app. */
    async stop() {
      await stopDriver();
      const apps = appProcesses().map(([pid]) => pid);
      for (const pid of apps) signal(pid, "SIGTERM");
      await until(() => apps.every((pid) => !alive(pid)), 8000, "the app to exit").catch(() => {
        for (const pid of apps) signal(pid, "SIGKILL");
      });
    },
  };
}

/** No window process of the app runs (all its windows are closed). */
export class NoWindowProcess extends Error {
  constructor() {
    super("no window of the app is open (no window process runs)");
  }
}

/** The environment of `pid` as one string ("" when it cannot be read). */
function environ(pid) {
  try {
    return readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").join("\n");
  } catch {
    return "";
  }
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

/** Whether `pid` still runs (a zombie waiting for its parent to reap it does not). */
export function alive(pid) {
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

/**
 * A WebDriver session on the app at `binary` (an absolute path), launched by `driver`
 * ([`startDriver`]). Its commands go to the window process that runs now: when that process
 * ended and the resident started another, the session attaches to the new one first.
 */
export class Session {
  static async create(driver, binary, args = []) {
    driver.launch(binary, args);
    const session = new Session(driver);
    await session.attach(20_000);
    return session;
  }

  constructor(driver) {
    this.driver = driver;
    this.base = undefined;
  }

  /** One WebDriver command (`path` under the session), attaching again once if the window process changed. */
  async request(method, path, body) {
    if (this.base === undefined) await this.attach(2000);
    try {
      return await call(method, `${this.base}${path}`, body);
    } catch (err) {
      // A window process going away mid-command may also answer "500 unknown error"; while
      // it lives, that is the command's own error (a window closing under it, say).
      const ended = String(err?.message).includes("500 unknown error") && !alive(this.pid);
      if (!gone(err) && !ended) throw err;
      this.base = undefined;
      await this.attach(2000);
      return call(method, `${this.base}${path}`, body);
    }
  }

  /** Attaches to the window process that runs now (see startDriver's `connect`). */
  async attach(timeoutMs) {
    const { url, pid } = await this.driver.connect(timeoutMs);
    this.base = url;
    this.pid = pid;
  }

  /** Elements matching `css`, as WebDriver element ids. */
  async findAll(css) {
    const found = await this.request("POST", "/elements", { using: "css selector", value: css });
    return found.map((el) => el[ELEMENT]);
  }

  /** The rendered text of each element matching `css`. */
  async texts(css) {
    return fresh(async () => {
      const ids = await this.findAll(css);
      return Promise.all(ids.map((id) => this.request("GET", `/element/${id}/text`)));
    });
  }

  /** The attribute `name` of each element matching `css` (null where it is absent). */
  async attributes(css, name) {
    return fresh(async () => {
      const ids = await this.findAll(css);
      return Promise.all(ids.map((id) => this.request("GET", `/element/${id}/attribute/${name}`)));
    });
  }

  /** Clicks the first element matching `css`. */
  async click(css) {
    // The window redraws as the engine's state changes: an element found just before a redraw
    // is gone by the click. Find it again then (a few times), as a person would aim again.
    await fresh(async () => {
      const [id] = await this.findAll(css);
      if (id === undefined) throw new Error(`nothing to click: no element matches ${css}`);
      await this.request("POST", `/element/${id}/click`, {});
    });
  }

  /** Runs `script` in the page and returns its result. */
  async execute(script, args = []) {
    return this.request("POST", "/execute/sync", { script, args });
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
    // Found again when the window redrew between finding it and typing (as `click`): the keys
    // did not reach an element that was gone.
    await fresh(async () => {
      const [id] = await this.findAll(css);
      if (id === undefined) throw new Error(`nothing to type into: no element matches ${css}`);
      await this.request("POST", `/element/${id}/value`, { text: keys });
    });
  }

  /** The handles of the app's windows (one webview each). */
  async windowHandles(again = true) {
    try {
      return await this.request("GET", "/window/handles");
    } catch (err) {
      if (err instanceof NoWindowProcess || gone(err)) return [];
      // Asked as the window process ends: asked again once it has (or the moment passed).
      if (again && String(err?.message).includes("500 unknown error")) {
        await sleep(300);
        return this.windowHandles(false);
      }
      throw err;
    }
  }

  /** The handle of the window commands go to. */
  async windowHandle() {
    return this.request("GET", "/window");
  }

  /** Sends the next commands to the window with `handle`. */
  async switchToWindow(handle) {
    await this.request("POST", "/window", { handle });
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
    return this.request("POST", "/window/rect", { width, height });
  }

  /** A PNG of the window's web content, once the latest DOM change has been painted. */
  async screenshot() {
    await this.execute("return new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))");
    await sleep(300);
    return Buffer.from(await this.request("GET", "/screenshot"), "base64");
  }

  async delete() {
    if (this.base !== undefined) await call("DELETE", this.base, undefined, 3000).catch(() => {});
  }
}

/** Whether `err` says the session's window process (and so its driver) is gone. */
function gone(err) {
  const message = String(err?.message);
  return message.includes("invalid session id") || message.includes("fetch failed") || message.includes("aborted due to timeout");
}

async function call(method, url, body, timeoutMs = 60_000) {
  const response = await fetch(url, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const json = await response.json().catch(() => ({}));
  if (!response.ok) {
    const { error, message } = json.value ?? {};
    throw new Error(`${method} ${url}: ${response.status} ${error ?? ""} ${message ?? ""}`.trim());
  }
  return json.value;
}

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

/** Polls `check` until it returns true or `timeoutMs` passes. */
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
