import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { clusterOf } from "../../src/app/lookup.js";
import { composeUploaded } from "../../src/app/admit.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import type { WatchSource } from "../../src/daemon/discovery.js";
import { FORGET_UPLOADED_AFTER_MS, keptUploadedClusters } from "../../src/daemon/uploaded-clusters.js";
import { WatchedClusters } from "../../src/daemon/watched-clusters.js";

// The life of the clusters a daemon did not start with (moved out of serve's action): a client's
// upload is kept and watched, a changed one replaces it unless a boot on it runs, the daemon's own
// name is refused, and one idle long enough is forgotten. Sessions are opened locally only.

const NODES = '[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\nport = 1\n';
const HOME = { file: "/etc/launcher/home.toml", text: `name = "home"\n${NODES}\n[ssh]\noptions = ["-oBatchMode=yes"]\n` };

function setting(): { watched: WatchedClusters; calls: string[]; lines: string[]; registry: BootRegistry; clock: { now: number }; dir: string } {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-watched-"));
  const calls: string[] = [];
  const lines: string[] = [];
  const clock = { now: 1_000 };
  const registry = new BootRegistry(() => clock.now);
  const discovery = {
    add: (s: WatchSource) => void calls.push(`add ${s.cluster} ${s.argv.join(" ")}`),
    replace: (s: WatchSource) => void calls.push(`replace ${s.cluster} ${s.argv.join(" ")}`),
    remove: (cluster: string) => void calls.push(`remove ${cluster}`),
  };
  const home = { file: HOME.file, cluster: clusterOf(HOME), text: HOME.text };
  const watched = new WatchedClusters([home], 1, dir, discovery, (cluster, file) => ({ cluster, argv: [file] }), registry, (l) => void lines.push(l), () => clock.now);
  watched.followDeaths({ follow: (c) => void calls.push(`follow ${c}`), unfollow: (c) => void calls.push(`unfollow ${c}`) });
  return { watched, calls, lines, registry, clock, dir };
}

test("a client's cluster file is kept with the daemon's [ssh], watched and followed; sent again unchanged it is left as it is", () => {
  const { watched, calls, lines, dir } = setting();
  try {
    const sent = { file: "/home/them/lab.toml", text: `name = "lab"\n${NODES}` };
    const lab = clusterOf(sent);
    assert.equal(watched.refusal(lab, sent), undefined);
    watched.uploaded(lab, sent);
    const [kept] = keptUploadedClusters(dir);
    assert.ok(kept !== undefined && path.basename(kept) === "lab.toml");
    assert.equal(readFileSync(kept, "utf8"), composeUploaded(sent.text, clusterOf(HOME)));
    assert.deepEqual(calls, [`add lab ${kept}`, "follow lab"]);
    assert.match(lines.join("\n"), /^watching cluster lab \(uploaded by a client, kept as .*lab\.toml\): what runs there is routed and supervised$/);
    assert.ok(watched.sessions.has("lab") && watched.sessions.has("home"));
    watched.uploaded(lab, sent);
    assert.equal(calls.length, 2, "the same file again: nothing new");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a changed file replaces the watched one, but not while a boot on it runs; the daemon's own name is refused", async () => {
  const { watched, calls, registry, dir } = setting();
  try {
    const first = { file: "lab.toml", text: `name = "lab"\n${NODES}` };
    const changed = { file: "lab.toml", text: `name = "lab"\n${NODES}${NODES.replace("s1", "s2").replace("127.0.0.1", "127.0.0.2")}` };
    watched.uploaded(clusterOf(first), first);
    let release = (): void => undefined;
    const entry = registry.start({ deployment: "d", cluster: "lab" }, () => new Promise((resolve) => (release = () => resolve({ status: "ready", deployment: "d", endpoint: "http://s1:8000", served_model: "m", seconds: 1, boot: "b" }))));
    assert.match(watched.refusal(clusterOf(changed), changed) ?? "", /^cluster lab changed since this daemon last received it, and a boot on it runs/);
    release();
    await entry.ended;
    assert.equal(watched.refusal(clusterOf(changed), changed), undefined);
    watched.uploaded(clusterOf(changed), changed);
    assert.deepEqual(calls.slice(2).map((c) => c.split(" ").slice(0, 2).join(" ")), ["replace lab", "follow lab"]);
    const own = { file: "home.toml", text: `name = "home"\n${NODES}` };
    assert.match(watched.refusal(clusterOf(own), own) ?? "", /^cluster home is one of this daemon's own clusters/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an uploaded cluster with nothing deployed is forgotten once idle long enough; the daemon's own never is", () => {
  const { watched, calls, lines, clock, dir } = setting();
  try {
    const sent = { file: "lab.toml", text: `name = "lab"\n${NODES}` };
    watched.uploaded(clusterOf(sent), sent);
    clock.now += FORGET_UPLOADED_AFTER_MS;
    watched.forgetIdle([{ cluster: "lab" }]);
    assert.equal(calls.includes("remove lab"), false, "a deployment on it keeps it");
    clock.now += FORGET_UPLOADED_AFTER_MS - 1;
    watched.forgetIdle([]);
    assert.equal(calls.includes("remove lab"), false, "not idle long enough yet");
    clock.now += 1;
    watched.forgetIdle([]);
    assert.deepEqual(calls.slice(-2), ["remove lab", "unfollow lab"]);
    assert.deepEqual(keptUploadedClusters(dir), []);
    assert.equal(watched.sessions.has("lab"), false);
    assert.ok(watched.sessions.has("home"));
    assert.match(lines.at(-1) ?? "", /^forgetting the uploaded cluster lab: nothing deployed on it for 10 min/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a cluster file of the daemon's user is watched from where it is, once, and never kept", () => {
  const { watched, calls, lines, dir } = setting();
  try {
    const mine = clusterOf({ file: "/home/me/mine.toml", text: `name = "mine"\n${NODES}` });
    watched.ownerFile(mine);
    watched.ownerFile(mine);
    assert.deepEqual(calls, ["add mine /home/me/mine.toml", "follow mine"]);
    assert.deepEqual(keptUploadedClusters(dir), []);
    assert.match(lines.join("\n"), /^watching cluster mine \(\/home\/me\/mine\.toml, booted on by this daemon's user\)/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
