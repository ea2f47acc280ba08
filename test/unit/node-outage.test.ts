import assert from "node:assert/strict";
import { test } from "node:test";
import { NO_OUTAGES, outageKind, stepOutages, type NodeFacts, type NodeOutage } from "../../src/nodes/outage.js";
import { outageWords } from "../../src/contract/outage.js";
import { routeTable, type KnownDeployment } from "../../src/gateway/routes.js";
import { currentOutages, outageLines, outagesJson } from "../../src/cli/status.js";
import { outageHistoryLines } from "../../src/cli/history.js";
import { Store, type NodeOutageRecord } from "../../src/store/store.js";
import { decodeStatusLine, encodeStatusLine, type DeploymentStatus, type StatusLine } from "../../src/contract/deployment.js";
import { Discovery } from "../../src/daemon/discovery.js";
import { until } from "../support/until.js";
import { createServer } from "node:net";
import { probePort } from "../../src/nodes/status.js";

// A node that stops answering while launcher's ranks run there: the pure rule from polls to
// outages (times from the inputs), its words in the gateway's 503, status and history, and the store.

const T = (s: number): Date => new Date(Date.UTC(2026, 0, 1, 0, 0, s));
const GIB = 1024 * 1024;

const d = (over: Partial<DeploymentStatus> = {}): DeploymentStatus => ({
  deployment: "practice-2x", recipe: "practice-2x", recipe_hash: "h", served_model: "practice", endpoint: "http://n1:8000", status: "serving", phase: "serving", missing: [], unreachable: [],
  ranks: [
    { rank: 0, node: "n1", container: "launcher-practice-2x-r0", state: "running", started_at: "t" },
    { rank: 1, node: "n2", container: "launcher-practice-2x-r1", state: "running", started_at: "t" },
  ],
  ...over,
});
const cutN2 = d({ unreachable: ["n2"], ranks: [d().ranks[0] as DeploymentStatus["ranks"][number], { rank: 1, node: "n2", container: "launcher-practice-2x-r1", state: "unreachable" }] });
const line = (at: Date, deployments: DeploymentStatus[], unreachable: string[] = [], ssh_port?: StatusLine["ssh_port"]): StatusLine => ({ deployments, unreachable, at: at.toISOString(), ...(ssh_port === undefined ? {} : { ssh_port }) });
const facts: NodeFacts = { memory: (_c, node) => (node === "n2" ? { availableKiB: 80 * GIB, totalKiB: 120 * GIB, at: T(1).toISOString() } : undefined), heartbeat: () => undefined };

test("the kind: what answers from the control machine, or the guard's heartbeat after the outage began", () => {
  assert.equal(outageKind("silent", undefined, T(10)), "vanished", "nothing answers");
  assert.equal(outageKind(undefined, undefined, T(10)), "vanished", "not probed: nothing is known to answer");
  assert.equal(outageKind("answers", undefined, T(10)), "frozen", "its kernel answers at the SSH port, SSH does not complete");
  assert.equal(outageKind("silent", T(11), T(10)), "frozen", "its guard's heartbeat came after the outage began: it lives");
  assert.equal(outageKind("silent", T(9), T(10)), "vanished", "a heartbeat from before says nothing of now");
});

test("polls to outages: begins at the first poll that cannot read a node that ran ranks, keeps since, ends at the first that reads it", () => {
  const one = stepOutages(NO_OUTAGES, "c", line(T(0), [d()]), T(0), facts);
  assert.deepEqual([one.started, one.ended], [[], []]);
  const two = stepOutages(one.track, "c", line(T(5), [cutN2], ["n2"], { n2: "silent" }), T(6), facts);
  const expected: NodeOutage = { cluster: "c", node: "n2", kind: "vanished", since: T(6).toISOString(), deployments: [{ deployment: "practice-2x", ranks: [1] }], memory: { availableKiB: 80 * GIB, totalKiB: 120 * GIB, at: T(1).toISOString() } };
  assert.deepEqual(two.started, [expected], "since: the daemon's clock when the poll arrived");
  const three = stepOutages(two.track, "c", line(T(10), [cutN2], ["n2"], { n2: "answers" }), T(11), facts);
  assert.deepEqual([three.started, three.ended], [[], []], "one outage, not one per poll");
  assert.equal(three.track.open.get("c/n2")?.kind, "vanished", "coming back, its port answers a poll before SSH does: still the vanished one");
  assert.equal(three.track.open.get("c/n2")?.since, T(6).toISOString());
  const other = stepOutages(three.track, "other", line(T(12), [], []), T(12), facts);
  assert.deepEqual(other.ended, [], "another cluster's poll ends nothing here");
  const back = stepOutages(other.track, "c", line(T(20), [d()]), T(21), facts);
  assert.deepEqual(back.ended, [{ outage: expected, ended_at: T(21).toISOString() }]);
  assert.equal(back.track.open.size, 0);
  // What it runs after is this poll's: a later cut names what the poll after the return read.
  const gone = stepOutages(back.track, "c", line(T(30), [d({ ranks: [d().ranks[0] as DeploymentStatus["ranks"][number]] })]), T(30), facts);
  assert.deepEqual(stepOutages(gone.track, "c", line(T(40), [], ["n2"]), T(40), facts).started, [], "n2 ran nothing at the last poll that read it");
});

