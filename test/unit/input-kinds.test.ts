import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { ADDRESS, CONTAINER_PATH, DEPLOYMENT_NAME, DOCKER_SIZE, HCA, HOME, HOST, HOST_PATH, IFACE, IMAGE, NODE_NAME, USER, type Kind } from "../../src/config/kinds.js";
import { MAX_REMOTE_COMMAND_BYTES } from "../../src/config/shell-words.js";
import { planDeployment } from "../../src/plan/plan.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { SshDocker } from "../../src/remote/docker.js";
import { sshCommandArgs } from "../../src/remote/ssh.js";
import type { ExecResult, Transport } from "../../src/remote/transport.js";
import { BASE, memorySource } from "../support/memory-source.js";

const FILE = "recipes/bad/recipe.toml";
const recipeErrors = (text: string): string[] =>
  resolveRecipe("bad", memorySource({ [FILE]: text })).diagnostics.filter((d) => d.severity === "error").map(formatDiagnostic);
const clusterErrors = (text: string): string[] => parseCluster("c.toml", text).diagnostics.map(formatDiagnostic);

const KINDS: [Kind, string[], string[]][] = [
  [HOST, ["spark1", "spark1.lan", "10.0.0.1", "fd00::1", "lnch-n1", "my_alias"], ["-oProxyCommand=touch /tmp/x", "a b", "h;id", "user@h", "ssh://h", "h%h", "", "-h"]],
  [ADDRESS, ["spark1.lan", "10.0.0.1", "[fd00::1]"], ["-x", "fd00::1", "a/b", "h:80", ""]],
  [USER, ["ai", "root", "svc.user", "_x"], ["-oX", "a b", "a;b", "a@b", "", "x".repeat(33)]],
  [NODE_NAME, ["n1", "spark-1", "a.b_c"], ["-n", "a", "n 1", "n/1", "_n"]],
  [DEPLOYMENT_NAME, ["practice-2x", "chat", "a.b_c"], ["-x", "Chat", "a b", "a/b", ""]],
  [IFACE, ["enp1s0f1np1", "eth0", "bond0.100"], ["-x", "a b", "a/b", "x".repeat(16)]],
  [HCA, ["rocep1s0f1", "mlx5_0", "mlx5_0:1"], ["-x", "a,b", "a b", ""]],
  [HOME, ["/home/ai", "/root"], ["home/ai", "/a:b", "/a\nb", "~"]],
  [HOST_PATH, ["/data/hf", "~", "~/cache/hf", "/a,b"], ["data", "/a:b", "~/a:b", "/a\nb", "-v", ""]],
  [CONTAINER_PATH, ["/root/.cache", "/a,b"], ["root", "/a:b", "/a\tb", "~/x"]],
  [
    IMAGE,
    ["practice-engine:local", "dsv4-flash-vision:local", "vllm/vllm-openai:v0.11.0", "nvcr.io/nvidia/vllm:25.09-py3", "localhost:5000/a/b:c", "[fd00::1]:5000/a", `img@sha256:${"a".repeat(64)}`],
    ["--privileged", "-v/:/host", "Upper:tag", "img:-x", "a b", "img;id", "", `${"a".repeat(256)}:t`, "img:"],
  ],
  [DOCKER_SIZE, ["32gb", "16g", "1024m", "1.5g"], ["--privileged", "32 GB!", "-1g", ""]],
];

for (const [kind, good, bad] of KINDS) {
  test(`kind ${kind.what}: accepts ${good.length} forms, refuses ${bad.length}`, () => {
    for (const v of good) assert.equal(kind.check(v), undefined, `${JSON.stringify(v)} should be ${kind.what}`);
    for (const v of bad) assert.notEqual(kind.check(v), undefined, `${JSON.stringify(v)} should not be ${kind.what}`);
  });
}

test("no kind lets a value start with '-': nothing from a file can be read as an option", () => {
  for (const [kind] of KINDS) assert.notEqual(kind.check("-oProxyCommand=x"), undefined, kind.what);
});

