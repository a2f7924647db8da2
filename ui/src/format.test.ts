import { describe, expect, it } from "vitest";

import { addCommand, agentSnippet, ago, clock, clockSeconds, commandLine, count, launchLine, launchName, shortDigest, shortEpoch, splitWords } from "./format";

describe("commandLine", () => {
  it("leaves plain words alone", () => {
    expect(commandLine(["npx", "-y", "@modelcontextprotocol/server-everything", "stdio"])).toBe(
      "npx -y @modelcontextprotocol/server-everything stdio",
    );
  });

  it("quotes words a shell would split or expand", () => {
    expect(commandLine(["sh", "-c", "echo $HOME", "it's", ""])).toBe(`sh -c 'echo $HOME' 'it'\\''s' ''`);
  });
});

describe("ago", () => {
  const now = Date.UTC(2026, 10, 29, 12, 0, 0);
  it.each([
    [now - 20_000, "just now"],
    [now + 5_000, "just now"],
    [now - 5 * 60_000, "5 min ago"],
    [now - 2 * 3_600_000, "2 h ago"],
    [now - (2 * 60 + 5) * 60_000, "2 h 5 min ago"],
    [now - 3 * 86_400_000, "3 d ago"],
  ])("%d", (then, text) => {
    expect(ago(then, now)).toBe(text);
  });
});

describe("clock", () => {
  it("shows the time today and the date otherwise", () => {
    const now = new Date(2026, 10, 29, 15, 30).getTime();
    expect(clock(new Date(2026, 10, 29, 9, 5).getTime(), now)).toBe("09:05");
    expect(clock(new Date(2026, 10, 28, 23, 59).getTime(), now)).toBe("2026-11-28 23:59");
  });
});

describe("snippets", () => {
  it("is valid agent configuration that runs `postern mcp <label>`", () => {
    expect(JSON.parse(agentSnippet("time"))).toEqual({
      mcpServers: { time: { command: "postern", args: ["mcp", "time"] } },
    });
    expect(JSON.parse(agentSnippet('we"ird'))).toEqual({
      mcpServers: { 'we"ird': { command: "postern", args: ["mcp", 'we"ird'] } },
    });
  });

  it("spells the add command as the CLI takes it", () => {
    expect(addCommand("time", "uvx mcp-server-time")).toBe("postern server add time -- uvx mcp-server-time");
  });

  it("counts", () => {
    expect([count(0, "server"), count(1, "server"), count(2, "server")]).toEqual(["0 servers", "1 server", "2 servers"]);
  });
});

describe("short identifiers", () => {
  it("shortens a digest to its first 12 hex digits, as `postern` does", () => {
    expect(shortDigest(`sha256:ba7816bf8f01${"c".repeat(52)}`)).toBe("ba7816bf8f01");
  });

  it("keeps an epoch's head (its time) and tail (random, tells epochs apart)", () => {
    expect(shortEpoch("01JQ7R4S4S0QJ7GZP1S2K8XWQD")).toBe("01JQ7R…XWQD");
    expect(shortEpoch("01JQ7R4S")).toBe("01JQ7R4S");
  });

  it("names a launch by its number, and by its epoch short when it has none", () => {
    const epoch = "01JQ7R4S4S0QJ7GZP1S2K8XWQD";
    expect(launchName(7, epoch)).toBe("launch 7");
    expect(launchName(null, epoch)).toBe("launch 01JQ7R…XWQD");
    const started = new Date(2026, 10, 29, 21, 9).getTime();
    expect(launchLine(7, epoch, started, started + 60_000)).toBe("launch 7 · started 21:09");
  });

  it("shows a deadline to the second", () => {
    expect(clockSeconds(new Date(2026, 10, 29, 9, 5, 7).getTime())).toBe("09:05:07");
  });
});

describe("splitWords", () => {
  it("splits a command line as a shell would, quotes and backslashes honoured", () => {
    expect(splitWords("  -y @scope/server  stdio ")).toEqual(["-y", "@scope/server", "stdio"]);
    expect(splitWords(`--title "My notes" --dir '/srv/my notes' a\\ b ""`)).toEqual(["--title", "My notes", "--dir", "/srv/my notes", "a b", ""]);
    expect(splitWords(`"say \\"hi\\"" 'it''s'`)).toEqual([`say "hi"`, "its"]);
    expect(splitWords("")).toEqual([]);
  });

  it("says when a quote is left open", () => {
    expect(splitWords(`"open`)).toBe("A double quote is not closed.");
    expect(splitWords(`'open`)).toBe("A single quote is not closed.");
  });

  it("round-trips what commandLine quotes", () => {
    const argv = ["sh", "-c", "echo $HOME", "it's", ""];
    expect(splitWords(commandLine(argv))).toEqual(argv);
  });
});
