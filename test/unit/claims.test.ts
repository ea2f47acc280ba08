import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { claimExpired, claimNodes, claimOrder, decodeClaim, describeHolder, encodeClaim, holderGone, parseTake, thisMachine, type ClaimOptions, type ClaimRecord } from "../../src/claims/claims.js";
import { UserError } from "../../src/config/errors.js";
import { isAlive } from "../../src/claims/locks.js";
import { localTransport } from "../../src/remote/local.js";
import type { Transport } from "../../src/remote/transport.js";
import { within } from "../integration/practice-cluster.js";

const dir = mkdtempSync(path.join(tmpdir(), "launcher-claims-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const record: ClaimRecord = { id: "abc", host: "laptop", pid: 42, command: "launcher up practice-2x", deployment: "practice-2x", since: "2026-01-01T00:00:00.000Z", lease_seconds: 60 };

test("a claim record survives encoding; anything else decodes to nothing", () => {
  assert.deepEqual(decodeClaim(encodeClaim(record)), record);
  assert.deepEqual(decodeClaim(encodeClaim({ ...record, command: "launcher up 'odd\nname'" })), { ...record, command: "launcher up 'odd\nname'" });
  assert.equal(encodeClaim({ ...record, command: "a\nb" }).includes("\n"), false, "one line on the node");
  for (const bad of ["", "not json", "{}", JSON.stringify({ ...record, pid: "42" }), JSON.stringify({ ...record, lease_seconds: 0 })]) assert.equal(decodeClaim(bad), undefined, bad);
});

test("the claim script's answers: taken, held (age, id, record), or not an answer", () => {
  assert.deepEqual(parseTake(0, ""), { taken: true });
  assert.deepEqual(parseTake(3, `held 7\nabc\n${encodeClaim(record)}\n`), { taken: false, held: { id: "abc", ageSeconds: 7, record } });
  assert.deepEqual(parseTake(3, "held 7\nabc\ngarbage\n"), { taken: false, held: { id: "abc", ageSeconds: 7 } });
  assert.equal(parseTake(3, "nonsense"), undefined);
  assert.equal(parseTake(255, ""), undefined, "ssh failed: not a claim answer");
});

test("a claim expires only once its holder stopped renewing for longer than the lease it wrote", () => {
  assert.equal(claimExpired({ id: "abc", record, ageSeconds: 60 }), false);
  assert.equal(claimExpired({ id: "abc", record, ageSeconds: 61 }), true);
  assert.equal(claimExpired({ id: "abc", record: { ...record, lease_seconds: 2 }, ageSeconds: 3 }, 60_000), true, "the holder's lease, not the taker's");
  assert.equal(claimExpired({ id: "abc", ageSeconds: 30 }, 60_000), false, "an unreadable record gets the default lease");
  assert.equal(claimExpired({ id: "abc", ageSeconds: 61 }, 60_000), true);
  assert.equal(claimExpired({ id: "abc", record, ageSeconds: -5 }), false, "a clock set back is no expiry");
});

test("a holder is certainly gone only when it ran on this machine in this boot and its pid is not running", () => {
  const here = { host: "laptop", boot: "b-1" };
  const mine = { id: "abc", record: { ...record, boot: "b-1" }, ageSeconds: 1 };
  const none = () => false;
  assert.equal(holderGone(mine, here, none), true);
  assert.equal(holderGone(mine, here, () => true), false, "its pid still runs");
  assert.equal(holderGone(mine, { ...here, host: "workstation" }, none), false, "another machine's pid says nothing here");
  assert.equal(holderGone(mine, { ...here, boot: "b-2" }, none), false, "a pid from before a reboot says nothing");
  assert.equal(holderGone({ ...mine, record }, here, none), false, "a record without a boot id (not Linux)");
  assert.equal(holderGone(mine, { host: "laptop" }, none), false, "no boot id here");
  assert.equal(holderGone({ id: "abc", ageSeconds: 1 }, here, none), false, "an unreadable record");
  assert.equal(isAlive(process.pid), true);
  assert.equal(isAlive(spawnSync("true").pid as number), false, "a pid that has exited");
  assert.equal(thisMachine().boot?.length, 36, "Linux gives a UUID");
});

test("claims are taken in one order whatever order the nodes come in; the holder is named", () => {
  assert.deepEqual(claimOrder(["n3", "n1", "n2", "n1"]), ["n1", "n2", "n3"]);
  assert.equal(describeHolder({ id: "abc", record, ageSeconds: 1 }), "`launcher up practice-2x` (pid 42 on laptop, since 2026-01-01T00:00:00.000Z, deployment practice-2x)");
});

// Each fake node is this machine with its own HOME: the real claim script runs, as over SSH.
function node(name: string): Transport {
  const home = path.join(dir, name);
  mkdirSync(home, { recursive: true });
  const local = localTransport(name);
  return { ...local, exec: (argv, options) => local.exec(["env", `HOME=${home}`, ...argv], options) };
}
const claimFile = (name: string): string => path.join(dir, name, ".cache", "launcher", "claims", "node");
const nodes = (...names: string[]): Map<string, Transport> => new Map(names.map((n) => [n, node(n)]));
const options = (deployment: string, extra: Partial<ClaimOptions> = {}): ClaimOptions => ({
  command: `launcher up ${deployment}`,
  deployment,
  leaseMs: 60_000,
  now: () => new Date(),
  note: () => undefined,
  onLost: () => undefined,
  ...extra,
});
const outcome = (p: Promise<{ release(): Promise<void> }>) => p.then((c) => ({ ok: true as const, c }), (e: unknown) => ({ ok: false as const, e }));

test("two overlapping claims at the same instant: exactly one wins, the other is busy naming it and holds nothing", async () => {
  const cases: [string[], string[]][] = [[["s1", "s2"], ["s2", "s1"]], [["o1", "o2"], ["o2", "o3"]], [["p1", "p3"], ["p2", "p3"]]];
  for (const [a, b] of cases) {
    const all = new Map([...a, ...b].map((n) => [n, node(n)]));
    const pick = (names: readonly string[]) => new Map(names.map((n) => [n, all.get(n) as Transport]));
    const [ra, rb] = await Promise.all([outcome(claimNodes(pick(a), options("A"))), outcome(claimNodes(pick(b), options("B")))]);
    assert.equal([ra, rb].filter((r) => r.ok).length, 1, `${a} vs ${b}`);
    const loser = ra.ok ? rb : ra;
    assert.ok(!loser.ok && loser.e instanceof UserError);
    assert.match(loser.e.message, new RegExp(`^busy: node \\S+ is claimed by \`launcher up ${ra.ok ? "A" : "B"}\` \\(pid ${process.pid} on `));
    const winner = ra.ok ? ra : rb;
    const winnerNodes = ra.ok ? a : b;
    for (const n of all.keys()) assert.equal(existsSync(claimFile(n)), winnerNodes.includes(n), `${n}: only the winner's claims remain`);
    if (winner.ok) await winner.c.release();
    for (const n of all.keys()) assert.equal(existsSync(claimFile(n)), false, `${n} released`);
  }
});

test("a claim not renewed past its lease is taken over, by exactly one of two takers", async () => {
  const ns = nodes("e1", "e2");
  // A claim whose launcher died (SIGKILL): nobody renews it. Aged instead of waited for.
  const old = new Date(Date.now() - 10_000);
  for (const n of ["e1", "e2"]) {
    mkdirSync(path.dirname(claimFile(n)), { recursive: true });
    writeFileSync(claimFile(n), `dead-id\n${encodeClaim({ ...record, id: "dead-id", command: "launcher up dead", lease_seconds: 2 })}\n`);
    utimesSync(claimFile(n), old, old);
  }
  const notes: string[] = [];
  const [ra, rb] = await Promise.all([outcome(claimNodes(ns, options("A", { note: (t) => notes.push(t) }))), outcome(claimNodes(ns, options("B", { note: (t) => notes.push(t) })))]);
  assert.equal([ra, rb].filter((r) => r.ok).length, 1);
  const loser = ra.ok ? rb : ra;
  assert.ok(!loser.ok && loser.e instanceof UserError);
  assert.match(loser.e.message, new RegExp(`claimed by \`launcher up ${ra.ok ? "A" : "B"}\``), "busy names the taker, not the dead holder");
  assert.ok(notes.some((t) => /^e1: taking over the expired claim of `launcher up dead`/.test(t)), notes.join("\n"));
  const winner = ra.ok ? ra : rb;
  if (winner.ok) await winner.c.release();
  assert.equal(existsSync(claimFile("e1")), false);
});

test("a fresh claim whose holder died on this machine is taken over at once; a live one's is not", async () => {
  const dead = spawnSync("true").pid;
  const me = thisMachine();
  const plant = (pid: number) => {
    mkdirSync(path.dirname(claimFile("d1")), { recursive: true });
    writeFileSync(claimFile("d1"), `old-id\n${encodeClaim({ ...record, ...me, id: "old-id", pid })}\n`);
  };
  plant(process.pid);
  const busy = await outcome(claimNodes(nodes("d1"), options("A")));
  assert.ok(!busy.ok && busy.e instanceof UserError && /busy: node d1/.test(busy.e.message), "a running holder keeps it");
  plant(dead);
  const notes: string[] = [];
  const taken = await outcome(claimNodes(nodes("d1"), options("A", { note: (t) => notes.push(t) })));
  assert.ok(taken.ok);
  assert.match(notes.join("\n"), new RegExp(`^d1: taking over the claim of .*\\(pid ${dead} on ${me.host},.*: that process no longer runs on this machine$`));
  await taken.c.release();
});

test("a live holder keeps its claim by renewing; one that lost it is told", async () => {
  const ns = nodes("r1");
  let lost = "";
  // A lease of 4 s, renewed every second: the take script judges age in whole seconds (date +%s
  // against stat's %Y), so a 1 s lease is lost to one renewal late by a few hundred ms.
  const held = await claimNodes(ns, options("live", { leaseMs: 4000, onLost: (m) => (lost = m) }));
  const start = Date.now();
  utimesSync(claimFile("r1"), new Date(start - 10_000), new Date(start - 10_000));
  // The renewal every quarter lease makes the claim young again.
  await within(8000, "the claim renewed", async () => (Date.now() - statSync(claimFile("r1")).mtimeMs < 2000 ? true : undefined));
  const again = await outcome(claimNodes(ns, options("other")));
  assert.equal(again.ok, false, "renewed, so still held");
  // Another launcher replaced it (this one froze past its lease): the next renewal says so.
  writeFileSync(claimFile("r1"), `someone-else\n${encodeClaim(record)}\n`);
  await within(8000, "the holder told it lost its claim", async () => (lost === "" ? undefined : true));
  assert.match(lost, /^r1: this launcher's claim on the node was taken over/);
  await held.release();
  assert.match(readFileSync(claimFile("r1"), "utf8"), /^someone-else\n/, "releasing never removes another's claim");
});

test("a node that cannot be reached stops the claim like preflight would, and gives back what was taken", async () => {
  const gone: Transport = { ...node("u2"), exec: async () => ({ code: 255, stdout: "", stderr: "ssh: connect to host 10.0.0.9 port 22: Connection timed out" }) };
  const ns = new Map([["u1", node("u1")], ["u2", gone]]);
  await assert.rejects(claimNodes(ns, options("A", { where: (n) => `${n} (host-${n})` })), (e: unknown) => {
    assert.ok(e instanceof UserError);
    assert.equal(e.message, "cannot claim u2 (host-u2): SSH unreachable: ssh: connect to host 10.0.0.9 port 22: Connection timed out; no container was started");
    return true;
  });
  assert.equal(existsSync(claimFile("u1")), false, "u1 given back");
});