test("recipe: a docker_image like --privileged is refused at its line, naming the field", () => {
  const errors = recipeErrors(BASE.replace('docker_image = "img:local"', 'docker_image = "--privileged"'));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /^recipes\/bad\/recipe\.toml:4:16: error: docker_image "--privileged" is not a Docker image reference: it starts with '-'/);
  assert.match(errors[0] ?? "", /hint: write \[registry\/\]name\[:tag\]/);
  const upper = recipeErrors(BASE.replace('docker_image = "img:local"', 'docker_image = "My/Image"'));
  assert.match(upper[0] ?? "", /:4:16: error: docker_image "My\/Image" is not a Docker image reference: it does not follow Docker's reference grammar/);
});

test("recipe: mount paths with ':' or a newline are refused, host and container, at their lines", () => {
  const mount = (host: string, container: string): string => `${BASE}\n[[extra_mounts]]\nhost = ${JSON.stringify(host)}\ncontainer = ${JSON.stringify(container)}\n`;
  const hostColon = recipeErrors(mount("/data/a:b", "/c"));
  assert.equal(hostColon.length, 1, hostColon.join("\n"));
  assert.match(hostColon[0] ?? "", /recipe\.toml:20:8: error: extra_mounts\[0\]\.host "\/data\/a:b" is not a host path: it contains ':', which Docker's --volume HOST:CONTAINER syntax splits on/);
  const containerColon = recipeErrors(mount("/data", "/c:ro"));
  assert.match(containerColon[0] ?? "", /recipe\.toml:21:13: error: extra_mounts\[0\]\.container "\/c:ro" is not a container path: it contains ':'/);
  const newline = recipeErrors(mount("/data\n/x", "/c"));
  assert.match(newline[0] ?? "", /recipe\.toml:20:8: error: extra_mounts\[0\]\.host "\/data\\n\/x" is not a host path: it contains a control character/);
  // ',' splits only the options after the second ':' of a -v spec: a path may hold one.
  assert.deepEqual(recipeErrors(mount("/data/a,b", "/c,d")), []);
});

test("recipe: shm_size must be a Docker size, at its line", () => {
  const errors = recipeErrors(BASE.replace('shm_size = "32gb"', 'shm_size = "--privileged"'));
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /recipe\.toml:10:12: error: shm_size "--privileged" is not a Docker size/);
});

test("cluster: each field that reaches a command line is checked for its kind, at its line", () => {
  const node = (key: string, value: string): string => `[[nodes]]\nname = "n1"\nhost = "h1"\n${key} = ${JSON.stringify(value)}\n`;
  const cases: [string, string, string, RegExp][] = [
    ["host", "-oProxyCommand=touch /tmp/pwned", "c.toml:3:8", /nodes\[0\]\.host "-oProxyCommand=touch \/tmp\/pwned" is not a host name, an IPv4\/IPv6 address or an ssh_config alias: it starts with '-'/],
    ["user", "-oProxyCommand=x", "c.toml:4:8", /nodes\[0\]\.user "-oProxyCommand=x" is not a POSIX user name/],
    ["address", "h1;id", "c.toml:4:11", /nodes\[0\]\.address "h1;id" is not a host name or an IPv4 address: ";" is not allowed/],
    ["home", "/home/a:b", "c.toml:4:8", /nodes\[0\]\.home "\/home\/a:b" is not a home folder: it contains ':'/],
    ["fabric_iface", "eth0 -x", "c.toml:4:16", /nodes\[0\]\.fabric_iface "eth0 -x" is not a network interface name/],
  ];
  for (const [key, value, at, message] of cases) {
    // host replaces the node's own host line; the others are added after it.
    const text = key === "host" ? `[[nodes]]\nname = "n1"\nhost = ${JSON.stringify(value)}\n` : node(key, value);
    const errors = clusterErrors(text);
    assert.equal(errors.length, 1, `${key}: ${errors.join("\n")}`);
    assert.ok(errors[0]?.startsWith(`${at}: error: `), `${key}: ${errors[0]}`);
    assert.match(errors[0] ?? "", message);
    assert.match(errors[0] ?? "", /\n {2}hint: /, "every kind error says what to do");
  }
  const hca = clusterErrors(`[[nodes]]\nname = "n1"\nhost = "h1"\nhca = ["mlx5_0", "-x"]\n`);
  assert.deepEqual(hca.map((e) => e.split("\n")[0]), ['c.toml:4:18: error: nodes[0].hca[1] "-x" is not an RDMA device name: it starts with \'-\', so a command would read it as an option']);
  const name = clusterErrors(`[[nodes]]\nname = "-n1"\nhost = "h1"\n`);
  assert.match(name[0] ?? "", /^c\.toml:2:8: error: nodes\[0\]\.name "-n1" is not a node name/);
});

