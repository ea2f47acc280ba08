import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { readTextFile } from "../../src/config/read-file.js";
import { keepUploadedCluster, keptUploadedClusters, uploadedClustersDir } from "../../src/daemon/uploaded-clusters.js";
import { Discovery } from "../../src/daemon/discovery.js";
import { within } from "../integration/practice-cluster.js";

// A cluster a remote client's `up` uploaded is watched by the daemon like its own: kept on disk
// (for discovery's watcher, and for a daemon started again), and added to discovery at once.

const NODES = '[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\n';

test("uploaded cluster files: kept (mode 600) so that they read as the same cluster, one per cluster, found again by a daemon started later", () => {
  const dir = uploadedClustersDir(mkdtempSync(path.join(tmpdir(), "launcher-uploaded-")));
  try {
    assert.deepEqual(keptUploadedClusters(dir), [], "none yet (no folder)");
    // A file that does not name its cluster is named by its file name: the kept copy keeps it.
    const kept = keepUploadedCluster(dir, "laptop", { file: "/home/me/laptop.toml", text: NODES });
    assert.equal(parseCluster(kept, readTextFile(kept, "cluster file")).cluster?.name, "laptop");
    assert.equal(statSync(kept).mode & 0o777, 0o600);
    const named = keepUploadedCluster(dir, "a/b ../c", { file: "C:\\x\\odd.toml", text: `name = "a/b ../c"\n${NODES}` });
    assert.equal(path.dirname(path.dirname(named)), dir, "any cluster name stays inside the folder");
    assert.equal(parseCluster(named, readTextFile(named, "cluster file")).cluster?.name, "a/b ../c");
    // Uploaded again under another file name: the cluster is kept once.
    const again = keepUploadedCluster(dir, "laptop", { file: "/elsewhere/other.toml", text: `name = "laptop"\n${NODES}` });
    assert.deepEqual(readdirSync(path.dirname(again)), ["other.toml"]);
    assert.deepEqual(keptUploadedClusters(dir).sort(), [again, named].sort());
  } finally {
    rmSync(path.dirname(dir), { recursive: true, force: true });
  }
});

test("discovery: a cluster added while it runs is watched from then on (its deployments routed and supervised); one already watched is left as it is", async () => {
  const line = (cluster: string): string[] => [process.execPath, "-e", `console.log(JSON.stringify({ deployments: [{ deployment: "on-${cluster}", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://127.0.0.1:9", status: "serving", phase: "serving", missing: [], unreachable: [], ranks: [] }], unreachable: [], at: new Date().toISOString() })); setInterval(() => {}, 1000);`];
  const logs: string[] = [];
  const discovery = new Discovery([{ cluster: "own", argv: line("own") }], (l) => logs.push(l), 60_000);
  try {
    discovery.start();
    await discovery.ready(20_000);
    discovery.add({ cluster: "uploaded", argv: line("uploaded") });
    discovery.add({ cluster: "own", argv: line("twice") });
    await within(20_000, "the added cluster's deployments are seen", async () => (discovery.snapshot().deployments.some((d) => d.cluster === "uploaded") ? true : undefined));
    assert.deepEqual(discovery.snapshot().deployments.map((d) => `${d.cluster}/${d.deployment}`).sort(), ["own/on-own", "uploaded/on-uploaded"]);
  } finally {
    await discovery.stop();
  }
});

