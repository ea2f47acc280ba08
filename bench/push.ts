// Sends a ~300 MB image from practice host n1 to 3 others, in one run, two ways: the plain way
// (`docker save | ssh NODE docker load`, one node after another) and `launcher images push` (one
// save streamed to all at once). Prints both wall times, the ratio, a push when every node
// already has the image, and where the time goes (save, transfer, load).
// Run as root: npx tsx bench/push.ts [--mib 200] [--rounds 2]
// Targets: launcher <= 0.7 x the serial time for 3 hosts; < 1 s when every node has the image.
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { launcher, onHost, RIG_DIR, rigDown, rigUp, variant } from "../test/integration/practice-cluster.js";

const { values } = parseArgs({ options: { mib: { type: "string", default: "200" }, rounds: { type: "string", default: "2" } } });
const MIB = Number(values.mib);
const ROUNDS = Number(values.rounds);
const IMAGE = "bench-fat:local";
const TARGETS = [2, 3, 4];

process.env.LAUNCHER_USE_DIST = "1";
spawnSync("npm", ["run", "build"], { stdio: "ignore" });
const dir = mkdtempSync(path.join(tmpdir(), "launcher-bench-push-"));
const env = { LAUNCHER_DOCKER_IMAGES: path.join(dir, "docker-images") };

/** Seconds a shell pipeline on this machine takes; the rig's ssh config is $1, the rest are args. */
function timed(script: string, ...args: string[]): number {
  const start = performance.now();
  const r = spawnSync("bash", ["-c", `set -o pipefail; ${script}`, "bash", path.join(RIG_DIR, "ssh_config"), ...args], { encoding: "utf8", maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${script} failed:\n${r.stderr}`);
  return (performance.now() - start) / 1000;
}
const removeFromTargets = (): void => {
  for (const i of TARGETS) onHost(i, ["sh", "-c", 'docker image rm "$1" >/dev/null 2>&1 || true', "sh", IMAGE]);
};
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

try {
  await rigUp(4);
  const folder = path.join(dir, "docker-images", "bench-fat");
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, "Dockerfile"), "FROM practice-engine:local\nCOPY fat.bin /fat.bin\n");
  // Random bytes: nothing on the way can compress them away.
  spawnSync("sh", ["-c", 'head -c "$1" /dev/urandom > "$2"', "sh", String(MIB << 20), path.join(folder, "fat.bin")]);
  const recipe = variant(dir, "bench-fat", "practice-2x", `docker_image = "${IMAGE}"\ndocker_image_dir = "bench-fat"\n`);
  const built = await launcher(["images", "build", recipe], 600_000, env);
  if (built.code !== 0) throw new Error(`build failed:\n${built.stderr}`);
  const bytes = Number(spawnSync("bash", ["-c", 'ssh -F "$1" lnch-n1 docker save "$2" | wc -c', "bash", path.join(RIG_DIR, "ssh_config"), IMAGE], { encoding: "utf8" }).stdout.trim());

  const serial: number[] = [];
  const pushed: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    removeFromTargets();
    serial.push(TARGETS.reduce((t, i) => t + timed('ssh -F "$1" lnch-n1 docker save "$2" | ssh -F "$1" "$3" docker load >/dev/null', IMAGE, `lnch-n${i}`), 0));
    removeFromTargets();
    const start = performance.now();
    const r = await launcher(["images", "push", recipe, "--json"], 600_000);
    if (r.code !== 0) throw new Error(`push failed:\n${r.stderr}`);
    pushed.push((performance.now() - start) / 1000);
  }
  const noop: number[] = [];
  for (let i = 0; i < 3; i++) {
    const start = performance.now();
    const r = await launcher(["images", "push", recipe, "--json"]);
    if (r.code !== 0) throw new Error(`push failed:\n${r.stderr}`);
    noop.push((performance.now() - start) / 1000);
  }

  // Where the time goes, each part alone.
  const save = median([0, 1, 2].map(() => timed('ssh -F "$1" lnch-n1 docker save "$2" >/dev/null', IMAGE)));
  const transfer = median([0, 1, 2].map(() => timed('ssh -F "$1" lnch-n1 docker save "$2" | ssh -F "$1" lnch-n2 "cat >/dev/null"', IMAGE)));
  timed('ssh -F "$1" lnch-n1 docker save "$2" | ssh -F "$1" lnch-n2 "cat > /tmp/launcher-bench-image.tar"', IMAGE);
  removeFromTargets();
  const load = timed('ssh -F "$1" lnch-n2 "docker load -i /tmp/launcher-bench-image.tar >/dev/null && rm -f /tmp/launcher-bench-image.tar"');

  const s = median(serial);
  const p = median(pushed);
  console.log(`\nimage ${IMAGE}: ${(bytes / 1048576).toFixed(0)} MiB, from n1 to ${TARGETS.length} practice hosts (all on this machine's 2 cores), median of ${ROUNDS}`);
  console.log(`serial (docker save | ssh NODE docker load, one node after another): ${s.toFixed(2)} s`);
  console.log(`launcher images push (one save, streamed to all at once):           ${p.toFixed(2)} s`);
  console.log(`ratio launcher / serial: ${(p / s).toFixed(2)} x   (target <= 0.7)`);
  console.log(`launcher images push when every node has it: ${median(noop).toFixed(2)} s   (target < 1 s; the CLI's own start is part of it)`);
  console.log(`\nwhere the time goes, each part alone on one node: save ${save.toFixed(2)} s; save + ssh transfer ${transfer.toFixed(2)} s; docker load ${load.toFixed(2)} s`);
  console.log(`serial pays save + transfer + load ${TARGETS.length} times (${(TARGETS.length * (transfer + load)).toFixed(2)} s estimated); launcher saves once and loads ${TARGETS.length} at once`);
} finally {
  await launcher(["down", "--all", "--grace", "1"]);
  rigDown();
  rmSync(dir, { recursive: true, force: true });
}