test("a frozen node that then stops answering at all has vanished; the outage stays one, since its start", () => {
  const one = stepOutages(NO_OUTAGES, "c", line(T(0), [d()]), T(0));
  const frozen = stepOutages(one.track, "c", line(T(5), [cutN2], ["n2"], { n2: "answers" }), T(5));
  assert.equal(frozen.started[0]?.kind, "frozen");
  const gone = stepOutages(frozen.track, "c", line(T(9), [cutN2], ["n2"], { n2: "silent" }), T(9));
  assert.deepEqual([gone.started, gone.track.open.get("c/n2")?.kind, gone.track.open.get("c/n2")?.since], [[], "vanished", T(5).toISOString()]);
});

test("a node no poll read, or that ran nothing, is only unreachable", () => {
  assert.deepEqual(stepOutages(NO_OUTAGES, "c", line(T(0), [cutN2], ["n2"]), T(0)).started, [], "the first poll (a daemon just started): nothing known to have run there");
  const idle = stepOutages(NO_OUTAGES, "c", line(T(0), [d({ ranks: [d().ranks[0] as DeploymentStatus["ranks"][number]] })]), T(0));
  assert.deepEqual(stepOutages(idle.track, "c", line(T(5), [], ["n2"]), T(5)).started, []);
});

test("the status line carries what each unreachable node's SSH port did, and only then", () => {
  const cut = line(T(5), [cutN2], ["n2"], { n2: "silent" });
  assert.deepEqual(decodeStatusLine(encodeStatusLine(cut)).ssh_port, { n2: "silent" });
  assert.equal("ssh_port" in JSON.parse(encodeStatusLine(line(T(0), [d()]))), false);
});

const outage = { node: "n1", kind: "vanished", since: T(6).toISOString(), memory: { availableKiB: 80 * GIB, totalKiB: 120 * GIB, at: T(1).toISOString() } } as const;
const WORDS = `n1 since ${T(6).toISOString()} (vanished), last seen with 80.0 GiB available of 120.0 GiB (at ${T(1).toISOString()})`;

test("the gateway's 503 for a deployment whose head's node is out says since when, which kind and its last memory", () => {
  const headCut: KnownDeployment = { ...d({ status: "unreachable", phase: "unknown", unreachable: ["n1"] }), cluster: "c", outages: [outage] };
  const r = routeTable([headCut], []).resolve("practice");
  assert.equal(r.kind, "unavailable");
  assert.equal(r.kind === "unavailable" ? r.code : "", "deployment_unreachable");
  assert.equal(r.kind === "unavailable" ? r.message : "", `model practice (deployment practice-2x) cannot be reached: n1 unreachable and its head does not answer /health; ${WORDS}`);
  const unknown = routeTable([{ ...headCut, outages: undefined as never }], []).resolve("practice");
  assert.equal(unknown.kind === "unavailable" ? unknown.message : "", "model practice (deployment practice-2x) cannot be reached: n1 unreachable and its head does not answer /health", "no outage known: as before");
  assert.equal(outageWords({ node: "n2", kind: "frozen", since: "S" }), "n2 since S (frozen), no memory sample known");
});

const rec = (over: Partial<NodeOutageRecord> = {}): NodeOutageRecord => ({ cluster: "c", node: "n1", kind: "vanished", since: T(6).toISOString(), deployments: [{ deployment: "practice-2x", ranks: [0] }], memory: outage.memory, ...over });

test("status: a node out now says since when, which kind, its memory and what ran there; one back says so for a while", () => {
  const now = T(100);
  assert.deepEqual(outageLines([rec()], ["n1"], now), [`node vanished: ${WORDS}; it ran practice-2x rank 0`]);
  assert.deepEqual(outageLines([rec()], [], now), [], "an open record of a node that answers now (its daemon stopped before it came back): history's");
  const ended = rec({ ended_at: T(48).toISOString() });
  assert.deepEqual(outageLines([ended], [], now), [`node n1 answers again since ${T(48).toISOString()} (vanished for 42 s from ${T(6).toISOString()}); what runs there was read again`]);
  assert.deepEqual(outageLines([ended], [], new Date(T(48).getTime() + 11 * 60_000)), [], "long back: history's");
  assert.deepEqual(currentOutages([ended, rec({ since: T(50).toISOString() })], ["n1"], now).out.map((o) => o.since), [T(50).toISOString()], "the newest of a node speaks");
  assert.deepEqual(outagesJson([rec()], ["n1"], now), [{ node: "n1", kind: "vanished", since: T(6).toISOString(), deployments: [{ deployment: "practice-2x", ranks: [0] }], memory: { available_kib: 80 * GIB, total_kib: 120 * GIB, at: T(1).toISOString() } }]);
});