test("--name and --lane are checked as container names before anything runs", () => {
  const recipe = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": BASE })).recipe;
  const cluster = parseCluster("c.toml", `[[nodes]]\nname = "a1"\nhost = "h1"\n[[nodes]]\nname = "a2"\nhost = "h2"\n`).cluster;
  assert.ok(recipe && cluster);
  const p = planDeployment(recipe, cluster, { deployment: "--privileged", lane: "a b" });
  assert.equal(p.ok, false);
  const text = p.ok ? "" : p.diagnostics.map(formatDiagnostic).join("\n");
  assert.match(text, /deployment name \(--name\) "--privileged" is not a deployment or lane name: it starts with '-'/);
  assert.match(text, /lane name \(--lane\) "a b" is not a deployment or lane name/);
});

test("docker run: the image comes right after --, so neither it nor the command is an option", () => {
  const recipe = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": BASE })).recipe;
  const cluster = parseCluster("c.toml", `[[nodes]]\nname = "a1"\nhost = "h1"\n[[nodes]]\nname = "a2"\nhost = "h2"\n`).cluster;
  assert.ok(recipe && cluster);
  const p = planDeployment(recipe, cluster);
  assert.ok(p.ok);
  for (const n of p.plan.nodes) {
    const i = n.argv.indexOf("img:local");
    assert.equal(n.argv[i - 1], "--", n.argv.join(" "));
    assert.equal(n.argv.indexOf("--"), i - 1, "one -- only, right before the image");
    assert.equal(n.argv[i + 1], "org/model");
  }
});

test("the small Docker client puts names and images after --", async () => {
  const seen: string[][] = [];
  const transport: Transport = {
    node: "n1",
    exec: async (argv): Promise<ExecResult> => {
      seen.push([...argv]);
      return { code: 0, stdout: "sha256:x\n", stderr: "" };
    },
    stream: (argv) => {
      seen.push([...argv]);
      return (async function* () {})();
    },
    spawn: () => {
      throw new Error("not used");
    },
  };
  const docker = new SshDocker(transport);
  await docker.imageId("-x");
  await docker.stopAndRemove(["-a", "b"], 1);
  for await (const _ of docker.logs("-c", { tail: 5 })) void _;
  const tails = seen.map((argv) => argv.slice(argv.indexOf("--")));
  assert.deepEqual(tails, [["--", "-x"], ["--", "-a", "b"], ["--", "-a", "b"], ["--", "-c"]]);
});

test("ssh: -- goes before the host, and the real OpenSSH then reads neither host nor command as options", () => {
  const argv = sshCommandArgs(["-o", "BatchMode=yes"], "h1", ["docker", "ps"]);
  assert.deepEqual(argv, ["-o", "BatchMode=yes", "--", "h1", "docker ps"]);
  // `ssh -G` prints the configuration ssh would use and connects nowhere.
  const g = (args: string[]): string => spawnSync("ssh", ["-G", "-F", "/dev/null", ...args], { encoding: "utf8" }).stdout.toLowerCase();
  const hostile = "-oProxyCommand=touch /tmp/launcher-pwned";
  assert.match(g([hostile, "h1"]), /proxycommand touch/, "without --, ssh takes such a host as an option");
  assert.doesNotMatch(g(sshCommandArgs([], hostile, ["true"])), /proxycommand/, "after --, it is the destination");
  // ssh parses options again after the host unless -- came before it (ssh.c: opt_terminated).
  assert.match(g(["h1", "-oProxyCommand=x", "true"]), /proxycommand x/);
  assert.doesNotMatch(g(["--", "h1", "-oProxyCommand=x", "true"]), /proxycommand/);
});

