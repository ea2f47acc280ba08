// Relay vs node to node, side by side in one run: a ~300 MB image (`launcher images push`) and a
// ~300 MB model (`launcher models sync`) from practice host n1 to 3 others, each way in turn
// (`--relay`: through this machine, as before; default: node to node over the fabric). For each:
// wall time, where it went (until the first progress line, until the last node's `done`, until the
// CLI ended: a rough split of the checks before the bytes, the bytes, and what follows them),
// bytes through this machine (the root side of the hosts' management veths, both ways), and each
// node's rate as the progress reported it. Also: a push when every node already has the image.
// `--baseline DIR`: a checkout of another commit (with node_modules); its CLI is built and run
// the same way, in the same rounds, and printed above this one's: before and after in one session.
// Also, for the image: Docker's own share of a push with no transfer at all (the save, as the push runs it, of the
// same archive to a file on n1, then the 3 targets' loads of that file at once, the way the push loads): a
// measurement of where the time goes, not a proof of a floor (a run below it is flagged), beside the two.
// Run as root: npx tsx bench/push.ts [--mib 300] [--rounds 1] [--baseline DIR]
// Targets: node to node <= 0.5 x the relay's time; bytes through this machine < 1% of the payload.
import { chmodSync, readFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { spawn, spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { CLUSTER, rigDown, rigUp, seedModel, onHost, onHostAsync, STATE_HOME, variant } from "../test/integration/practice-cluster.js";
import { builtMain } from "../test/built-cli.js";
import { dockerSave, withDockerApi } from "../src/transfer/docker-api.js";
import { diffIdsOf, saveWithout } from "../src/transfer/layers.js";
import { pushSkip } from "../src/transfer/route.js";
import { parseProbe, PROBE_SCRIPT } from "../src/transfer/route.js";

const { values } = parseArgs({ options: { mib: { type: "string", default: "300" }, rounds: { type: "string", default: "1" }, baseline: { type: "string" } } });
const MIB = Number(values.mib);
const ROUNDS = Number(values.rounds);
const IMAGE = "bench-fat:local";
const HOSTS = 4;
const TARGETS = [2, 3, 4];
const REPO = "models--practice--bench-moe";

// Benchmarks time the built CLI, as `npx launcher` runs it.
const build = (cwd: string): void => {
  const r = spawnSync("npm", ["run", "build"], { cwd, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`npm run build in ${cwd} failed:\n${r.stdout}${r.stderr}`);
};
const CLIS: { name: string; main: string }[] = [];
if (values.baseline !== undefined) {
  build(values.baseline);
  CLIS.push({ name: `baseline ${spawnSync("git", ["-C", values.baseline, "rev-parse", "--short", "HEAD"], { encoding: "utf8" }).stdout.trim()}`, main: builtMain(values.baseline) });
}
build(".");
CLIS.push({ name: `this ${spawnSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).stdout.trim()}`, main: builtMain() });
// rigUp runs this worktree's built CLI too.
process.env.LAUNCHER_USE_DIST = "1";
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-push-"));
// Outside `dir` (made 0700 by mkdtemp): the hosts' users write and read the floor's archive there.
const shared = mkdtempSync(path.join(tmpdir(), "launcher-bench-floor-"));
const env = { LAUNCHER_DOCKER_IMAGES: path.join(dir, "docker-images") };

function managementBytes(): number {
  let sum = 0;
  for (let i = 1; i <= HOSTS; i++) for (const d of ["rx_bytes", "tx_bytes"]) sum += Number(readFileSync(`/sys/class/net/lnchm${i}/statistics/${d}`, "utf8").trim());
  return sum;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Each stderr line with the seconds since the start when it came. */
  lines: { at: number; line: string }[];
  seconds: number;
}

/** One run of a built CLI as a user would (the practice cluster, its own state), each stderr line timed. */
function run(main: string, args: string[], timeoutMs = 900_000): Promise<Run> {
  return new Promise((resolve) => {
    const start = performance.now();
    const child = spawn(process.execPath, [main, ...args], { env: { ...process.env, LAUNCHER_CLUSTER: CLUSTER, XDG_STATE_HOME: STATE_HOME, NODE_OPTIONS: "", CI: "true", ...env } });
    let stdout = "";
    const lines: Run["lines"] = [];
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    createInterface({ input: child.stderr }).on("line", (line) => lines.push({ at: (performance.now() - start) / 1000, line }));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr: lines.map((l) => l.line).join("\n"), lines, seconds: (performance.now() - start) / 1000 });
    });
  });
}

interface Measure {
  seconds: number;
  /** Seconds until the first progress line, and until the last node said done. */
  firstBytes: number;
  lastDone: number;
  through: number;
  payload: number;
  rates: Map<string, string>;
  paths: Map<string, string>;
  /** Bytes of layers every target stored, left out of the archive (images push's bytes_not_sent). */
  leftOut: number;
}

const PROGRESS = /^ +(n\d+) +[\d.]+ MiB +([\d.]+ MiB\/s)( +done)?/;

