import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { CommanderError, type Command } from "commander";
import { buildProgram } from "../../src/cli/main.js";
import { parseGraceSeconds, parseSince } from "../../src/cli/duration.js";
import { CLUSTER_OPTION_DESCRIPTION } from "../../src/cli/options.js";
import { allCommands, asksForJson } from "../../src/cli/usage.js";
import { completionScript, completionTree } from "../../src/cli/completion.js";
import { SshDocker, logsSinceArg } from "../../src/remote/docker.js";
import { formatDiagnostic, formatDiagnosticWith } from "../../src/config/diagnostic.js";
import { colourFor, SEVERITY_STYLE } from "../../src/app/colour.js";
import { jsonAnswer } from "../../src/app/output.js";
import { cliArgs } from "../built-cli.js";

// A state folder of this file's own (a path "that does not exist" is created when the tests run as root).
const STATE = mkdtempSync(path.join(tmpdir(), "launcher-hand-state-"));
after(() => rmSync(STATE, { recursive: true, force: true }));
const run = (args: string[], env: NodeJS.ProcessEnv = {}) => {
  const r = spawnSync(process.execPath, [...cliArgs(), ...args], { encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", ...env } });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

/** Parses `args` in-process: what commander wrote on stderr, and the exit code it asked for. */
async function usage(args: string[]): Promise<{ err: string; code: number | undefined }> {
  let err = "";
  const program = buildProgram({ writeErr: (t) => (err += t), writeOut: () => undefined });
  // Stop before any action: only parsing is under test.
  for (const c of allCommands(program)) c.hook("preAction", () => {
    throw new CommanderError(0, "test.parsed", "parsed");
  });
  try {
    await program.parseAsync(args, { from: "user" });
    return { err, code: undefined };
  } catch (e) {
    assert.ok(e instanceof CommanderError, String(e));
    return { err, code: e.code === "test.parsed" ? 0 : e.exitCode };
  }
}

test("a usage error is one line with a did-you-mean and a hint, not the help page", async () => {
  const cmd = await usage(["plna"]);
  assert.equal(cmd.code, 1);
  assert.equal(cmd.err, "launcher: unknown command 'plna' (did you mean plan?)\n  hint: `launcher --help` lists the commands\n");
  const opt = await usage(["plan", "r", "--jsn"]);
  assert.equal(opt.err, "launcher plan: unknown option '--jsn' (did you mean --json?)\n  hint: `launcher plan --help` shows what it takes\n");
  const missing = await usage(["images", "push"]);
  assert.equal(missing.err, "launcher images push: missing required argument 'recipe'\n  hint: `launcher images push --help` shows what it takes\n");
});

test("every --cluster is the one shared declaration: -c, the same help", () => {
  const withCluster = allCommands(buildProgram()).flatMap((c) => c.options.filter((o) => o.long === "--cluster").map((o) => ({ c: c.name(), o })));
  assert.ok(withCluster.length >= 12, `${withCluster.length} commands take --cluster`);
  for (const { c, o } of withCluster) {
    assert.equal(o.short, "-c", c);
    assert.equal(o.description, CLUSTER_OPTION_DESCRIPTION, c);
  }
});

test("every command with --json also takes -o json, and -o json means --json", async () => {
  for (const c of allCommands(buildProgram())) {
    if (c.options.some((o) => o.long === "--json")) assert.ok(c.options.some((o) => o.short === "-o"), `${c.name()} lacks -o`);
  }
  const program = buildProgram({ writeErr: () => undefined });
  const status = program.commands.find((c) => c.name() === "status") as Command;
  status.hook("preAction", () => {
    throw new CommanderError(0, "test.parsed", "parsed");
  });
  await assert.rejects(program.parseAsync(["ps", "-o", "json", "-c", "x.toml"], { from: "user" }), (e: CommanderError) => e.code === "test.parsed");
  assert.deepEqual(status.opts(), { output: "json", json: true, cluster: "x.toml" });
  assert.equal((await usage(["status", "-o", "yaml"])).code, 1);
});

test("logs takes -f, -n, --since and -t; down --grace takes a duration", async () => {
  assert.equal((await usage(["logs", "x", "-f", "-n", "5", "--since", "10m", "-t", "-c", "c.toml"])).code, 0);
  assert.equal((await usage(["down", "x", "--grace", "1m30s"])).code, 0);
  // Past an hour the daemon's stop refuses it: refused here first, before anything is asked or stopped.
  const long = run(["down", "x", "--grace", "2h"]);
  assert.equal(long.code, 1);
  assert.match(long.stderr, /--grace 2h is longer than 60 minutes/);
  assert.equal(parseGraceSeconds("10s", "--grace"), 10);
  assert.equal(parseGraceSeconds("10", "--grace"), 10, "plain seconds as before");
  assert.equal(parseGraceSeconds("1m30s", "--grace"), 90);
  assert.throws(() => parseGraceSeconds("soon", "--grace"), /--grace "soon" is not a duration/);
  assert.equal(logsSinceArg(parseSince("10m", "--since")), "600s");
  assert.equal(logsSinceArg(parseSince("2026-12-03T05:00:00Z", "--since")), String(Date.UTC(2026, 11, 3, 5) / 1000));
  assert.throws(() => parseSince("2026-12-03T05:00:00", "--since"), /--since "2026-12-03T05:00:00" is neither a duration nor a time/, "no zone: refused, not guessed");
});

test("a misspelt recipe name gets the nearest recipe", () => {
  const r = run(["validate", "dsv4-flash-vison"]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /recipe "dsv4-flash-vison" not found \(looked for [^)]*\); did you mean "dsv4-flash-vision"\?/);
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-extends-"));
  try {
    mkdirSync(path.join(dir, "recipes", "base"), { recursive: true });
    mkdirSync(path.join(dir, "recipes", "child"), { recursive: true });
    writeFileSync(path.join(dir, "recipes", "base", "recipe.toml"), `name = "b"\ndocker_image = "i"\nmodel = "m"\n`);
    writeFileSync(path.join(dir, "recipes", "child", "recipe.toml"), `extends = "bsae"\n`);
    const e = spawnSync(process.execPath, [...cliArgs(), "validate", "child"], { cwd: dir, encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "" } });
    assert.equal(e.status, 1);
    assert.match(e.stderr, /recipes\/child\/recipe\.toml:1:\d+: error: extends: recipe "bsae" not found \(looked for [^)]*\); did you mean "base"\?/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a bad --nodes, --name or --lane names the flag, not cluster.toml:1:1", () => {
  const r = run(["plan", "dsv4-flash-vision", "-c", "examples/clusters/spark-2x.toml", "--nodes", "spark1"], { XDG_STATE_HOME: STATE });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^--nodes: error: the recipe needs 2 nodes, 1 were named \(spark1\)$/m);
  assert.equal(formatDiagnostic({ severity: "error", loc: { file: "--lane", line: 0, col: 0 }, message: "bad" }), "--lane: error: bad");
  const named = run(["plan", "dsv4-flash-vision", "-c", "examples/clusters/spark-2x.toml", "--name", "a b"], { XDG_STATE_HOME: STATE });
  assert.match(named.stderr, /^--name: error: deployment name \(--name\) "a b" is not a deployment or lane name/m);
  assert.doesNotMatch(named.stderr + r.stderr, /cluster\.toml:1:1/);
});

test("--json is one object whose warnings include what was said on stderr (validate and plan too)", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-hand-"));
  try {
    mkdirSync(path.join(dir, "recipes", "twice"), { recursive: true });
    writeFileSync(path.join(dir, "recipes", "twice", "recipe.toml"), `extends = "${path.resolve("recipes/dsv4-flash-vision")}"\nremove_env = ["NOT_THERE"]\n`);
    const v = run(["validate", "-o", "json", "dsv4-flash-vision"]);
    assert.equal(v.code, 0, v.stderr);
    const answer = JSON.parse(v.stdout) as { ok: boolean; recipes: { ok: boolean }[]; warnings: string[] };
    assert.equal(answer.ok, true);
    assert.deepEqual(answer.recipes.map((r) => r.ok), [true]);
    const p = spawnSync(process.execPath, [...cliArgs(), "plan", "twice", "--json", "-c", path.resolve("examples/clusters/spark-2x.toml")], { cwd: dir, encoding: "utf8", env: { ...process.env, NODE_OPTIONS: "", XDG_STATE_HOME: path.join(dir, "state") } });
    assert.equal(p.status, 0, p.stderr);
    const plan = JSON.parse(p.stdout) as { nodes: unknown[]; warnings: string[] };
    assert.equal(plan.nodes.length, 2);
    assert.equal(plan.warnings.length, 1, p.stdout);
    assert.match(plan.warnings[0] ?? "", /recipe\.toml:2:\d+: warning: remove_env: NOT_THERE is not in the parent recipe's env/);
    assert.match(p.stderr, /remove_env: NOT_THERE is not in the parent recipe's env/, "and on stderr for the human");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  assert.deepEqual(jsonAnswer([1, 2], []), { value: [1, 2], warnings: [] });
});

/** Runs `argv` until its output (stdout and stderr) satisfies `done`, or `ms` pass; then kills it. */
async function watchUntil(argv: string[], done: (out: string) => boolean, ms: number, env: NodeJS.ProcessEnv = {}): Promise<{ out: string; exited: boolean }> {
  const merged: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: "", ...env };
  // An undefined value unsets a variable (NO_COLOR="" still counts as set for node's hasColors).
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete merged[k];
  const child = spawn(argv[0] as string, argv.slice(1), { stdio: ["ignore", "pipe", "pipe"], env: merged });
  let out = "";
  let exited = false;
  child.on("exit", () => (exited = true));
  try {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      const check = (chunk: Buffer): void => {
        out += chunk.toString();
        if (done(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout.on("data", check);
      child.stderr.on("data", check);
      child.on("exit", () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return { out, exited };
  } finally {
    if (!exited) child.kill("SIGKILL");
  }
}

/** A cluster whose one node refuses SSH at once: status answers fast, with a warning. */
function refusingCluster(dir: string): string {
  const file = path.join(dir, "cluster.toml");
  writeFileSync(file, `name = "t"\n[[nodes]]\nname = "n1"\nhost = "127.0.0.1"\nport = 1\nuser = "nobody"\n`);
  return file;
}

const polls = (out: string): number => out.split("no deployments").length - 1;

test("status --watch in a pipe appends each poll, plain, and goes on when stdin is closed", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-watch-"));
  try {
    const r = await watchUntil([process.execPath, ...cliArgs(), "status", "--watch", "200ms", "-c", refusingCluster(dir)], (o) => polls(o) >= 3, 30_000);
    assert.equal(r.exited, false, `the watch ended with stdin closed:\n${r.out}`);
    assert.ok(polls(r.out) >= 3, r.out);
    assert.equal((r.out.match(/^--- \d{4}-/gm) ?? []).length, polls(r.out), "one header per poll, appended");
    assert.equal((r.out.match(/warning: n1 could not be read/g) ?? []).length, 1, "a warning is said once");
    assert.doesNotMatch(r.out, /\x1b\[/, "no colour or cursor codes in a pipe");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the gateway's watcher (--exit-with-stdin) still ends when its stdin closes", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-watch-"));
  try {
    const r = await watchUntil([process.execPath, ...cliArgs(), "status", "--watch", "200ms", "--json", "--exit-with-stdin", "-c", refusingCluster(dir)], () => false, 30_000);
    assert.equal(r.exited, true, r.out);
    assert.match(r.out, /^\{"deployments":\[\]/m, "one poll, then the end of stdin ends it");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("status --watch on a terminal redraws in place, in colour unless NO_COLOR", async () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-watch-"));
  try {
    // script(1) from util-linux gives the command a pseudo-terminal; stty gives it a size.
    const inner = `stty rows 40 cols 200; exec ${[process.execPath, ...cliArgs(), "ps", "--watch", "200ms", "-c", refusingCluster(dir)].map((w) => `'${w}'`).join(" ")}`;
    const tty = async (env: NodeJS.ProcessEnv) => watchUntil(["script", "-qfec", inner, "/dev/null"], (o) => polls(o) >= 3, 30_000, env);
    // Node's tty.getColorDepth (lib/internal/tty.js) says "no colours" under a CI variable it does
    // not know (CI=true alone, TEAMCITY_VERSION): this run stands for a user's terminal, not CI's.
    const coloured = await tty({ NO_COLOR: undefined, FORCE_COLOR: undefined, NODE_DISABLE_COLORS: undefined, CI: undefined, TEAMCITY_VERSION: undefined, TERM: "xterm-256color" });
    assert.ok(polls(coloured.out) >= 3, coloured.out);
    assert.match(coloured.out, /\x1b\[1A\x1b\[2K/, "earlier frames are erased");
    assert.doesNotMatch(coloured.out, /^--- /m, "no appended headers");
    assert.match(coloured.out, /\x1b\[33mwarning:\x1b\[39m n1 could not be read/);
    const bare = await tty({ NO_COLOR: "1", TERM: "xterm-256color" });
    assert.ok(polls(bare.out) >= 3, bare.out);
    assert.doesNotMatch(bare.out, /\x1b\[(3\d|2|1)m/, "NO_COLOR: no colours (cursor moves only)");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

const has = (program: string): boolean => spawnSync("sh", ["-c", `command -v ${program}`]).status === 0;

test("completion bash completes commands, a command's options and subcommands from the CLI's own tree", () => {
  const script = completionScript("bash", completionTree(buildProgram()));
  const ask = (words: string[]): string[] => {
    const r = spawnSync("bash", ["-c", `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _launcher; printf '%s\\n' "\${COMPREPLY[@]}"`], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split("\n").filter(Boolean).sort();
  };
  assert.deepEqual(ask(["launcher", "p"]), ["plan", "ps"]);
  assert.deepEqual(ask(["launcher", "logs", "x", "--t"]), ["--tail", "--timestamps"]);
  assert.deepEqual(ask(["launcher", "images", ""]), ["build", "push"]);
  assert.deepEqual(ask(["launcher", "images", "push", "--f"]), ["--from"]);
  assert.ok(ask(["launcher", "status", "-"]).includes("-c"));
});

test("completion zsh and fish are valid scripts of their shells; fish completes the same words", { skip: !has("zsh") || !has("fish") ? "zsh or fish not installed" : false }, () => {
  const tree = completionTree(buildProgram());
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-completion-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const file = (shell: string): string => {
    const f = path.join(dir, shell);
    writeFileSync(f, completionScript(shell, tree));
    return f;
  };
  for (const shell of ["zsh", "fish"]) {
    const r = spawnSync(shell, ["-n", file(shell)], { encoding: "utf8" });
    assert.equal(r.status, 0, `${shell}: ${r.stderr}`);
  }
  const zsh = spawnSync("zsh", ["-fc", `autoload -U compinit; compinit -u -D; source ${file("zsh")}; print -r -- $_comps[launcher]`], { encoding: "utf8" });
  assert.equal(zsh.stdout.trim(), "_launcher", zsh.stderr);
  const fish = (line: string): string[] => {
    const r = spawnSync("fish", ["-c", `source ${file("fish")}; complete -C '${line}'`], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.split("\n").filter(Boolean).map((l) => l.split("\t")[0] as string).sort();
  };
  assert.deepEqual(fish("launcher logs x --t"), ["--tail", "--timestamps"]);
  assert.deepEqual(fish("launcher images "), ["build", "push"]);
  assert.ok(fish("launcher p").includes("ps"));
  assert.throws(() => completionScript("tcsh", tree), /no completion for shell "tcsh"/);
});

test("a node without a user is planned and shown as the user SSH will log in as (ssh -G)", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-user-"));
  try {
    writeFileSync(path.join(dir, "ssh_config"), "Host 127.0.0.1 spark1.lan spark2.lan\n  User alice\n");
    const nodes = (hosts: string[], port = "") => hosts.map((h, i) => `[[nodes]]\nname = "n${i + 1}"\nhost = "${h}"\n${port}fabric_ip = "10.0.0.${i + 1}"\nfabric_iface = "eth1"\n`).join("");
    writeFileSync(path.join(dir, "two.toml"), `name = "two"\n[ssh]\nconfig = "ssh_config"\n${nodes(["spark1.lan", "spark2.lan"])}`);
    writeFileSync(path.join(dir, "one.toml"), `name = "one"\n[ssh]\nconfig = "ssh_config"\n${nodes(["127.0.0.1"], "port = 1\n")}`);
    const env = { XDG_STATE_HOME: path.join(dir, "state") };
    // dsv4-flash-vision mounts ~/.cache/...: without the user, plan said "the node's user is unknown".
    const plan = run(["plan", "dsv4-flash-vision", "-c", path.join(dir, "two.toml")], env);
    assert.equal(plan.code, 0, plan.stderr);
    assert.match(plan.stdout, /--volume \/home\/alice\/\.cache\/dsv4vision-jit\/triton:/);
    const doctor = run(["doctor", "-c", path.join(dir, "one.toml")], env);
    assert.match(doctor.stdout, /^n1 +ssh alice@127\.0\.0\.1:1 unreachable$/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a bad count names its flag instead of being taken as a default", () => {
  const env = { XDG_STATE_HOME: STATE };
  const limit = run(["history", "--limit", "many"], env);
  assert.equal(limit.code, 1);
  assert.match(limit.stderr, /^launcher: --limit "many" is not a whole number from 1$/m);
  assert.match(run(["lanes", "--swaps", "-1"], env).stderr, /^launcher: --swaps "-1" is not a whole number$/m);
  assert.match(run(["logs", "x", "-n", "ten"], env).stderr, /^launcher: --tail "ten" is not a whole number$/m);
});

test("logs --since reaches docker logs as its own option, before the container", async () => {
  const seen: string[][] = [];
  const transport = {
    node: "n1",
    exec: async () => ({ code: 0, stdout: "", stderr: "" }),
    stream: (argv: readonly string[]) => {
      seen.push([...argv]);
      return (async function* () {})();
    },
    spawn: () => {
      throw new Error("not used");
    },
  };
  const docker = new SshDocker(transport);
  for await (const _ of docker.logs("c-0", { tail: 5, since: parseSince("10m", "--since") })) void _;
  for await (const _ of docker.logs("c-0", { since: parseSince("2026-12-03T05:00:00Z", "--since"), follow: true })) void _;
  assert.deepEqual(seen[0], ["docker", "logs", "--timestamps", "--tail", "5", "--since", "600s", "--", "c-0"]);
  const followed = seen[1] ?? [];
  assert.deepEqual(followed.slice(followed.indexOf("docker")), ["docker", "logs", "--timestamps", "--follow", "--since", String(Date.UTC(2026, 11, 3, 5) / 1000), "--", "c-0"]);
});

test("colours: only on a terminal that has them, never with NO_COLOR", () => {
  const tty = { isTTY: true, hasColors: () => true };
  assert.equal(colourFor(tty, {})("red", "error"), "\x1b[31merror\x1b[39m");
  assert.equal(colourFor(tty, { NO_COLOR: "1" })("red", "error"), "error");
  assert.equal(colourFor(tty, { NO_COLOR: "" })("red", "error"), "\x1b[31merror\x1b[39m", "an empty NO_COLOR is unset (no-color.org)");
  assert.equal(colourFor({ isTTY: false, hasColors: () => true }, {})("red", "error"), "error", "a pipe");
  assert.equal(colourFor({ isTTY: true, hasColors: () => false }, {})("red", "error"), "error", "a dumb terminal");
  assert.equal(formatDiagnosticWith({ severity: "error", loc: { file: "f", line: 1, col: 2 }, message: "m" }, (s) => colourFor(tty, {})(SEVERITY_STYLE[s], s)), "f:1:2: \x1b[31merror\x1b[39m: m");
});

test("a usage error of a command line that asked for JSON is also a JSON error on stdout", () => {
  const r = run(["status", "-o", "json", "--bogus"]);
  assert.equal(r.code, 1);
  assert.deepEqual(JSON.parse(r.stdout), { error: { message: "launcher status: unknown option '--bogus'", hint: "`launcher status --help` shows what it takes", diagnostics: [] } });
  assert.equal(run(["status", "--bogus"]).stdout, "", "text only when no JSON was asked for");
  assert.ok(asksForJson(["x", "--output=json"]) && asksForJson(["-ojson"]) && asksForJson(["--output", "json"]) && !asksForJson(["-o", "text"]));
});