test("store and history: an outage begins, ends with its kind, and reads newest first", () => {
  const store = new Store(":memory:");
  try {
    store.saveOutage(rec());
    store.saveOutage(rec({ cluster: "other", node: "x", since: T(7).toISOString() }));
    assert.deepEqual(store.outages("c", 10), [rec()]);
    store.endOutage("c", "n1", "frozen", T(48).toISOString());
    assert.deepEqual(store.outages("c", 10), [rec({ kind: "frozen", ended_at: T(48).toISOString() })]);
    assert.deepEqual(store.outages(undefined, 10).map((o) => o.node), ["x", "n1"]);
    assert.deepEqual(outageHistoryLines(store.outages(undefined, 10)), [
      "node outages (launcher serve):",
      `${T(7).toISOString()}  other/x vanished: still out (or its daemon stopped before it answered); it ran practice-2x rank 0, last seen with mem 80.0/120.0 GiB`,
      `${T(6).toISOString()}  c/n1 frozen: answered again at ${T(48).toISOString()}, after 42 s; it ran practice-2x rank 0, last seen with mem 80.0/120.0 GiB`,
    ]);
  } finally {
    store.close();
  }
});

test("discovery: one log line when a node's outage begins and one when it ends, the store told, the deployments on it carry it", async () => {
  const lines = [line(T(0), [d()]), line(T(5), [cutN2], ["n2"], { n2: "silent" }), line(T(10), [d()])].map((l) => JSON.stringify(l));
  // The watcher prints a line each time it is asked (a line on its stdin), as status --watch does.
  const script = `const l=${JSON.stringify(lines)};let i=0;const next=()=>{if(i<l.length)process.stdout.write(l[i++]+"\\n")};next();process.stdin.on("data",next);setInterval(()=>{},1e9)`;
  const log: string[] = [];
  const told: string[] = [];
  const discovery = new Discovery([{ cluster: "c", argv: [process.execPath, "-e", script] }], (l) => log.push(l), 60_000, undefined, {
    facts,
    started: (o) => told.push(`started ${o.node} ${o.kind}`),
    ended: (o, at) => told.push(`ended ${o.node}${Date.parse(at) >= Date.parse(o.since) ? "" : " before it began"}`),
  });
  discovery.start();
  try {
    await discovery.ready(10_000);
    discovery.refreshSoon();
    await until("the outage", () => discovery.snapshot().outages !== undefined, 10_000, () => log.join("\n"));
    assert.equal(discovery.snapshot().outages?.[0]?.node, "n2");
    assert.deepEqual(discovery.snapshot().deployments[0]?.outages?.map((o) => [o.node, o.kind]), [["n2", "vanished"]]);
    discovery.refreshSoon();
    await until("its end", () => told.length === 2, 10_000, () => log.join("\n"));
    assert.deepEqual(told, ["started n2 vanished", "ended n2"]);
    assert.equal(discovery.snapshot().outages, undefined);
    assert.equal(discovery.snapshot().deployments[0]?.outages, undefined, "read again: nothing of the outage stays on it");
    const outageLog = log.filter((l) => / node c\/n2 /.test(l));
    assert.equal(outageLog.length, 2, log.join("\n"));
    assert.match(outageLog[0] ?? "", /^! node c\/n2 since \S+ \(vanished\), last seen with 80\.0 GiB available of 120\.0 GiB \(at \S+\): it stopped answering while it ran practice-2x rank 1$/);
    assert.match(outageLog[1] ?? "", /^\+ node c\/n2 answers again at \S+, after \d+ s vanished \(since \S+\); its containers were read again in this poll$/);
  } finally {
    await discovery.stop();
  }
});

test("the SSH port's answer: a connection made or refused answers (the kernel lives), whatever the peer", async () => {
  const server = createServer((c) => c.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  try {
    assert.equal(await probePort("127.0.0.1", port), "answers", "sshd's port open, SSH itself may be stuck");
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
  assert.equal(await probePort("127.0.0.1", port), "answers", "refused: a RST from a live kernel");
  // Silence (a cut link) is test/integration/fresh-hosts/node-outage.test.ts's: this machine's network may
  // answer for any address (a proxy's RST), so no address here is sure to be silent.
});