/** One run of the CLI, timed, with the bytes through this machine and each node's last progress line. */
async function measure(main: string, args: string[]): Promise<Measure> {
  // The run before left gigabytes of dirty pages (3 loads or 3 copies); their writeback must not
  // fall into this run's time, whichever path it measures.
  spawnSync("sync");
  const before = managementBytes();
  const r = await run(main, args);
  if (r.code !== 0) throw new Error(`launcher ${args.join(" ")} failed:\n${r.stderr}`);
  const through = managementBytes() - before;
  const out = JSON.parse(r.stdout) as { nodes: { node: string; bytes: number; path?: string; from?: string }[]; bytes_not_sent?: number };
  const nodes = out.nodes;
  const rates = new Map<string, string>();
  let firstBytes = NaN;
  let lastDone = NaN;
  for (const { at, line } of r.lines) {
    const m = PROGRESS.exec(line);
    if (m === null) continue;
    if (Number.isNaN(firstBytes)) firstBytes = at;
    if (m[3] !== undefined) {
      rates.set(m[1] as string, m[2] as string);
      lastDone = at;
    }
  }
  const paths = new Map(nodes.filter((n) => n.path !== undefined).map((n) => [n.node, n.path === "relay" ? "relay" : `${n.from ?? "?"}->${n.node} ${n.path}`]));
  return { seconds: r.seconds, firstBytes, lastDone, through, payload: Math.max(...nodes.map((n) => n.bytes)), rates, paths, leftOut: out.bytes_not_sent ?? 0 };
}

interface Floor {
  /** Seconds until the source's save (Docker's API, and the layer filter when layers are left out, as the push's relay runs it) wrote its first byte, and until its last. */
  firstByte: number;
  save: number;
  /** Seconds for the 3 targets' loads of the saved file (docker_api, as the push loads), all at once. */
  loads: number;
}

/**
 * Docker's own work in an image push, with no transfer: the archive the push would send (the same
 * layers left out, by the push's own rule) saved to a file on n1, then loaded from that file by
 * every target at once, each load timed on its host (no SSH start in it). A push cannot store
 * anything before the save's first byte, and its loads are unlikely to go faster than from a local
 * file with every byte there: max(save, firstByte + loads) is Docker's share of any path here, a
 * measurement (the CLI's own checks come on top), not a proof.
 */
