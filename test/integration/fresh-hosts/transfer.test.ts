import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { withDockerApi } from "../../../src/transfer/docker-api.js";
import { legacyLayerIds } from "../../../src/transfer/layers.js";
import { launcher, launcherProcess, ok, onHost, onHostRun, PRACTICE_REVISION, practiceSuite, RIG_DIR, seedModel, slowLinks, variant, within } from "../practice-cluster.js";

// Node to node: images and weights go from n1 to n2..n4 over the fabric, not through this machine.
const HOSTS = 4;
const TARGETS = [2, 3, 4];
// Fresh hosts, not the shared ones (practiceSuite): the file cuts n4's fabric link, slows n2's and removes n4's practice image.
const dir = practiceSuite(HOSTS, "launcher-p2p-");
const images = path.join(dir, "docker-images");
const env = { LAUNCHER_DOCKER_IMAGES: images };
const HUB = ".cache/practice/huggingface/hub";

/** Bytes both ways through this machine's links to the hosts: the root side of every management veth. */
function managementBytes(): number {
  let sum = 0;
  for (let i = 1; i <= HOSTS; i++) {
    for (const dir of ["rx_bytes", "tx_bytes"]) sum += Number(readFileSync(`/sys/class/net/lnchm${i}/statistics/${dir}`, "utf8").trim());
  }
  return sum;
}

const idOn = (i: number, image: string): string => onHost(i, ["sh", "-c", 'docker image inspect --format "{{.Id}}" "$1" 2>/dev/null || true', "sh", image]).trim();
const snapshotSums = (i: number, repo: string): string => onHost(i, ["sh", "-c", 'cd "$HOME/$1/snapshots/$2" && sha256sum -- * | sort', "sh", `${HUB}/${repo}`, PRACTICE_REVISION]);

interface Pushed { nodes: { node: string; action: string; bytes: number; path?: string; from?: string; why?: string }[]; layers_not_sent?: number }
const layerCount = (i: number, image: string): number => Number(onHost(i, ["docker", "image", "inspect", "--format", "{{len .RootFS.Layers}}", "--", image]).trim());
interface Synced { nodes: { node: string; action: string; bytes: number; resumed_bytes: number; path?: string; from?: string; why?: string }[] }

/** A recipe whose image is practice-engine plus `mib` MiB of random bytes (nothing can compress them away). */
function fatImage(name: string, mib: number): string {
  const folder = path.join(images, name);
  mkdirSync(folder, { recursive: true });
  writeFileSync(path.join(folder, "Dockerfile"), "FROM practice-engine:local\nCOPY fat.bin /fat.bin\n");
  spawnSync("sh", ["-c", 'head -c "$1" /dev/urandom > "$2"', "sh", String(mib << 20), path.join(folder, "fat.bin")]);
  return variant(dir, `recipe-${name}`, "practice-2x", `docker_image = "${name}:local"\ndocker_image_dir = "${name}"\n`);
}

