// The rebuildable fixture server (tests/fixtures/rebuildable/README.md), copied into a
// directory of a test's own: revision `a` to start with, `build(revision)` lays another
// revision's files over it the way a build does (each file written aside, then renamed in).

import { copyFileSync, cpSync, existsSync, mkdirSync, readdirSync, renameSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const repo = fileURLToPath(new URL("../..", import.meta.url));
const REBUILDABLE = join(repo, "tests/fixtures/rebuildable");
/** The venv with the MCP SDK (scripts/setup-test-deps.sh). */
const VENV = join(repo, "tests/.deps/venv");

/** A copy of the server in `dir`: its `app` directory, its `effects` file, and `build`. */
export function rebuildable(dir) {
  if (!existsSync(join(VENV, "bin/python"))) {
    throw new Error(`the screenshots need the test venv with the MCP SDK (${VENV}): run scripts/setup-test-deps.sh`);
  }
  const app = join(dir, "app");
  const noCache = (src) => !src.includes("__pycache__");
  mkdirSync(app, { recursive: true });
  cpSync(join(REBUILDABLE, "lib"), join(app, "lib"), { recursive: true, filter: noCache });
  copyFileSync(join(REBUILDABLE, "requirements.txt"), join(app, "requirements.txt"));
  cpSync(join(REBUILDABLE, "revisions/a"), app, { recursive: true, filter: noCache });
  symlinkSync(VENV, join(app, ".venv"));
  let builds = 0;
  return {
    app,
    effects: join(dir, "effects.txt"),
    build(revision) {
      const from = join(REBUILDABLE, "revisions", revision);
      for (const file of readdirSync(from)) {
        const staged = join(dir, `.build-${builds++}`);
        copyFileSync(join(from, file), staged);
        renameSync(staged, join(app, file));
      }
    },
  };
}

