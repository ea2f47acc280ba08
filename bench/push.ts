// Relay vs node to node, side by side in one run: a ~300 MB image (`launcher images push`) and a
// ~300 MB model (`launcher models sync`) from practice host n1 to 3 others, each way in turn
// (`--relay`: through this machine, as before; default: node to node over the fabric). For each:
// wall time, bytes through this machine (the root side of the hosts' management veths, both
// ways), and each node's rate as the progress reported it. Also: a push when every node already
// has the image.
// Run as root: npx tsx bench/push.ts [--mib 300] [--rounds 1]
// Targets: node to node <= 0.5 x the relay's time; bytes through this machine < 1% of the payload.
import { readFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { launcher, onHost, rigDown, rigUp, seedModel, variant } from "../test/integration/practice-cluster.js";

const { values } = parseArgs({ options: { mib: { type: "string", default: "300" }, rounds: { type: "string", default: "1" } } });
const MIB = Number(values.mib);
const ROUNDS = Number(values.rounds);
const IMAGE = "bench-fat:local";
const HOSTS = 4;
const TARGETS = [2, 3, 4];
const REPO = "models--practice--bench-moe";

process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-push-"));
const env = { LAUNCHER_DOCKER_IMAGES: path.join(dir, "docker-images") };

function managementBytes(): number {
  let sum = 0;
  for (let i = 1; i <= HOSTS; i++) for (const d of ["rx_bytes", "tx_bytes"]) sum += Number(readFileSync(`/sys/class/net/lnchm${i}/statistics/${d}`, "utf8").trim());
  return sum;
}

interface Measure {
  seconds: number;
  through: number;
  payload: number;
  rates: Map<string, string>;
  paths: Map<string, string>;
}

/** One run of the CLI, timed, with the bytes through this machine and each node's last progress line. */
async function measure(args: string[]): Promise<Measure> {
  const before = managementBytes();
  const start = performance.now();
  const r = await launcher(args, 900_000);
  const seconds = (performance.now() - start) / 1000;
  if (r.code !== 0) throw new Error(`launcher ${args.join(" ")} failed:\n${r.stderr}`);
  const through = managementBytes() - before;
  const nodes = (JSON.parse(r.stdout) as { nodes: { node: string; bytes: number; path?: string; from?: string }[] }).nodes;
  const rates = new Map<string, string>();
  for (const m of r.stderr.matchAll(/^ +(n\d+) +[\d.]+ MiB +([\d.]+ MiB\/s) +done/gm)) rates.set(m[1] as string, m[2] as string);
  const paths = new Map(nodes.filter((n) => n.path !== undefined).map((n) => [n.node, n.path === "relay" ? "relay" : `${n.from ?? "?"}->${n.node} ${n.path}`]));
  return { seconds, through, payload: Math.max(...nodes.map((n) => n.bytes)), rates, paths };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;
const mb = (b: number): string => `${(b / 1048576).toFixed(1)} MiB`;

function print(what: string, relay: Measure[], direct: Measure[]): void {
  const row = (name: string, ms: Measure[]): void => {
    const m = ms[ms.length - 1] as Measure;
    const t = median(ms.map((x) => x.seconds));
    const rates = TARGETS.map((i) => `n${i} ${m.rates.get(`n${i}`) ?? "?"}`).join(", ");
    console.log(`  ${name.padEnd(13)} ${t.toFixed(2).padStart(7)} s   through this machine ${mb(m.through).padStart(11)} (${((100 * m.through) / m.payload).toFixed(2)}% of ${mb(m.payload)})   rates: ${rates}`);
  };
  console.log(`\n${what}, from n1 to ${TARGETS.length} practice hosts (all on this machine's cores), median of ${ROUNDS}:`);
  row("relay", relay);
  row("node to node", direct);
  const ratio = median(direct.map((x) => x.seconds)) / median(relay.map((x) => x.seconds));
  console.log(`  ratio node to node / relay: ${ratio.toFixed(2)} x   (target <= 0.5); paths: ${[...(direct[direct.length - 1] as Measure).paths.values()].join(", ")}`);
}

try {
  await rigUp(HOSTS);
  const folder = path.join(dir, "docker-images", "bench-fat");
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, "Dockerfile"), "FROM practice-engine:local\nCOPY fat.bin /fat.bin\n");
  // Random bytes: nothing on the way can compress them away.
  spawnSync("sh", ["-c", 'head -c "$1" /dev/urandom > "$2"', "sh", String(MIB << 20), path.join(folder, "fat.bin")]);
  const recipe = variant(dir, "bench-fat", "practice-2x", `docker_image = "${IMAGE}"\ndocker_image_dir = "bench-fat"\nmodel = "practice/bench-moe"\n`);
  const built = await launcher(["images", "build", recipe], 600_000, env);
  if (built.code !== 0) throw new Error(`build failed:\n${built.stderr}`);
  seedModel(1, MIB << 20, REPO);

  const dropImage = (): void => {
    for (const i of TARGETS) onHost(i, ["sh", "-c", 'docker image rm "$1" >/dev/null 2>&1 || true', "sh", IMAGE]);
  };
  const dropModel = (): void => {
    for (const i of TARGETS) onHost(i, ["rm", "-rf", `/home/lnchu${i}/.cache/practice/huggingface/hub/${REPO}`]);
  };
  const img = { relay: [] as Measure[], direct: [] as Measure[] };
  const mod = { relay: [] as Measure[], direct: [] as Measure[] };
  for (let round = 0; round < ROUNDS; round++) {
    dropImage();
    img.relay.push(await measure(["images", "push", recipe, "--relay", "--json"]));
    dropImage();
    img.direct.push(await measure(["images", "push", recipe, "--json"]));
    dropModel();
    mod.relay.push(await measure(["models", "sync", recipe, "--relay", "--json"]));
    dropModel();
    mod.direct.push(await measure(["models", "sync", recipe, "--json"]));
  }
  const noop: number[] = [];
  for (let i = 0; i < 3; i++) {
    const start = performance.now();
    const r = await launcher(["images", "push", recipe, "--json"]);
    if (r.code !== 0) throw new Error(`push failed:\n${r.stderr}`);
    noop.push((performance.now() - start) / 1000);
  }
  print(`image ${IMAGE} (${MIB} MiB of random bytes over practice-engine)`, img.relay, img.direct);
  print(`model ${REPO} (${MIB} MiB blob)`, mod.relay, mod.direct);
  console.log(`\nimages push when every node has it: ${median(noop).toFixed(2)} s (the CLI's own start is part of it)`);
} finally {
  await launcher(["down", "--all", "--grace", "1"]);
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
