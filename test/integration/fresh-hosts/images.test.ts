import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { CLUSTER, launcher, launcherContainers, launcherProcess, onHost, PRACTICE_REVISION, RIG_DIR, seedModel, slowLinks, variant, within, ok, practiceSuite } from "../practice-cluster.js";

// Images on a 3-host practice cluster: FROM chains, pushes that skip what is there, up's preflight.
const HOSTS = 3;
// Fresh hosts, not the shared ones (practiceSuite): the file changes n3's MTU, cuts its link, slows
// it and removes the practice image; ssh gives up on the cut host in seconds. Not as soon as
// QUICK_SILENCE_SSH: this file also slows a link and loads images on 2 cores, so a host that
// answers may be busy for a few seconds; 3 keepalives 2 s apart allow it 6 s.
const PATIENT_SSH = ["ConnectTimeout=5", "ServerAliveInterval=2", "ServerAliveCountMax=3"];
const dir = practiceSuite(HOSTS, "launcher-img-", { sshOptions: PATIENT_SSH });
const images = path.join(dir, "docker-images");
const env = { LAUNCHER_DOCKER_IMAGES: images };


const idOn = (i: number, image: string): string => onHost(i, ["sh", "-c", 'docker image inspect --format "{{.Id}}" "$1" 2>/dev/null || true', "sh", image]).trim();

/** An image folder of the test's own, and a recipe that uses it. */
function overlay(name: string, dockerfile: string): string {
  mkdirSync(path.join(images, name), { recursive: true });
  writeFileSync(path.join(images, name, "Dockerfile"), dockerfile);
  writeFileSync(path.join(images, name, "overlay.txt"), `${name}\n`);
  return variant(dir, `recipe-${name}`, "practice-2x", `docker_image = "${name}:local"\ndocker_image_dir = "${name}"\n`);
}

