import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";

// The layering check (`npm run check:layers`, in `npm test`) run by the project's own rule file on
// small trees made to break it: the real tree passing proves nothing unless a bad one fails.

const RULES = path.resolve(".dependency-cruiser.cjs");
const DEPCRUISE = path.resolve("node_modules/dependency-cruiser/bin/dependency-cruiser.mjs");

/** A tree of `files` (path under the tree -> its source) checked with the project's rules. */
function check(files: Readonly<Record<string, string>>): { code: number | null; out: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-layers-"));
  try {
    for (const [file, source] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      writeFileSync(path.join(dir, file), source);
    }
    writeFileSync(path.join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions: { module: "nodenext", moduleResolution: "nodenext", strict: true } }));
    copyFileSync(RULES, path.join(dir, ".dependency-cruiser.cjs"));
    const r = spawnSync(process.execPath, [DEPCRUISE, "src", "--config", ".dependency-cruiser.cjs", "--output-type", "err"], { cwd: dir, encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
    return { code: r.status, out: r.stdout + r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const EXPORT = "export const x = 1;\n";
const importing = (spec: string): string => `import { x } from "${spec}";\nexport const y = x;\n`;

test("an import down a rank passes the layering check", () => {
  const r = check({ "src/boot/start.ts": importing("../config/errors.js"), "src/config/errors.ts": EXPORT, "src/cli/main.ts": importing("../boot/start.js") });
  assert.equal(r.code, 0, r.out);
});

test("an import between boot/ and gateway/ fails the check, naming the rule it breaks", () => {
  const up = check({ "src/boot/start.ts": importing("../gateway/server.js"), "src/gateway/server.ts": EXPORT });
  assert.notEqual(up.code, 0);
  assert.match(up.out, /error boot-imports-only-lower-ranks: src\/boot\/start\.ts → src\/gateway\/server\.ts/);
  // The gateway is above boot/, yet may not import it: it reaches config, contract and store only.
  const narrow = check({ "src/gateway/server.ts": importing("../boot/start.js"), "src/boot/start.ts": EXPORT });
  assert.notEqual(narrow.code, 0);
  assert.match(narrow.out, /error gateway-imports-only-config-contract-store: src\/gateway\/server\.ts → src\/boot\/start\.ts/);
});

test("folders of one rank may not import each other, nor modules import each other in a circle", () => {
  const sideways = check({ "src/lanes/lane.ts": importing("../supervise/supervise.js"), "src/supervise/supervise.ts": EXPORT });
  assert.match(sideways.out, /error lanes-imports-only-lower-ranks: src\/lanes\/lane\.ts → src\/supervise\/supervise\.ts/);
  const circle = check({ "src/boot/a.ts": importing("./b.js"), "src/boot/b.ts": importing("./a.js") });
  assert.notEqual(circle.code, 0);
  assert.match(circle.out, /error no-circular: src\/boot\/a\.ts →/);
});

test("a folder without a rank is refused until the map names it, and so is a module loose in src/", () => {
  const r = check({ "src/misc/thing.ts": importing("../config/errors.js"), "src/config/errors.ts": EXPORT });
  assert.notEqual(r.code, 0);
  assert.match(r.out, /error every-folder-has-a-rank: src\/misc\/thing\.ts/);
  // A loose module would carry any import past the ranks: config/ reaching gateway/ through it.
  const loose = check({ "src/config/kinds.ts": importing("../shim.js"), "src/shim.ts": `export * from "./gateway/paths.js";\n`, "src/gateway/paths.ts": EXPORT });
  assert.notEqual(loose.code, 0);
  assert.match(loose.out, /error every-folder-has-a-rank: src\/shim\.ts → src\/gateway\/paths\.ts/);
});