async function dockerAlone(file: string): Promise<Floor> {
  const probe = (i: number, layers: boolean) => parseProbe(`n${i}`, onHost(i, ["sh", "-c", PROBE_SCRIPT, "sh", "docker", "", layers ? "layers" : ""]));
  const layers = diffIdsOf(onHost(1, ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", "--", IMAGE]).trim()) ?? [];
  const skip = pushSkip(layers, probe(1, false), TARGETS.map((i) => probe(i, true)));
  const save = skip === undefined ? dockerSave(IMAGE) : saveWithout(IMAGE, skip.names);
  // dd takes exactly one byte off the pipe (head -c would read a whole buffer and drop the rest).
  // The braces run in a subshell of the pipeline: it prints its own time. The file is flushed
  // after the clock stops, so that its writeback does not fall into the loads' time.
  const timed = 'f=$1; shift; set -o pipefail; umask 022; s=$(date +%s%N); "$@" | { dd bs=1 count=1 of="$f" status=none; a=$(date +%s%N); cat >> "$f"; echo "$((a - s))"; } || exit 1; b=$(date +%s%N); echo "$((b - s))"; sync';
  const [first, all] = (await onHostAsync(1, ["bash", "-c", timed, "bash", file, ...save])).trim().split("\n").map(Number);
  // The hosts share this machine's clock: the loads run from the first start to the last end.
  // Loaded the way the push loads (docker_api: straight to the daemon's socket), so that no CLI's copying counts as Docker's.
  const loadTimed = 's=$(date +%s%N); docker_api load < "$1" >/dev/null || exit 1; echo "$s $(date +%s%N)"';
  const spans = (await Promise.all(TARGETS.map((i) => onHostAsync(i, withDockerApi("sh", loadTimed, [file]))))).map((o) => o.trim().split(" ").map(Number));
  const loads = (Math.max(...spans.map((x) => x[1] ?? NaN)) - Math.min(...spans.map((x) => x[0] ?? NaN))) / 1e9;
  if (![first, all, loads].every((x) => x !== undefined && Number.isFinite(x) && x > 0)) throw new Error(`docker alone: no timing read (${first}, ${all}, ${loads})`);
  return { firstByte: (first as number) / 1e9, save: (all as number) / 1e9, loads };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const mb = (b: number): string => `${(b / 1048576).toFixed(1)} MiB`;

function print(cli: string, what: string, relay: Measure[], direct: Measure[], floor?: Floor[]): void {
  const row = (name: string, ms: Measure[]): void => {
    const m = ms[ms.length - 1] as Measure;
    const t = median(ms.map((x) => x.seconds));
    const rates = TARGETS.map((i) => `n${i} ${m.rates.get(`n${i}`) ?? "?"}`).join(", ");
    const split = `first progress ${median(ms.map((x) => x.firstBytes)).toFixed(2)} s, last done ${median(ms.map((x) => x.lastDone)).toFixed(2)} s`;
    const left = m.leftOut > 0 ? `   left out (every target stores it) ${mb(m.leftOut)}` : "";
    console.log(`  ${name.padEnd(13)} ${t.toFixed(2).padStart(7)} s   (${split})   through this machine ${mb(m.through).padStart(11)} (${((100 * m.through) / m.payload).toFixed(2)}% of ${mb(m.payload)})${left}   rates: ${rates}`);
  };
  console.log(`\n[${cli}] ${what}, from n1 to ${TARGETS.length} practice hosts (all on this machine's cores), median of ${relay.length}:`);
  row("relay", relay);
  row("node to node", direct);
  const ratio = median(direct.map((x) => x.seconds)) / median(relay.map((x) => x.seconds));
  console.log(`  ratio node to node / relay: ${ratio.toFixed(2)} x   (target <= 0.5); paths: ${[...(direct[direct.length - 1] as Measure).paths.values()].join(", ")}`);
  if (floor === undefined || floor.length === 0) return;
  const first = median(floor.map((f) => f.firstByte));
  const loads = median(floor.map((f) => f.loads));
  const least = median(floor.map((f) => Math.max(f.save, f.firstByte + f.loads)));
  const below = median(direct.map((x) => x.seconds)) < least ? "; node to node went below it, so it is no floor here" : "";
  console.log(
    `  docker alone  ${least.toFixed(2).padStart(7)} s   (no transfer: the save's first byte ${first.toFixed(2)} s (all of it ${median(floor.map((f) => f.save)).toFixed(2)} s), then ${TARGETS.length} loads at once from a local file ${loads.toFixed(2)} s)` +
      `   = ${(least / median(relay.map((x) => x.seconds))).toFixed(2)} x the relay: Docker's own share of either path${below}`,
  );
}

const main0 = (CLIS[CLIS.length - 1] as { main: string }).main;
try {
  await rigUp(HOSTS);
  const folder = path.join(dir, "docker-images", "bench-fat");
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, "Dockerfile"), "FROM practice-engine:local\nCOPY fat.bin /fat.bin\n");
  // Random bytes: nothing on the way can compress them away.
  spawnSync("sh", ["-c", 'head -c "$1" /dev/urandom > "$2"', "sh", String(MIB << 20), path.join(folder, "fat.bin")]);
  const recipe = variant(dir, "bench-fat", "practice-2x", `docker_image = "${IMAGE}"\ndocker_image_dir = "bench-fat"\nmodel = "practice/bench-moe"\n`);
  const built = await run(main0, ["images", "build", recipe], 600_000);
  if (built.code !== 0) throw new Error(`build failed:\n${built.stderr}`);
  seedModel(1, MIB << 20, REPO);

  const dropImage = (): void => {
    for (const i of TARGETS) onHost(i, ["sh", "-c", 'docker image rm "$1" >/dev/null 2>&1 || true', "sh", IMAGE]);
  };
  const dropModel = (): void => {
    for (const i of TARGETS) onHost(i, ["rm", "-rf", `/home/lnchu${i}/.cache/practice/huggingface/hub/${REPO}`]);
  };
  const results = CLIS.map((cli) => ({ cli, img: { relay: [] as Measure[], direct: [] as Measure[] }, mod: { relay: [] as Measure[], direct: [] as Measure[] } }));
  const floors: Floor[] = [];
  // Every host's user writes and reads a file there (the hosts share this machine's files); none lists it.
  chmodSync(shared, 0o1733);
  // Each round runs every CLI in turn, so that a slow moment of this machine falls on both.
  for (let round = 0; round < ROUNDS; round++) {
    for (const { cli, img, mod } of results) {
      dropImage();
      img.relay.push(await measure(cli.main, ["images", "push", recipe, "--relay", "--json"]));
      dropImage();
      img.direct.push(await measure(cli.main, ["images", "push", recipe, "--json"]));
      dropModel();
      mod.relay.push(await measure(cli.main, ["models", "sync", recipe, "--relay", "--json"]));
      dropModel();
      mod.direct.push(await measure(cli.main, ["models", "sync", recipe, "--json"]));
    }
    dropImage();
    spawnSync("sync");
    floors.push(await dockerAlone(path.join(shared, `round${round}.tar`)));
    rmSync(path.join(shared, `round${round}.tar`), { force: true });
  }
  const noop: number[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await run(main0, ["images", "push", recipe, "--json"]);
    if (r.code !== 0) throw new Error(`push failed:\n${r.stderr}`);
    noop.push(r.seconds);
  }
  for (const { cli, img, mod } of results) {
    print(cli.name, `image ${IMAGE} (${MIB} MiB of random bytes over practice-engine)`, img.relay, img.direct, floors);
    print(cli.name, `model ${REPO} (${MIB} MiB blob)`, mod.relay, mod.direct);
  }
  console.log(`\nimages push when every node has it: ${median(noop).toFixed(2)} s (the CLI's own start is part of it)`);
} finally {
  await run(main0, ["down", "--all", "--grace", "1"], 120_000);
  rigDown();
  rmSync(dir, { recursive: true, force: true });
  rmSync(shared, { recursive: true, force: true });
}