test("E2BIG: a recipe whose docker run exceeds one execve argument is refused at plan time, naming it and its size", () => {
  const cluster = parseCluster("c.toml", `[[nodes]]\nname = "a1"\nhost = "h1"\n[[nodes]]\nname = "a2"\nhost = "h2"\n`).cluster;
  assert.ok(cluster);
  // Many flag values of 8 KiB each: the command grows with the recipe, one string at a time (the
  // env no longer does: it reaches docker on stdin).
  const withEnv = (bytes: number) => {
    const args = Array.from({ length: Math.ceil(bytes / 8192) }, (_, i) => `"--big-${i} ${"x".repeat(8192)}"`).join(", ");
    return resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": BASE.replace(/^args = \[/m, `args = [${args}, `) })).recipe;
  };
  const big = withEnv(MAX_REMOTE_COMMAND_BYTES);
  assert.ok(big);
  const p = planDeployment(big, cluster);
  assert.equal(p.ok, false);
  const text = p.ok ? "" : p.diagnostics.map(formatDiagnostic).join("\n");
  assert.match(text, /^recipes\/r\/recipe\.toml:1:1: error: recipe r: the docker run command for a1 is \d+ bytes, more than the 131071 a node's kernel takes as one command \(E2BIG\)/);
  const fits = withEnv(100 * 1024);
  assert.ok(fits);
  assert.equal(planDeployment(fits, cluster).ok, true);
  assert.throws(() => sshCommandArgs([], "h1", ["echo", "y".repeat(MAX_REMOTE_COMMAND_BYTES)]), /h1: a \d+-byte command is longer than the 131071 bytes a node takes \(E2BIG\)/);
});

test("a string too long for the TOML parser is a diagnostic at its line, not a crash", () => {
  const errors = recipeErrors(`${BASE}BIG = "${"x".repeat(200_000)}"\n`);
  assert.equal(errors.length, 1, errors.join("\n").slice(0, 500));
  assert.match(errors[0] ?? "", /^recipes\/bad\/recipe\.toml:18:1: error: a value on this line is too long to read \(200008 characters\)/);
});

test("a restart's one-round-trip scripts: stop (no grace) then list, and one container's log then the removal; names after --, run for real by sh with a stand-in docker", async () => {
  const bin = mkdtempSync(path.join(tmpdir(), "launcher-docker-stand-in-"));
  try {
    // Records each docker command line; `ps` finds one container, `inspect` describes it, `logs` says a cause.
    writeFileSync(
      path.join(bin, "docker"),
      `#!/bin/sh\necho "$*" >> "${bin}/calls"\ncase "$1" in\n  ps) echo id1 ;;\n  inspect) echo '[{"Id":"id1","Name":"/launcher-d-r0","Config":{"Labels":{}},"State":{"Status":"exited","Running":false,"ExitCode":137,"StartedAt":"s","FinishedAt":"f"}}]' ;;\n  logs) echo "2026-01-01T00:00:00Z RuntimeError: boom" ; echo "on stderr" >&2 ;;\n  rm) echo "removal's own words" ; exit 1 ;;\nesac\n`,
      { mode: 0o755 },
    );
    const transport: Transport = {
      node: "n1",
      exec: async (argv): Promise<ExecResult> => {
        const r = spawnSync(argv[0] as string, argv.slice(1), { encoding: "utf8", env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ""}` } });
        return { code: r.status ?? 1, stdout: r.stdout, stderr: r.stderr };
      },
      stream: () => (async function* () {})(),
      spawn: () => {
        throw new Error("not used");
      },
    };
    const docker = new SshDocker(transport);
    const listed = await docker.stopThenList("launcher.deployment", ["-a", "b"]);
    assert.deepEqual(listed.map((c) => `${c.name} ${c.state}`), ["launcher-d-r0 exited"]);
    const lines = await docker.logsThenRemove("-c", 2000, ["-a", "b"]);
    assert.deepEqual(lines, ["2026-01-01T00:00:00Z RuntimeError: boom", "on stderr"], "the log, stderr too, and nothing of the removal");
    assert.deepEqual(readFileSync(path.join(bin, "calls"), "utf8").trim().split("\n"), [
      "stop --time 0 -- -a b",
      "ps --all --quiet --no-trunc --filter label=launcher.deployment",
      "inspect id1",
      "logs --timestamps --tail 2000 -- -c",
      "rm --force -- -a b",
    ]);
  } finally {
    rmSync(bin, { recursive: true, force: true });
  }
});