describe("node to node transfers on the practice cluster", { concurrency: false }, () => {
  test("images push to 3 hosts: a chain over the fabric, under 1% of the payload through this machine, every ID checked", async (t) => {
    const recipe = fatImage("p2p-fat", 96);
    ok(await launcher(["images", "build", recipe], 240_000, env), "build");
    const before = managementBytes();
    const r = ok(await launcher(["images", "push", recipe, "--json"], 240_000), "push");
    const through = managementBytes() - before;
    const result = JSON.parse(r.stdout) as Pushed;
    assert.deepEqual(result.nodes.map((n) => [n.node, n.action, n.path, n.from]), [["n2", "sent", "fabric", "n1"], ["n3", "sent", "fabric", "n2"], ["n4", "sent", "fabric", "n3"]]);
    const payload = result.nodes[0]?.bytes ?? 0;
    // practice-engine's layers are on every node (pushed when the rig came up): only the new one goes.
    assert.equal(result.layers_not_sent, layerCount(1, "practice-engine:local"), r.stderr);
    assert.ok(payload > 96 << 20 && payload < 97 << 20, `the new layer and no other went: ${payload}`);
    assert.match(r.stderr, /left out \d+ of the image's \d+ layers \([\d.]+ MiB\): every node stores them already/);
    t.diagnostic(`image: ${through} bytes through this machine for ${payload} bytes to each of 3 nodes`);
    assert.ok(through < payload / 100, `${through} bytes crossed this machine's management links for a ${payload}-byte image`);
    for (const i of TARGETS) assert.equal(idOn(i, "p2p-fat:local"), idOn(1, "p2p-fat:local"), `n${i}`);
    assert.match(r.stderr, /n4 +[\d.]+ MiB +[\d.]+ MiB\/s +done +from n3 over fabric/, "progress per node: bytes, rate and path");
  });

  test("images push --relay leaves out the layers every node stores too; a node that lacks them makes the archive whole", async () => {
    const recipe = fatImage("p2p-thin", 8);
    ok(await launcher(["images", "build", recipe], 240_000, env), "build");
    const relayed = JSON.parse(ok(await launcher(["images", "push", recipe, "--relay", "--json", "--nodes", "n1,n2"], 240_000), "push --relay").stdout) as Pushed;
    assert.equal(relayed.layers_not_sent, layerCount(1, "practice-engine:local"));
    const sent = relayed.nodes.find((n) => n.node === "n2")?.bytes ?? 0;
    assert.ok(sent > 8 << 20 && sent < 9 << 20, `only the new layer went: ${sent}`);
    assert.equal(idOn(2, "p2p-thin:local"), idOn(1, "p2p-thin:local"));
    // n3 loses every image (and so every layer): nothing is common to n3 and n4, the whole archive goes.
    onHost(3, ["sh", "-c", "docker image rm --force $(docker image ls --all --quiet) >/dev/null 2>&1; docker image prune --all --force >/dev/null; true"]);
    try {
      const whole = JSON.parse(ok(await launcher(["images", "push", recipe, "--json", "--nodes", "n1,n3,n4"], 240_000), "push").stdout) as Pushed;
      assert.equal(whole.layers_not_sent, undefined);
      for (const i of [3, 4]) assert.equal(idOn(i, "p2p-thin:local"), idOn(1, "p2p-thin:local"), `n${i}`);
      assert.ok((whole.nodes.find((n) => n.node === "n3")?.bytes ?? 0) > 20 << 20, "the base went too");
    } finally {
      ok(await launcher(["images", "push", "practice-2x", "--nodes", "n1,n3"], 240_000), "practice-engine back on n3");
    }
  });

  test("the layer file names launcher leaves out are the ones this Docker's save writes (src/transfer/layers.ts)", () => {
    const diffIds = JSON.parse(onHost(1, ["docker", "image", "inspect", "--format", "{{json .RootFS.Layers}}", "--", "practice-engine:local"])) as string[];
    const epoch = onHost(1, ["date", "-d", "@0", "+%:z"]).trim();
    // Saved the way the push saves (docker-api.ts).
    const entries = new Set(onHost(1, withDockerApi("sh", 'docker_api save "$1" | tar -t', ["practice-engine:local"])).split("\n").filter((l) => l !== ""));
    const legacy = legacyLayerIds(diffIds, epoch).map((id) => `${id}/layer.tar`);
    const oci = diffIds.map((d) => `blobs/sha256/${d.slice("sha256:".length)}`);
    // Docker before 25 writes the legacy form, later ones the OCI form: one of them, whole.
    const form = legacy.every((n) => entries.has(n)) ? "legacy" : oci.every((n) => entries.has(n)) ? "oci" : "neither";
    assert.notEqual(form, "neither", `none of ${[...legacy, ...oci].join(", ")} in ${[...entries].join(", ")}`);
    assert.ok(diffIds.length > 1, "practice-engine has layers before its last");
  });

  test("models sync to 3 hosts: a chain over the fabric, under 1% through this machine, every blob's SHA-256 checked", async (t) => {
    const recipe = variant(dir, "p2p-model", "practice-2x", `model = "practice/p2p-moe"\n`);
    seedModel(1, 96 << 20, "models--practice--p2p-moe");
    const before = managementBytes();
    const r = ok(await launcher(["models", "sync", recipe, "--json"], 240_000), "sync");
    const through = managementBytes() - before;
    const result = JSON.parse(r.stdout) as Synced;
    assert.deepEqual(result.nodes.map((n) => [n.node, n.action, n.path, n.from]), [["n1", "had", undefined, undefined], ["n2", "copied", "fabric", "n1"], ["n3", "copied", "fabric", "n2"], ["n4", "copied", "fabric", "n3"]]);
    const payload = result.nodes[1]?.bytes ?? 0;
    assert.ok(payload > 96 << 20, `every blob went: ${payload}`);
    t.diagnostic(`weights: ${through} bytes through this machine for ${payload} bytes to each of 3 nodes`);
    assert.ok(through < payload / 100, `${through} bytes crossed this machine's management links for ${payload} bytes of weights`);
    for (const i of TARGETS) assert.equal(snapshotSums(i, "models--practice--p2p-moe"), snapshotSums(1, "models--practice--p2p-moe"), `n${i}`);
  });

  test("a node whose fabric address cannot be reached gets the image through this machine, and the output says why", async () => {
    onHost(4, ["docker", "image", "rm", "practice-engine:local"]);
    const link = (state: "up" | "down") => spawnSync("ip", ["link", "set", "lnchf4", state], { encoding: "utf8" });
    assert.equal(link("down").status, 0);
    try {
      const r = ok(await launcher(["images", "push", "practice-2x", "--json"], 240_000), "push");
      const n4 = (JSON.parse(r.stdout) as Pushed).nodes.find((n) => n.node === "n4");
      assert.equal(n4?.path, "relay");
      assert.match(n4?.why ?? "", /fabric address 10\.232\.0\.14:\d+ not reachable from n1/);
      assert.match(r.stderr, /n4 +through this machine: fabric address 10\.232\.0\.14:\d+ not reachable from n1/);
      assert.equal(idOn(4, "practice-engine:local"), idOn(1, "practice-engine:local"));
    } finally {
      link("up");
    }
  });

  test("an image's archive goes straight from and to each node's Docker socket, with no docker CLI in the byte path, and fails in the daemon's own words", () => {
    const work = mkdtempSync(path.join(tmpdir(), "launcher-docker-api-"));
    try {
      // Every host's user reads and writes there (the hosts share this machine's files).
      chmodSync(work, 0o1777);
      // A docker that refuses to save or load: whatever still works went to the daemon's socket.
      const bin = path.join(work, "bin");
      mkdirSync(bin, { mode: 0o755 });
      const real = onHost(1, ["sh", "-c", "command -v docker"]).trim();
      writeFileSync(path.join(bin, "docker"), `#!/bin/sh\ncase $1 in save|load) echo "the docker CLI was asked to $1" >&2; exit 99 ;; esac\nexec ${real} "$@"\n`, { mode: 0o755 });
      const file = path.join(work, "engine.tar");
      const run = (i: number, script: string, args: string[], input = "") => onHostRun(i, withDockerApi("sh", `PATH=$1:$PATH; shift; umask 022; ${script}`, [bin, ...args]), input, 120_000);
      const saved = run(1, 'docker_api save "$1" > "$2"', ["practice-engine:local", file]);
      assert.equal(saved.code, 0, saved.stderr);
      assert.ok(spawnSync("tar", ["-tf", file], { encoding: "utf8" }).stdout.split("\n").includes("manifest.json"), "an archive as docker save writes it");
      // Loaded on n2 (which has it: the load still reads it all and says so, as `docker load --quiet` does).
      const loaded = run(2, 'docker_api load < "$1"', [file]);
      assert.equal(loaded.code, 0, loaded.stderr);
      assert.equal(loaded.stdout, "Loaded image: practice-engine:local\n");
      // The daemon's refusals, word for word as the CLI prints them.
      const cli = (i: number, argv: string[], input = "") => onHostRun(i, argv, input).stderr.trim();
      const missing = run(1, 'docker_api save "$1"', ["nope:missing"]);
      assert.equal(missing.code, 1);
      assert.equal(missing.stderr.trim(), cli(1, ["docker", "save", "--", "nope:missing"]));
      const garbage = run(2, "docker_api load", [], "not an archive\n");
      assert.equal(garbage.code, 1);
      assert.equal(garbage.stderr.trim(), cli(2, ["docker", "load", "--quiet"], "not an archive\n"));
      // A daemon that runs out of room while it unpacks stops reading: the load fails with its words.
      // (dockerd runs in this machine's mount namespace: the tmpfs covers its temporary folder.)
      const tmp = path.join(onHost(2, ["docker", "info", "--format", "{{.DockerRootDir}}"]).trim(), "tmp");
      assert.equal(spawnSync("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", tmp]).status, 0);
      try {
        const full = run(2, 'docker_api load < "$1"', [file]);
        assert.equal(full.code, 1, full.stdout);
        assert.match(full.stderr, /no space left on device/);
        assert.equal(full.stdout, "", "nothing said to be loaded");
      } finally {
        // Left mounted, it would fail every later push to n2 far from here.
        assert.equal(spawnSync("umount", [tmp]).status, 0, `umount ${tmp}`);
      }
      // Where the CLI talks to anything but a local socket, the CLI does the work (here: refuses it).
      const tcp = run(2, 'DOCKER_HOST=tcp://127.0.0.1:9; export DOCKER_HOST; docker_api load < "$1"', [file]);
      assert.equal(tcp.code, 99);
      assert.match(tcp.stderr, /the docker CLI was asked to load/);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  });

  test("a destination without room for the image: an error naming node and path before any byte moves; the source's save, started early, leaves nothing running", async () => {
    // An image of its own, with an 8 MiB layer no host stores (16 MiB needed: it is unpacked once, then stored).
    const recipe = fatImage("p2p-room", 8);
    ok(await launcher(["images", "build", recipe], 240_000, env), "build");
    const root = onHost(4, ["docker", "info", "--format", "{{.DockerRootDir}}"]).trim();
    // A 4 MiB filesystem over Docker's root as n4's sshd (and so launcher's probe) sees it; dockerd
    // runs in the machine's own mount namespace and keeps its real folder.
    const inHost = (...argv: string[]) => spawnSync("nsenter", [`--mount=/proc/${readFileSync(path.join(RIG_DIR, "hosts", "n4", "sshd.pid"), "utf8").trim()}/ns/mnt`, "--", ...argv], { encoding: "utf8" });
    const mounted = inHost("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", root);
    assert.equal(mounted.status, 0, mounted.stderr);
    const since = (Date.now() / 1000).toFixed(3);
    try {
      const r = await launcher(["images", "push", recipe, "--nodes", "n4"], 120_000);
      assert.equal(r.code, 1, r.stderr);
      assert.ok(r.stderr.includes(`n4: ${root} has 4.0 MiB free, needs`), r.stderr);
      assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/, "no stack trace");
    } finally {
      inHost("umount", root);
    }
    assert.equal(idOn(4, "p2p-room:local"), "", "nothing was loaded on n4");
    // The source's hop (and its docker save) began before the check said no (Docker logs the save
    // once its export is written: moby image/tarexport/save.go, events.ActionSave): it is gone once
    // that export, which runs to its end, meets the closed pipe; so is Docker's export folder.
    const saved = (): string => onHost(1, ["docker", "events", "--since", since, "--until", (Date.now() / 1000).toFixed(3), "--filter", "type=image", "--filter", "event=save", "--format", "{{.Action}}"]).trim();
    const running = (): string => spawnSync("pgrep", ["-a", "-u", "lnchu1", "-f", "docker save|hop=\\$1|docker_api"], { encoding: "utf8" }).stdout.trim();
    const exports = (): string[] => readdirSync(path.join(RIG_DIR, "hosts", "n1", "docker-data", "tmp")).filter((f) => f.startsWith("docker-export-"));
    await within(60_000, "n1's save to start and end, and its hop with it", async () => (saved() !== "" && running() === "" && exports().length === 0 ? true : undefined));
    // Then the push goes through, from a clean start.
    ok(await launcher(["images", "push", recipe, "--nodes", "n4"], 240_000), "push");
    assert.equal(idOn(4, "p2p-room:local"), idOn(1, "p2p-room:local"));
  });

  test("a destination without room for the weights: an error naming the node and path before any byte moves", async () => {
    const repo = "models--practice--p2p-space";
    seedModel(1, 16 << 20, repo);
    const mount = `/home/lnchu4/${HUB}/${repo}`;
    onHost(4, ["mkdir", "-p", mount]);
    // A 4 MiB filesystem there, mounted where n4's sshd (and so launcher's sessions) sees it: the rig
    // starts sshd through `ip netns exec`, which gives it a mount namespace of its own.
    const inHost = (...argv: string[]) => spawnSync("nsenter", [`--mount=/proc/${readFileSync(path.join(RIG_DIR, "hosts", "n4", "sshd.pid"), "utf8").trim()}/ns/mnt`, "--", ...argv], { encoding: "utf8" });
    const mounted = inHost("mount", "-t", "tmpfs", "-o", "size=4m,mode=0777", "tmpfs", mount);
    assert.equal(mounted.status, 0, mounted.stderr);
    try {
      const recipe = variant(dir, "p2p-space", "practice-2x", `model = "practice/p2p-space"\n`);
      const r = await launcher(["models", "sync", recipe, "--nodes", "n1,n4"], 120_000);
      assert.equal(r.code, 1, r.stderr);
      assert.ok(r.stderr.includes(`n4: ${mount} has 4.0 MiB free, needs 16.0 MiB`), r.stderr);
      assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/, "no stack trace");
      assert.equal(onHost(4, ["sh", "-c", 'ls -A "$1/blobs" 2>/dev/null | wc -l', "sh", mount]).trim(), "0", "nothing was sent");
    } finally {
      inHost("umount", mount);
    }
  });

  test("models sync node to node, interrupted and resumed from the bytes already there", async (t) => {
    const repo = "models--practice--p2p-resume";
    seedModel(1, 96 << 20, repo);
    const recipe = variant(dir, "p2p-resume", "practice-2x", `model = "practice/p2p-resume"\n`);
    const partial = () => Number(onHost(2, ["sh", "-c", 'stat -c %s "$HOME/$1"/blobs/*.launcher-partial 2>/dev/null | sort -n | tail -1 || true', "sh", `${HUB}/${repo}`]).trim() || "0");
    // The fabric to n2 slowed to ~40 Mbit/s, so there is a transfer in flight to interrupt.
    const unshape = slowLinks(2, ["f"], ["tbf", "rate", "40mbit", "burst", "64kb", "latency", "400ms"]);
    try {
      const first = launcherProcess(["models", "sync", recipe, "--nodes", "n1,n2"]);
      const exited = new Promise<number | null>((resolve) => first.on("close", resolve));
      // A failed wait below must not leave the sync running past the test (as pull.test.ts does).
      t.after(() => void (first.exitCode === null && first.signalCode === null && first.kill("SIGKILL")));
      await within(60_000, "part of the big blob on n2", async () => (partial() > 4 << 20 ? true : undefined));
      first.kill("SIGTERM");
      assert.equal(await exited, 143);
    } finally {
      unshape();
    }
    const kept = partial();
    assert.ok(kept > 4 << 20 && kept < 96 << 20, `a partial blob of ${kept} bytes stays`);
    const r = ok(await launcher(["models", "sync", recipe, "--nodes", "n1,n2", "--json"], 240_000), "resumed sync");
    const n2 = (JSON.parse(r.stdout) as Synced).nodes.find((n) => n.node === "n2");
    assert.equal(n2?.path, "fabric");
    assert.ok((n2?.resumed_bytes ?? 0) >= kept, "resumed from the bytes already there");
    assert.ok((n2?.bytes ?? Infinity) < (96 << 20) - kept + 4096, `sent only the rest: ${n2?.bytes}`);
    assert.equal(snapshotSums(2, repo), snapshotSums(1, repo));
  });
});
