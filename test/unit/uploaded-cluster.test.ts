import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { parseCluster } from "../../src/cluster/parse.js";
import { readTextFile } from "../../src/config/read-file.js";
import { keepUploadedCluster, keptUploadedClusters, uploadedClustersDir } from "../../src/daemon/uploaded-clusters.js";
import { Discovery } from "../../src/gateway/discovery.js";
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
