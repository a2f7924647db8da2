// The journals in words, shared by the Activity feed, the timeline and the audit record panel:
// who called (the agent by its own name), which session (one number everywhere: the journal
// id, what `--session` filters by), on what authority a call went ("your grant · 15 min",
// "observe mode"), why one was refused, and one sentence for an audit record. Pure.

import type { ActivityRow, AgentName, AuditEntry, CallAsked, CallGrant } from "./bindings";
import { launchName } from "./format";

/** A session as the app names it everywhere: "session 27" (its journal id). */
export function sessionName(id: number): string {
  return `session ${id}`;
}

/** The agent by its own name and version ("claude-code 2.1.3"), else the end of its process chain, else "an unnamed agent". */
export function agentWords(agent: AgentName): string {
  if (agent.client !== null && agent.client !== "") return agent.client;
  if (agent.process !== null && agent.process !== "") return processTail(agent.process);
  return "an unnamed agent";
}

/** The last directory of a working directory ("/home/u/app" → "app"), for a short label. */
export function dirWords(cwd: string | null): string | null {
  if (cwd === null || cwd === "") return null;
  const parts = cwd.split("/").filter((p) => p !== "");
  return parts.length === 0 ? "/" : parts[parts.length - 1]!;
}

/** How long a grant was given for, in words: "this call", "15 min", "1 h", "until the run ends". */
export function lifetimeWords(grant: CallGrant): string {
  const end = grant.end as { kind?: string; unixMs?: number } | null;
  switch (end?.kind) {
    case "thisCallOnly":
      return "this call";
    case "untilRunEnds":
      return "until the run ends";
    case "until":
      return typeof end.unixMs === "number" && grant.issued !== null ? span(end.unixMs - grant.issued) : "for a time";
    default:
      return "a grant the journal has no record of";
  }
}

/**
 * On what authority a call went, or why it was refused, in words: "your grant · 15 min",
 * "observe mode", "you denied it", "its grant was for an older launch".
 */
export function allowedHow(row: Pick<ActivityRow, "decision" | "authority" | "grant" | "outcome"> & { asked?: CallAsked | null }): string {
  if (row.outcome === "refused") {
    const where = answeredWhere(row.asked?.by);
    return row.decision === "approval_denied" && where !== null ? `you denied it ${where}` : refusalWords(row.decision);
  }
  if (row.decision === "no_intent") return "no decision on record (a result without its intent)";
  if (row.decision === "observed" || row.authority === "observed") return "observe mode (nobody asked)";
  if (row.authority === "admitted") return "the run you admitted";
  if (row.grant !== null) return `your grant · ${lifetimeWords(row.grant)}`;
  return "allowed (how was not journaled: rebuild the journals to see)";
}

/**
 * Who decided, when a person was asked, and where: "you approved in the approval window after
 * 12 s", "you denied on a terminal after 3 s", "nobody answered (2 min)"; an answer recorded
 * before the log kept where is just "you approved after 12 s".
 */
export function askedWords(asked: CallAsked | null): string | null {
  if (asked === null) return null;
  const waited = asked.answered === null ? null : span(asked.answered - asked.requested);
  const where = answeredWhere(asked.by);
  const you = (verb: string): string => `you ${verb}${where === null ? "" : ` ${where}`} after ${waited}`;
  switch (asked.answer) {
    case "granted":
      return you("approved");
    case "denied":
      return you("denied");
    case "expired":
      return `nobody answered (${waited})`;
    default:
      return "asked you; no answer on record";
  }
}

/** Where a person answered an approval request ("in the approval window", "from the tray", "on a terminal"); `null`: not on record. */
export function answeredWhere(by: string | null | undefined): string | null {
  if (by === null || by === undefined) return null;
  return CHANNELS[by] ?? `by ${by}`;
}

const CHANNELS: Record<string, string> = {
  window: "in the approval window",
  tray: "from the tray",
  terminal: "on a terminal",
};

/** A refusal code in words (unknown codes as themselves). */
export function refusalWords(code: string): string {
  return REFUSALS[code] ?? code;
}

const REFUSALS: Record<string, string> = {
  approval_denied: "you denied it",
  approval_timeout: "nobody answered in time",
  approval_expired: "the request lapsed before an answer",
  approval_queue_full: "too many requests waiting for you",
  authorization_stale: "its grant was for an older launch",
  catalog_stale: "the tool changed since the agent listed it",
  unknown_tool: "the server has no such tool",
  vault_locked: "Postern was locked",
  audit_quarantined: "the audit log failed verification",
  audit_unavailable: "the audit log could not record it",
  session_unidentifiable: "the agent could not be identified",
  session_not_admitted: "the run was not admitted yet",
  every_use_tools_only: "per-call approval covers tool calls only",
  credential_unavailable: "its credential could not be read",
};