test("a cluster uploaded again with other content replaces the kept one, or is refused while a boot on it runs; an uploaded cluster idle for a while is forgotten", async () => {
  const { uploadVerdict, keptUploadedText, forgetUploadedCluster, idleUploaded, FORGET_UPLOADED_AFTER_MS } = await import("../../src/daemon/uploaded-clusters.js");
  const dir = uploadedClustersDir(mkdtempSync(path.join(tmpdir(), "launcher-uploaded-")));
  try {
    assert.equal(keptUploadedText(dir, "laptop"), undefined);
    assert.equal(uploadVerdict("laptop", { own: false, keptText: undefined, text: NODES, bootRunning: false }).kind, "new");
    keepUploadedCluster(dir, "laptop", { file: "laptop.toml", text: NODES });
    const kept = keptUploadedText(dir, "laptop");
    assert.equal(kept, NODES);
    const changed = `${NODES}[[nodes]]\nname = "s2"\nhost = "127.0.0.2"\n`;
    assert.equal(uploadVerdict("laptop", { own: false, keptText: kept, text: NODES, bootRunning: true }).kind, "same");
    assert.equal(uploadVerdict("laptop", { own: false, keptText: kept, text: changed, bootRunning: false }).kind, "replace");
    const refused = uploadVerdict("laptop", { own: false, keptText: kept, text: changed, bootRunning: true });
    assert.equal(refused.kind, "refuse");
    assert.match("message" in refused ? refused.message : "", /^cluster laptop changed since this daemon last received it, and a boot on it runs: wait for it to end/);
    assert.equal(uploadVerdict("laptop", { own: true, keptText: kept, text: changed, bootRunning: false }).kind, "refuse", "the daemon's own --cluster is never replaced (nor stood for) by a client's file");
    keepUploadedCluster(dir, "laptop", { file: "laptop.toml", text: changed });
    assert.equal(keptUploadedText(dir, "laptop"), changed, "the new text is what a daemon started again reads");
    // Busy (a deployment or a boot on it) keeps it; idle for FORGET_UPLOADED_AFTER_MS forgets it.
    const since = new Map([["laptop", 0], ["other", 0]]);
    assert.deepEqual(idleUploaded(since, new Set(["laptop"]), FORGET_UPLOADED_AFTER_MS - 1), []);
    assert.deepEqual(idleUploaded(since, new Set(), FORGET_UPLOADED_AFTER_MS), ["other"], "laptop was seen busy later");
    assert.deepEqual(idleUploaded(since, new Set(), 2 * FORGET_UPLOADED_AFTER_MS), ["laptop", "other"]);
    forgetUploadedCluster(dir, "laptop");
    assert.deepEqual(keptUploadedClusters(dir), [], "forgotten: not watched at the next start");
  } finally {
    rmSync(path.dirname(dir), { recursive: true, force: true });
  }
});

test("discovery: a replaced cluster is watched from its new source only; a removed one leaves the snapshot and is not restarted", async () => {
  const line = (cluster: string, deployment: string): string[] => [process.execPath, "-e", `console.log(JSON.stringify({ deployments: [{ deployment: "${deployment}", recipe: "r", recipe_hash: "h", served_model: "m", endpoint: "http://127.0.0.1:9", status: "serving", phase: "serving", missing: [], unreachable: [], ranks: [] }], unreachable: [], at: new Date().toISOString() })); setInterval(() => {}, 1000);`];
  const logs: string[] = [];
  const discovery = new Discovery([{ cluster: "own", argv: line("own", "a") }, { cluster: "up", argv: line("up", "old") }], (l) => logs.push(l), 60_000);
  const seen = () => discovery.snapshot().deployments.map((d) => `${d.cluster}/${d.deployment}`).sort().join(" ");
  try {
    discovery.start();
    await discovery.ready(20_000);
    assert.equal(seen(), "own/a up/old");
    discovery.replace({ cluster: "up", argv: line("up", "new") });
    await within(20_000, "the new source's deployments are seen", async () => (seen() === "own/a up/new" ? true : undefined));
    discovery.remove("up");
    assert.equal(seen(), "own/a", "gone from the snapshot at once");
    // A restart of the removed watcher would say so in the log (discovery of up stopped ... restarting).
    await within(5000, "the own cluster is still polled", async () => (discovery.snapshot().deployments.length === 1 ? true : undefined));
    assert.ok(!logs.some((l) => l.startsWith("discovery of up stopped")), logs.join("\n"));
  } finally {
    await discovery.stop();
  }
});
