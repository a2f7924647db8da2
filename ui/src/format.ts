// Formatting for people: command lines, times, the agent configuration snippet.

/** `argv` as a POSIX shell would need it typed: words with spaces or quotes get quoted. */
export function commandLine(argv: readonly string[]): string {
  return argv.map(shellWord).join(" ");
}

function shellWord(word: string): string {
  if (word === "") return "''";
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replaceAll("'", `'\\''`)}'`;
}

/**
 * The words of a command line typed as a shell would read it: split at unquoted whitespace,
 * 'single' and "double" quotes and backslashes honoured (no expansion). Why not, when a quote
 * is left open.
 */
export function splitWords(text: string): string[] | string {
  const words: string[] = [];
  let word = "";
  let started = false;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote === "'") {
      if (c === "'") quote = null;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = null;
      else if (c === "\\" && i + 1 < text.length && '"\\$`'.includes(text[i + 1]!)) word += text[++i];
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      started = true;
    } else if (c === "\\" && i + 1 < text.length) {
      word += text[++i];
      started = true;
    } else if (/\s/.test(c)) {
      if (started) words.push(word);
      word = "";
      started = false;
    } else {
      word += c;
      started = true;
    }
  }
  if (quote !== null) return `A ${quote === "'" ? "single" : "double"} quote is not closed.`;
  if (started) words.push(word);
  return words;
}

/** "just now", "5 min ago", "2 h 5 min ago", "3 d ago". */
export function ago(thenMs: number, nowMs: number): string {
  const minutes = Math.floor(Math.max(0, nowMs - thenMs) / 60_000);
  if (minutes < 1) return "just now";
  if (minutes < 60) return `${minutes} min ago`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 === 0 ? `${hours} h ago` : `${hours} h ${minutes % 60} min ago`;
  return `${Math.floor(hours / 24)} d ago`;
}

/** Local wall-clock time, "14:03"; with the date when it is not today. */
export function clock(thenMs: number, nowMs: number): string {
  const then = new Date(thenMs);
  const time = `${pad(then.getHours())}:${pad(then.getMinutes())}`;
  if (then.toDateString() === new Date(nowMs).toDateString()) return time;
  return `${then.getFullYear()}-${pad(then.getMonth() + 1)}-${pad(then.getDate())} ${time}`;
}

function pad(n: number): string {
  return String(n).padStart(2, "0");
}

/** How an agent's MCP configuration points at a server through Postern. */
export function agentSnippet(label: string): string {
  const l = JSON.stringify(label);
  return `{"mcpServers": {${l}: {"command": "postern", "args": ["mcp", ${l}]}}}`;
}

/** The command that adds a server. */
export function addCommand(label: string, command: string): string {
  return `postern server add ${label} -- ${command}`;
}

/** "1 server", "2 servers". */
export function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

/** A `sha256:<hex>` digest as its first 12 hex digits, as `postern` prints it short. */
export function shortDigest(digest: string): string {
  return digest.replace(/^sha256:/, "").slice(0, 12);
}

/**
 * An execution epoch (a ULID) shortened to its head and tail, "01M8KY…QZZX": the head is its
 * launch time (epochs of one server share it for hours), the tail is random and tells them apart.
 */
export function shortEpoch(epoch: string): string {
  return epoch.length <= 12 ? epoch : `${epoch.slice(0, 6)}…${epoch.slice(-4)}`;
}

/** Local wall-clock time with seconds, "14:03:27" (for deadlines a few seconds away). */
export function clockSeconds(thenMs: number): string {
  const then = new Date(thenMs);
  return `${pad(then.getHours())}:${pad(then.getMinutes())}:${pad(then.getSeconds())}`;
}

/**
 * A launch as people say it, "launch 7": its number among its server's launches. The epoch
 * short ("launch 01M8KY…QZZX") when the engine could not number it (the audit log is not
 * being written).
 */
export function launchName(launch: number | null | undefined, epoch: string): string {
  return launch === null || launch === undefined ? `launch ${shortEpoch(epoch)}` : `launch ${launch}`;
}

/** "launch 7 · started 21:09". */
export function launchLine(launch: number | null | undefined, epoch: string, startedMs: number, nowMs: number): string {
  return `${launchName(launch, epoch)} · started ${clock(startedMs, nowMs)}`;
}