/** "850 ms", "1.2 s", "45 s", "15 min", "1 h", "2 h 30 min". */
export function span(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms`;
  if (ms < 10_000) return `${(Math.round(ms / 100) / 10).toFixed(1)} s`;
  if (ms < 60_000) return `${Math.round(ms / 1000)} s`;
  const minutes = Math.round(ms / 60_000);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? `${hours} h` : `${hours} h ${minutes % 60} min`;
}

/**
 * One sentence above an audit record: who did what, under which code, allowed how, and how it
 * ended. "claude-code 2.1.3 called deploy on ci (launch 01JQ7R…R8SV), allowed by your grant ·
 * 15 min; it returned an error after 1.2 s."
 */
export function entrySentence(entry: AuditEntry): string | null {
  const who = entry.session === null ? null : agentWords(entry.session.agent);
  const call = entry.call;
  if (call !== null) {
    const launch = call.epoch === null ? "" : ` (${launchName(call.launch, call.epoch)})`;
    const head = `${agentWords(call.agent)} called ${call.tool} on ${call.server}${launch}`;
    if (call.outcome === "refused") {
      const waited = call.asked?.answered == null ? "" : ` (it waited ${span(call.asked.answered - call.asked.requested)} for you)`;
      return `${head}; refused: ${allowedHow(call)}${waited}.`;
    }
    const asked = askedWords(call.asked);
    const how = `allowed by ${allowedHow(call)}${asked === null ? "" : ` (${asked})`}`;
    return `${head}, ${how}; ${outcomeWords(call.outcome, call.durationMs)}.`;
  }
  const event = entry.body.state === "opened" ? (entry.body.event as Record<string, unknown>) : null;
  const server = entry.session?.server ?? (typeof event?.server === "string" ? event.server : null);
  const subject = who ?? "an agent";
  switch (entry.kind) {
    case "session_started":
      return `${subject} connected to ${server ?? "a server"}${entry.session === null ? "" : ` (${sessionName(entry.session.id)})`}.`;
    case "session_ended":
      return `${subject} disconnected from ${server ?? "a server"}.`;
    case "approval_requested":
      return `${subject} asked you to approve ${typeof event?.tool === "string" ? event.tool : "a call"} on ${server ?? "a server"}.`;
    case "approval_granted":
    case "approval_denied": {
      const where = answeredWhere(typeof event?.by === "string" ? event.by : null);
      return `You ${entry.kind === "approval_granted" ? "approved" : "denied"} a request of ${subject}${where === null ? "" : ` ${where}`}.`;
    }
    case "approval_expired":
      return `A request of ${subject} ended without your answer${typeof event?.reason === "string" ? `: ${event.reason}` : ""}.`;
    case "server_replaced":
      return `${server ?? "The server"} moved to a new launch for ${subject}${typeof event?.reason === "string" ? `: ${event.reason}` : ""}.`;
    case "server_started":
      return `${server ?? "A server"} was launched for ${subject}.`;
    case "grant_ended":
      return `A grant ended${typeof event?.reason === "string" ? `: ${event.reason}` : ""}.`;
    case "engine_started":
      return "Postern started.";
    case "engine_stopped":
      return "Postern stopped.";
    default:
      return null;
  }
}

function outcomeWords(outcome: string | null, ms: number | null): string {
  const after = ms === null ? "" : ` after ${span(ms)}`;
  switch (outcome) {
    case null:
      return "no result is on record (in flight, or Postern stopped)";
    case "ok":
      return `it returned${after}`;
    case "tool_error":
      return `the tool reported an error${after}`;
    case "error":
      return `it returned an error${after}`;
    case "epoch_transition":
      return `its launch ended before it answered${after}`;
    case "cancelled":
      return `the agent cancelled it${after}`;
    default:
      return `${outcome}${after}`;
  }
}

function processTail(process: string): string {
  // "bash -> claude -> postern (pid 4242)": the process before the shim says the most.
  const chain = process.replace(/\s*\(pid \d+\)$/, "").split(" -> ");
  const named = chain.length > 1 && chain[chain.length - 1] === "postern" ? chain[chain.length - 2]! : chain[chain.length - 1]!;
  const pid = /\(pid (\d+)\)$/.exec(process)?.[1];
  return pid === undefined ? named : `${named} (pid ${pid})`;
}