describe("images, weights and the fabric on the practice cluster", { concurrency: false }, () => {
  test("images: per node, the ID and whether they agree", async () => {
    const r = ok(await launcher(["images", "practice-2x", "--json"]), "images");
    const report = JSON.parse(r.stdout) as { consistent: boolean; nodes: { node: string; id?: string }[] };
    assert.equal(report.consistent, true);
    assert.deepEqual(report.nodes.map((n) => n.node), ["n1", "n2", "n3"]);
    assert.equal(new Set(report.nodes.map((n) => n.id)).size, 1);
    assert.match(report.nodes[0]?.id ?? "", /^sha256:[0-9a-f]{64}$/);
  });

  test("build: a thin FROM over another of our folders builds that base first when the node lacks it", async () => {
    const recipe = overlay("practice-overlay", "FROM practice-engine:local\nCOPY overlay.txt /app/overlay.txt\n");
    onHost(1, ["docker", "image", "rm", "practice-engine:local"]);
    try {
      assert.equal(idOn(1, "practice-engine:local"), "");
      const r = ok(await launcher(["images", "build", recipe, "--json"], 240_000, env), "build");
      const built = JSON.parse(r.stdout) as { node: string; built: { folder: string; image: string }[] };
      assert.equal(built.node, "n1");
      assert.deepEqual(built.built, [{ folder: "practice-engine", image: "practice-engine:local" }, { folder: "practice-overlay", image: "practice-overlay:local" }]);
      assert.match(idOn(1, "practice-overlay:local"), /^sha256:/);
      assert.match(onHost(1, ["docker", "run", "--rm", "--entrypoint", "/usr/local/bin/vllm", "practice-overlay:local", "-e", "process.stdout.write(require('fs').readFileSync('/app/overlay.txt','utf8'))"]), /practice-overlay/);

      // Built again with the base there: only the overlay.
      const again = JSON.parse(ok(await launcher(["images", "build", recipe, "--json"], 240_000, env), "rebuild").stdout) as { built: { folder: string }[] };
      assert.deepEqual(again.built.map((b) => b.folder), ["practice-overlay"]);
    } finally {
      // n1 is every later push's source: if the build above failed, give it the engine image back and
      // send it to the others so the nodes agree again.
      if (idOn(1, "practice-engine:local") === "") {
        await launcher(["images", "build", "practice-2x"], 240_000);
        await launcher(["images", "push", "practice-2x"], 240_000);
      }
    }
  });

  test("build: a base that is neither on the node nor buildable is a clear error", async () => {
    const recipe = overlay("orphan", "FROM nowhere-base:local\nCOPY overlay.txt /overlay.txt\n");
    const r = await launcher(["images", "build", recipe], 60_000, env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /docker-images\/orphan\/Dockerfile starts FROM nowhere-base:local, which is not on n1 and which no docker-images\/ folder builds/);
    assert.doesNotMatch(r.stderr, /at .*\.ts:\d+/, "no stack trace");
  });

  test("push: only the node with a stale image receives bytes; the one with the right ID costs nothing", async () => {
    // The build above made a new practice-engine on n1: start from every node holding it.
    ok(await launcher(["images", "push", "practice-2x"], 240_000), "first push");
    const right = idOn(1, "practice-engine:local");
    try {
      // n2: another build under the same tag (stale); n3 keeps the right one.
      onHost(2, ["sh", "-c", 'printf "FROM practice-engine:local\\nLABEL stale=yes\\n" | docker build --quiet --tag practice-engine:local - >/dev/null']);
      assert.notEqual(idOn(2, "practice-engine:local"), right);
      assert.equal(idOn(3, "practice-engine:local"), right);
      const r = ok(await launcher(["images", "push", "practice-2x", "--json"], 240_000), "push");
      const result = JSON.parse(r.stdout) as { source: string; id: string; nodes: { node: string; action: string; bytes: number }[]; layers_not_sent?: number };
      assert.equal(result.source, "n1");
      assert.equal(result.id, right);
      const byNode = new Map(result.nodes.map((n) => [n.node, n]));
      assert.equal(byNode.get("n2")?.action, "sent");
      // n2's stale build is FROM the right image, so n2 stores its layers: the archive leaves them out
      // (all but the last under a Docker before 25, src/transfer/layers.ts), and the image is still whole there.
      const layers = Number(onHost(1, ["docker", "image", "inspect", "--format", "{{len .RootFS.Layers}}", "practice-engine:local"]).trim());
      assert.ok((result.layers_not_sent ?? 0) >= layers - 1, r.stderr);
      assert.ok((byNode.get("n2")?.bytes ?? 0) > 0, "the image went to n2");
      assert.deepEqual([byNode.get("n3")?.action, byNode.get("n3")?.bytes], ["had", 0]);
      for (const i of [1, 2, 3]) assert.equal(idOn(i, "practice-engine:local"), right, `n${i}`);
      assert.match(r.stderr, /n2 +[\d.]+ MiB +[\d.]+ MiB\/s +done/, "progress per node with bytes and rate");

      const noop = JSON.parse(ok(await launcher(["images", "push", "practice-2x", "--json"]), "push again").stdout) as { nodes: { action: string }[] };
      assert.deepEqual(noop.nodes.map((n) => n.action), ["had", "had"]);
    } finally {
      // A failure above must not leave n2 with the stale image for later tests to boot (a no-op when it passed).
      await launcher(["images", "push", "practice-2x"], 240_000);
    }
  });

  test("up with a node missing the image: --no-push refuses before any container starts; by default it is sent first", async () => {
    onHost(3, ["docker", "image", "rm", "practice-engine:local"]);
    try {
      const refused = await launcher(["up", "practice-2x", "--nodes", "n1,n3", "--no-push"]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /image practice-engine:local is missing on n3/);
      assert.match(refused.stderr, /no container was started/);
      assert.deepEqual(launcherContainers(HOSTS), []);

      const r = ok(await launcher(["up", "practice-2x", "--nodes", "n1,n3"], 240_000), "up");
      assert.match(r.stderr, /image practice-engine:local: sending it from n1 to n3/);
      assert.equal(idOn(3, "practice-engine:local"), idOn(1, "practice-engine:local"));
      assert.deepEqual(launcherContainers(HOSTS), ["n1:launcher-practice-2x-r0:running", "n3:launcher-practice-2x-r1:running"]);
      ok(await launcher(["down", "practice-2x"]), "down");
    } finally {
      // Left running, practice-2x holds n1,n3 and later tests get "held by" instead of what they check.
      await launcher(["down", "deployment/practice-2x", "--grace", "1"]);
      if (idOn(3, "practice-engine:local") === "") await launcher(["images", "push", "practice-2x"], 240_000);
    }
  });

  test("doctor: each host's fabric interface, IP and MTU detected end to end; plan and up use them", async () => {
    // The cluster file without fabric_iface: detection has to find it on each host.
    const file = path.join(RIG_DIR, "cluster-detect.toml");
    writeFileSync(file, readFileSync(CLUSTER, "utf8").replace(/^fabric_iface = .*$/gm, ""));
    const r = ok(await launcher(["doctor", "--cluster", file, "--json"]), "doctor");
    const report = JSON.parse(r.stdout) as {
      ok: boolean;
      nodes: { node: string; ssh: boolean; docker?: { version: string }; facts: { fabric_iface?: string; fabric_ip?: string; mtu?: number }; peers: Record<string, boolean> }[];
      env: Record<string, Record<string, string>>;
      findings: { severity: string; node: string; message: string }[];
    };
    assert.equal(report.ok, true);
    for (const [i, n] of report.nodes.entries()) {
      assert.deepEqual(n.facts, { fabric_iface: "enp1s0f1np1", fabric_ip: `10.232.0.${11 + i}`, mtu: 9000, hca: [], ports_up: 0 }, n.node);
      assert.match(n.docker?.version ?? "", /^\d+\./);
      assert.deepEqual(Object.values(n.peers), [true, true], `${n.node} reaches both peers`);
      assert.equal(report.env[n.node]?.NCCL_SOCKET_IFNAME, "enp1s0f1np1");
      assert.equal(report.env[n.node]?.VLLM_HOST_IP, `10.232.0.${11 + i}`, "each node its own IP");
    }
    // No RDMA and no GPU on a practice host: said, but only as a warning.
    assert.deepEqual([...new Set(report.findings.map((f) => f.severity))], ["warning"]);
    assert.match(report.findings[0]?.message ?? "", /no RoCE HCA found/);

    const plan = ok(await launcher(["plan", "practice-2x", "--cluster", file, "--json"]), "plan");
    // Only what detection really gave is called detected: the interface (the file keeps fabric_ip).
    assert.match(plan.stderr, /detected on the nodes at \S+ \(.*\): n1: fabric_iface enp1s0f1np1; n2: fabric_iface enp1s0f1np1\n/);
    assert.doesNotMatch(plan.stderr, /fabric_ip/);
    const nodes = (JSON.parse(plan.stdout) as { nodes: { node: string; env: Record<string, string> }[] }).nodes;
    assert.deepEqual(nodes.map((n) => n.env.GLOO_SOCKET_IFNAME), ["enp1s0f1np1", "enp1s0f1np1"]);
  });

  test("doctor and up: an MTU that differs on one host is an error naming it and the fix; up starts nothing", async () => {
    const mtu = (value: number) => spawnSync("ip", ["netns", "exec", "lnch-n3", "ip", "link", "set", "enp1s0f1np1", "mtu", String(value)], { encoding: "utf8" });
    assert.equal(mtu(1500).status, 0);
    try {
      const r = await launcher(["doctor", "--json"]);
      assert.equal(r.code, 1);
      const findings = (JSON.parse(r.stdout) as { findings: { severity: string; node: string; message: string; fix: string }[] }).findings.filter((f) => f.severity === "error");
      assert.deepEqual(findings.map((f) => f.node), ["n3"]);
      assert.match(findings[0]?.message ?? "", /fabric MTU 1500 differs from the other nodes' 9000/);
      assert.match(findings[0]?.fix ?? "", /ip link set DEV mtu 9000/);
      const text = await launcher(["doctor"]);
      assert.match(text.stdout, /^n3 .* mtu 1500 /m);
      assert.match(text.stdout, /error: n3: fabric MTU 1500/);
      const up = await launcher(["up", "practice-2x", "--nodes", "n1,n3"]);
      assert.equal(up.code, 1);
      assert.match(up.stderr, /the fabric check failed; no container was started:\n  - n3: fabric MTU 1500 differs/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      mtu(9000);
      // Only if the fabric check broke and up booted: practice-2x must not hold n1,n3 for later tests.
      await launcher(["down", "deployment/practice-2x", "--grace", "1"]);
    }
  });

  test("weights: with HF_HUB_OFFLINE=1, a node without the model fails preflight with the path it looked in", async () => {
    const repo = ".cache/practice/huggingface/hub/models--practice--tiny-moe";
    onHost(3, ["sh", "-c", 'mv "$HOME/$1" "$HOME/$1.away"', "sh", repo]);
    try {
      const report = JSON.parse(ok(await launcher(["models", "practice-2x", "--json"]), "models").stdout) as { nodes: { node: string; present: boolean; revision?: string; path: string }[] };
      assert.deepEqual(report.nodes.map((n) => [n.node, n.present, n.revision]), [["n1", true, PRACTICE_REVISION], ["n2", true, PRACTICE_REVISION], ["n3", false, undefined]]);
      const r = await launcher(["up", "practice-2x", "--nodes", "n1,n3"]);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /n3: model practice\/tiny-moe is not in its Hugging Face cache \(looked in \/home\/lnchu3\/\.cache\/practice\/huggingface\/hub\/models--practice--tiny-moe: no folder\); HF_HUB_OFFLINE=1 forbids a download: launcher models sync practice-2x/);
      assert.match(r.stderr, /no container was started/);
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      onHost(3, ["sh", "-c", 'mv "$HOME/$1.away" "$HOME/$1"', "sh", repo]);
      await launcher(["down", "deployment/practice-2x", "--grace", "1"]);
    }
  });

  test("models sync: only the snapshot's files and blobs, interrupted and resumed, checked by SHA-256", async (t) => {
    const big = variant(dir, "big-model", "practice-2x", `model = "practice/big-moe"\n`);
    seedModel(1, 160 << 20, "models--practice--big-moe");
    // A blob of another revision in the source cache: not part of the snapshot, so never sent.
    onHost(1, ["sh", "-c", 'head -c 1000000 /dev/urandom > "$HOME/$1/blobs/0000000000000000000000000000000000000000000000000000000000000000"', "sh", ".cache/practice/huggingface/hub/models--practice--big-moe"]);
    const partial = () => Number(onHost(3, ["sh", "-c", 'stat -c %s "$HOME/$1"/blobs/*.launcher-partial 2>/dev/null | sort -n | tail -1 || true', "sh", ".cache/practice/huggingface/hub/models--practice--big-moe"]).trim() || "0");

    // Through this machine (--relay): node to node over the practice fabric, 160 MiB is over before
    // the test could interrupt it (transfer.test.ts interrupts that path on a slowed link). The
    // relay's link to n3 is slowed too (~40 Mbit/s), so that the copy cannot end between a look at
    // n3 and the interrupt on a busy machine.
    const unshape = slowLinks(3, ["m"], ["tbf", "rate", "40mbit", "burst", "64kb", "latency", "400ms"]);
    try {
      const first = launcherProcess(["models", "sync", big, "--nodes", "n1,n3", "--relay"]);
      const exited = new Promise<number | null>((resolve) => first.on("close", resolve));
      // A failed wait below must not leave the sync running into the next test (as pull.test.ts does).
      t.after(() => void (first.exitCode === null && first.signalCode === null && first.kill("SIGKILL")));
      await within(60_000, "part of the big blob on n3", async () => (partial() > 4 << 20 ? true : undefined));
      first.kill("SIGTERM");
      assert.equal(await exited, 143);
    } finally {
      unshape();
    }
    const kept = partial();
    assert.ok(kept > 4 << 20 && kept < 160 << 20, `a partial blob of ${kept} bytes stays`);

    const r = ok(await launcher(["models", "sync", big, "--nodes", "n1,n3", "--json"], 240_000), "resumed sync");
    const result = JSON.parse(r.stdout) as { source: string; nodes: { node: string; action: string; bytes: number; resumed_bytes: number }[] };
    const n3 = result.nodes.find((n) => n.node === "n3");
    assert.equal(result.source, "n1");
    assert.ok((n3?.resumed_bytes ?? 0) >= kept, "resumed from the bytes already there");
    assert.ok((n3?.bytes ?? Infinity) < (160 << 20) - kept + 4096, `sent only the rest: ${n3?.bytes}`);
    const sums = (i: number) => onHost(i, ["sh", "-c", 'cd "$HOME/$1/snapshots/$2" && sha256sum -- * | sort', "sh", ".cache/practice/huggingface/hub/models--practice--big-moe", PRACTICE_REVISION]);
    assert.equal(sums(3), sums(1));
    assert.equal(onHost(3, ["sh", "-c", 'ls "$HOME/$1/blobs" | grep -c "^0000" || true', "sh", ".cache/practice/huggingface/hub/models--practice--big-moe"]).trim(), "0", "the other revision's blob stayed behind");
    const again = JSON.parse(ok(await launcher(["models", "sync", big, "--nodes", "n1,n3", "--json"]), "sync again").stdout) as { nodes: { action: string }[] };
    assert.deepEqual(again.nodes.map((n) => n.action), ["had", "had"]);
  });

  test("a host that stops answering SSH: doctor names it, up refuses before any container starts, and it comes back", async () => {
    // Cut n3's management link on this machine's side: SSH to it (and the shared connection) goes silent.
    const link = (state: "up" | "down") => spawnSync("ip", ["link", "set", "lnchm3", state], { encoding: "utf8" });
    assert.equal(link("down").status, 0);
    let upCode: number | null | undefined;
    try {
      const r = await launcher(["doctor", "--json"], 120_000);
      assert.equal(r.code, 1);
      const report = JSON.parse(r.stdout) as { nodes: { node: string; ssh: boolean }[]; findings: { kind: string; node: string; message: string }[] };
      assert.deepEqual(report.nodes.map((n) => [n.node, n.ssh]), [["n1", true], ["n2", true], ["n3", false]]);
      assert.ok(report.findings.some((f) => f.kind === "ssh" && f.node === "n3" && /SSH unreachable/.test(f.message)));
      const up = await launcher(["up", "practice-2x", "--nodes", "n1,n3"], 120_000);
      upCode = up.code;
      assert.equal(up.code, 1);
      assert.match(up.stderr, /n3 \(lnch-n3\): SSH unreachable/);
      assert.match(up.stderr, /no container was started/);
      assert.equal(onHost(1, ["docker", "ps", "-aq", "--filter", "label=launcher.deployment"]).trim(), "", "nothing started on n1");
    } finally {
      link("up");
      await within(30_000, "n3 answers again", async () => ((await launcher(["status", "--json"])).code === 0 ? true : undefined));
      // An up that wrongly got through leaves nothing for the next test either.
      if (upCode === 0) await launcher(["down", "deployment/practice-2x", "--grace", "1"]);
    }
  });
});
