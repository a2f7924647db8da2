// The approval card as the engine serializes it: `postern_domain::decision::ApprovalCard`
// (crates/domain/src/decision/card.rs), which has no TypeScript derive, so this twin is written
// by hand. It is kept honest by a committed sample: crates/desk/src/sample.rs builds a real card
// through the domain's API and fails its test when `src/fixtures/approval-card.json` drifts from
// it (regenerate with `cargo run -p postern-desk --bin gen-bindings`), and src/approval.test.ts
// checks that the sample reads as this type and renders.

/** Any JSON value (arguments, annotations). */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** What a reviewer sees. */
export type ApprovalCard = {
  /** The request's id (a ULID): what `postern approve <id>` names. */
  id: string;
  /** When it was asked (unix ms). */
  askedAt: number;
  /** When it times out (unix ms). */
  expiresAt: number;
  /** What the reviewer decides. */
  what: AskFor;
  /** The every-use settings that require this decision (empty: none). */
  everyUse: SettingTarget[];
  /** The agent by the name people know it by: its client's own name and version, else its
   * program's file name. */
  agentName: string;
  /** The client's own name and version from its `initialize` (self-reported). */
  client: string | null;
  /** The agent process asking: the verified evidence behind the name. */
  agent: AgentIdentity;
  /** The server's label. */
  server: string;
  /** The code that would run the call, and how it differs from the last approved code. */
  epoch: EpochView;
  /** The catalog now, and how it differs from the last approved revision. */
  catalog: CatalogSince;
  /** The tool. */
  tool: ToolView;
  /** The arguments, JSON-Schema defaults filled in and marked. */
  arguments: Argument[];
  /** The tool's annotations, labelled as the server's unverified claims. */
  annotations: UntrustedHints | null;
  /** The credential scopes the call would use (names, sorted). */
  credentials: string[];
  /** Those the running launch was not given: approving releases them, and the server restarts. */
  withheldCredentials?: string[];
  /** The grant ends the reviewer may choose (empty: the card asks about the agent run only). */
  choices: GrantChoice[];
  /** The short name of each of `choices`, in order (the domain's `GrantChoice::label`). */
  choiceLabels: string[];
  /** The agent stopped waiting (its client's timeout): the answer decides its identical retry. */
  agentStoppedWaiting: boolean;
  /** What to weigh before allowing, most severe first (empty: a calm card). */
  risks: RiskLine[];
};

/** One line of the risk strip (crates/domain/src/decision/risk.rs): the sentence, its weight,
 * and what it is about. */
export type RiskLine = { severity: "danger" | "caution"; text: string } & (
  | { kind: "codeChanged"; files: string[]; facts: string[] }
  | { kind: "escalation"; tools: string[] }
  | { kind: "clientMismatch"; client: string; program: string }
  | { kind: "toolChanged"; tool: string; defaults: [string, Json][] }
  | { kind: "releasesCredentials"; names: string[] }
  | { kind: "usesCredentials"; names: string[] }
  | { kind: "everyUse"; targets: SettingTarget[] }
  | { kind: "catalogChanged"; changes: string[]; count: number }
  | { kind: "contextChanged"; facts: string[] }
  | { kind: "unconfined" }
);

/** Admit the agent run, allow the call, or both on one card. */
export type AskFor = "session" | "call" | "sessionAndCall";

/** Where an every-use setting is set. */
export type SettingTarget =
  | { on: "tool"; server: string; tool: string }
  | { on: "server"; server: string }
  | { on: "credential"; name: string };

/** The agent process behind a session, as the process table describes it. */
export type AgentIdentity = {
  pid: number;
  /**
   * With the pid, the run's key (clock ticks since boot on Linux, microseconds since the
   * epoch on macOS).
   */
  startTime: number;
  /** Its executable and that file's digest, when readable. */
  executable: { path: string; digest: string } | null;
  /** Process names from the agent's parent down to the shim: `zsh`, `claude`, `postern`. */
  chain: string[];
  /** Its working directory, for display only. */
  cwd: string | null;
};

/** The epoch a call would run under. */
export type EpochView = {
  epoch: string;
  /** The identity digest of its execution record. */
  identity: string;
  launchCommand: string[];
  /** When it was launched (unix ms). */
  startedAtMs: number;
  /** Which launch of its server this is, counted from 1 ("launch 7"; null: not known). */
  launch: number | null;
  pinning: { state: "pinned" } | { state: "partly"; covered: string; uncovered: string } | { state: "unpinned"; reason: string };
  /** The OS sandbox it runs in; null: unconfined. */
  sandbox: { tool: string; hidden: string[]; writable: string[]; network: string } | null;
  since: IdentitySince;
};

/** How an epoch's identity differs from the last approved epoch of the same server. */
export type IdentitySince =
  | { kind: "firstApproval" }
  | { kind: "sameEpoch" }
  | { kind: "unchanged"; approvedEpoch: string }
  | {
      kind: "changed";
      approvedEpoch: string;
      /** Artifacts whose digest changed, or that only one launch has. */
      changedArtifacts: string[];
      /** `launchCommand`, `runtime`, `workingDirectory`, `envNames`, `loaderEnv`, `sandbox`. */
      changedFacts: string[];
    };

/** The catalog against the last approved revision. */
export type CatalogSince =
  | { kind: "firstApproval"; revision: string }
  | { kind: "unchanged"; revision: string }
  | { kind: "changed"; diff: CatalogDiff };

/** What changed between two catalog revisions (crates/domain/src/catalog/diff.rs). The app
 * shows it as lines (`Approval.catalogChanges`); the structure is kept for what it is. */
export type CatalogDiff = {
  from: string;
  to: string;
  added: string[];
  removed: string[];
  renamed: { from: string; to: string }[];
  changed: { name: string; from: string; to: string; changes: ({ kind: string } & Record<string, Json>)[] }[];
  instructions: { old: string | null; new: string | null } | null;
  capabilities: ({ pointer: string } & Record<string, Json>)[];
};

/** The tool as the current catalog describes it. */
export type ToolView = { name: string; title: string | null; description: string | null };

/** One argument as the server will see it. */
export type Argument = {
  /** Where (an RFC 6901 pointer into the arguments). */
  pointer: string;
  value: Json;
  /** Sent by the agent, or a default from the tool's input schema. */
  source: "sent" | "default";
};

/** Annotations, labelled for what they are. */
export type UntrustedHints = { note: string; hints: { [key: string]: Json } };

/** How long an approved call's grant lasts. */
export type GrantChoice = { end: "thisCall" } | { end: "forMinutes"; minutes: number } | { end: "untilRunEnds" };

/** A human's reply to a card (`postern_domain::decision::Reply`). */
export type Reply = { reply: "approve"; choice: GrantChoice | null } | { reply: "deny" };
