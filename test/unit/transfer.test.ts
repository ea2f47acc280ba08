import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, createHmac } from "node:crypto";
import { createServer, type AddressInfo } from "node:net";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import type { ClusterNode } from "../../src/cluster/cluster.js";
import { UserError } from "../../src/config/errors.js";
import { localTransport } from "../../src/remote/local.js";
import type { Transport } from "../../src/remote/transport.js";
import { runChain, startSource } from "../../src/transfer/chain.js";
import { TAR_FILTER_PERL } from "../../src/transfer/layers.js";
import { decodeHopLine, HOP_PERL } from "../../src/transfer/hop.js";
import { checkSpace, clusterRoutes, nodeRoute, parseProbe, planRoutes, type NodeProbe } from "../../src/transfer/route.js";

const node = (name: string, extra: Partial<ClusterNode> = {}): ClusterNode => ({ name, rank: 0, host: name, hca: [], gpus: 1, ...extra });

describe("routes", () => {
  test("the fabric address where known, else the management address (listened on everywhere), else none", () => {
    assert.deepEqual(nodeRoute(node("a", { fabric_ip: "10.232.0.11", address: "10.231.0.11" })), { node: "a", listen: "10.232.0.11", connect: "10.232.0.11", path: "fabric" });
    assert.deepEqual(nodeRoute(node("b", { address: "spark2.lan" })), { node: "b", listen: "0.0.0.0", connect: "spark2.lan", path: "management" });
    assert.equal(nodeRoute(node("c")), undefined);
    assert.deepEqual([...clusterRoutes([node("a", { fabric_ip: "10.0.0.1" }), node("c")]).keys()], ["a"]);
  });

  test("the plan: each destination straight from the nodes, or the relay with the reason", () => {
    const probe = (n: string, tools = true): NodeProbe => ({ node: n, tools, path: "/x" });
    const routes = clusterRoutes([node("n2", { fabric_ip: "10.0.0.2" }), node("n3", { fabric_ip: "10.0.0.3" }), node("n4", { fabric_ip: "10.0.0.4" })]);
    const plan = planRoutes("n1", probe("n1"), [probe("n2"), probe("n3", false), probe("n4"), probe("n5")], routes, undefined);
    assert.deepEqual(plan.direct.map((r) => r.node), ["n2", "n4"]);
    assert.deepEqual(plan.relay, [
      { node: "n3", why: "n3 lacks perl (IO::Socket::INET), bash or sha256sum to receive" },
      { node: "n5", why: "n5 has neither a fabric_ip nor a known address" },
    ]);
    assert.deepEqual(planRoutes("n1", probe("n1", false), [probe("n2")], routes, undefined).relay, [{ node: "n2", why: "n1 lacks perl (IO::Socket::INET), bash or sha256sum to send" }]);
    assert.deepEqual(planRoutes("local", undefined, [probe("n2")], routes, undefined).relay, [{ node: "n2", why: "the source local is this machine" }]);
    assert.deepEqual(planRoutes("n1", probe("n1"), [probe("n2")], routes, "--relay was given").relay, [{ node: "n2", why: "--relay was given" }]);
  });

  test("free space: every short destination named with its path, what it has and what it needs; unknown space is not refused", () => {
    const probes: NodeProbe[] = [
      { node: "n2", tools: true, path: "/var/lib/docker", free: 5 * 2 ** 30 },
      { node: "n3", tools: true, path: "/var/lib/docker", free: 1 << 20 },
      { node: "n4", tools: true, path: "/data/hub/models--a--b" },
    ];
    const need = new Map([["n2", 4 * 2 ** 30], ["n3", 3 * 2 ** 30], ["n4", 9 * 2 ** 30]]);
    assert.throws(() => checkSpace(probes, need, "image x"), (e: unknown) => e instanceof UserError && e.message === "not enough free space for image x:\n  - n3: /var/lib/docker has 1.0 MiB free, needs 3.00 GiB");
    assert.doesNotThrow(() => checkSpace(probes.slice(0, 1), need, "image x"));
  });

  test("the probe's output", () => {
    assert.deepEqual(parseProbe("n2", "tools yes\npath /var/lib/docker\nfree 123456\n"), { node: "n2", tools: true, path: "/var/lib/docker", free: 123456 });
    assert.deepEqual(parseProbe("n2", "tools no\npath /x\n"), { node: "n2", tools: false, path: "/x" });
    // Each image's layers (docker mode), a scratch image's null and a garbled line left out.
    assert.deepEqual(parseProbe("n2", 'tools yes\npath /d\nlayers ["sha256:aa","sha256:bb"]\nlayers null\nlayers [oops\nlayers ["sha256:aa"]\n').images, [["sha256:aa", "sha256:bb"], ["sha256:aa"]]);
  });

  test("a hop's report lines decode; anything else is not an event", () => {
    assert.deepEqual(decodeHopLine("port 40123"), { kind: "port", port: 40123 });
    assert.deepEqual(decodeHopLine("unreachable 10.0.0.3:4000 IO::Socket::INET: connect: Connection refused"), { kind: "unreachable", target: "10.0.0.3:4000", why: "IO::Socket::INET: connect: Connection refused" });
    assert.deepEqual(decodeHopLine("done 1048576"), { kind: "done", bytes: 1048576 });
    assert.equal(decodeHopLine("port x"), undefined);
    assert.equal(decodeHopLine("Loaded image: a:b"), undefined);
  });
});

describe("the chain, with hops run on this machine", () => {
  test("each receiver gets the stream (less what it already holds), one that cannot be reached is left to the relay, and the secret is never in an argv", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-chain-"));
    try {
      const payload = path.join(dir, "payload");
      writeFileSync(payload, Buffer.from(Array.from({ length: 3 << 20 }, (_, i) => (i * 7919) % 251)));
      const argvs: string[][] = [];
      const stdins: string[] = [];
      const spy = (name: string): Transport => {
        const t = localTransport(name);
        return {
          ...t,
          spawn: (argv) => {
            argvs.push([...argv]);
            const p = t.spawn(argv);
            const write = p.stdin.write.bind(p.stdin);
            p.stdin.write = ((chunk: string) => {
              stdins.push(String(chunk));
              return write(chunk);
            }) as typeof p.stdin.write;
            return p;
          },
        };
      };
      const receiver = (name: string, connect: string, skip: number) => ({
        node: name,
        transport: spy(name),
        listen: "127.0.0.1",
        connect,
        path: "fabric" as const,
        sink: ["sh", "-c", 'cat >> "$1"', "sh", path.join(dir, name)],
        skip,
      });
      writeFileSync(path.join(dir, "c"), readFileSync(payload).subarray(0, 1000));
      const shown = new Map<string, number>();
      const out = await runChain(
        { node: "src", transport: spy("src"), command: ["cat", "--", payload] },
        // b listens on loopback but is announced at an address nobody answers on.
        [receiver("a", "127.0.0.1", 0), receiver("b", "127.0.0.2", 0), receiver("c", "127.0.0.1", 1000)],
        (n, bytes) => shown.set(n, bytes),
      );
      assert.deepEqual(out.delivered.map((d) => [d.node, d.from, d.bytes]), [["a", "src", 3 << 20], ["c", "a", 3 << 20]]);
      assert.deepEqual(out.unreached.map((u) => u.node), ["b"]);
      assert.match(out.unreached[0]?.why ?? "", /^fabric address 127\.0\.0\.2:\d+ not reachable from a \(.*refused.*\)$/);
      assert.deepEqual(out.failed, []);
      const sha = (f: string): string => createHash("sha256").update(readFileSync(f)).digest("hex");
      assert.equal(sha(path.join(dir, "a")), sha(payload));
      assert.equal(sha(path.join(dir, "c")), sha(payload), "c kept its first 1000 bytes and took the rest");
      assert.equal(shown.get("a"), 3 << 20);
      const secret = stdins.find((s) => /^[0-9a-f]{64}\n$/.test(s))?.trim();
      assert.ok(secret !== undefined, "the secret went in on stdin");
      assert.ok(argvs.length === 4 && argvs.every((a) => !a.join(" ").includes(secret)), "never in an argv");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the chain links itself and starts in one round trip from launcher, not one per node: every hop is told its next address (the last: that it is the end) at once", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-chain-"));
    // Each control line reaches its hop DELAY ms after it is sent, as over a slow SSH link.
    const DELAY = 1500; // long beside a busy machine's scheduling jitter, so that the ratios below judge the round trips, not the jitter
    const slow = (name: string): Transport => {
      const t = localTransport(name);
      return {
        ...t,
        spawn: (argv) => {
          const p = t.spawn(argv);
          const write = p.stdin.write.bind(p.stdin);
          const end = p.stdin.end.bind(p.stdin);
          p.stdin.write = ((chunk: string) => {
            setTimeout(() => write(chunk), DELAY);
            return true;
          }) as typeof p.stdin.write;
          p.stdin.end = (() => {
            setTimeout(() => end(), DELAY);
            return p.stdin;
          }) as typeof p.stdin.end;
          return p;
        },
      };
    };
    try {
      const payload = path.join(dir, "payload");
      writeFileSync(payload, Buffer.alloc(1 << 16, 7));
      const at = new Map<string, number>();
      const receivers = ["a", "b", "c"].map((name) => ({ node: name, transport: slow(name), listen: "127.0.0.1", connect: "127.0.0.1", path: "fabric" as const, sink: ["sh", "-c", 'cat > "$1"', "sh", path.join(dir, name)], skip: 0 }));
      const out = await runChain({ node: "src", transport: slow("src"), command: ["cat", "--", payload] }, receivers, () => undefined, { step: (step) => at.set(step, performance.now()) });
      assert.deepEqual(out.delivered.map((d) => [d.node, d.from]), [["a", "src"], ["b", "a"], ["c", "b"]]);
      const linking = (at.get("connected") ?? NaN) - (at.get("listening") ?? NaN);
      // One after another it takes 3 x DELAY at least; at once, DELAY and the hops' own connects.
      assert.ok(linking < 2 * DELAY, `linking 3 hops took ${linking.toFixed(0)} ms`);
      // The last hop was told it is the end with the rest: it pumps once linked, not a round trip
      // later (which takes 2 x DELAY at least).
      const toDone = (at.get("done") ?? NaN) - (at.get("listening") ?? NaN);
      assert.ok(toDone < 1.8 * DELAY, `from listening to done took ${toDone.toFixed(0)} ms`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("a source started before the chain, and its filter", () => {
  const receiver = (dir: string, name: string) => ({ node: name, transport: localTransport(name), listen: "127.0.0.1", connect: "127.0.0.1", path: "fabric" as const, sink: ["sh", "-c", 'cat > "$1"', "sh", path.join(dir, name)], skip: 0 });

  test("its command writes before the chain exists; the entries named later (as control lines, not argv) are left out on the source, every other byte comes through", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-chain-filter-"));
    try {
      writeFileSync(path.join(dir, "keep.bin"), Buffer.alloc(300_000, 1));
      writeFileSync(path.join(dir, "drop.bin"), Buffer.alloc(700_000, 2));
      execFileSync("tar", ["-C", dir, "-cf", path.join(dir, "in.tar"), "keep.bin", "drop.bin"]);
      const argvs: string[][] = [];
      const spying: Transport = { ...localTransport("src"), spawn: (argv) => (argvs.push([...argv]), localTransport("src").spawn(argv)) };
      // The source's command marks when it ran: before runChain is called, as an image push starts docker save.
      const started = startSource({ node: "src", transport: spying, command: ["sh", "-c", 'touch "$1/ran"; cat -- "$1/in.tar"', "sh", dir], filter: TAR_FILTER_PERL });
      const ran = path.join(dir, "ran");
      for (let i = 0; i < 200 && !existsSync(ran); i++) await new Promise((r) => setTimeout(r, 25));
      assert.ok(existsSync(ran), "the command ran before the chain was asked for");
      const out = await runChain(started, [receiver(dir, "a"), receiver(dir, "b")], () => undefined, { filterArgs: ["drop.bin"] });
      assert.deepEqual(out.delivered.map((d) => [d.node, d.from]), [["a", "src"], ["b", "a"]]);
      for (const n of ["a", "b"]) assert.deepEqual(execFileSync("tar", ["-tf", path.join(dir, n)], { encoding: "utf8" }).trim().split("\n"), ["keep.bin"]);
      assert.equal(execFileSync("tar", ["-xOf", path.join(dir, "b"), "keep.bin"]).length, 300_000);
      assert.match(out.sourceSaid, /^left out 1 layer files \(700000 bytes\)/m, "the filter's own count, on the source's stderr");
      assert.ok(argvs.every((a) => !a.includes("drop.bin")), "the names went in as control lines");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("a filter that fails fails the source, and the receivers with it (a reset, not an end of stream): no node counts as delivered, and the source is blamed", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-chain-filter-"));
    try {
      writeFileSync(path.join(dir, "payload"), Buffer.alloc(1 << 20, 3));
      const ended: string[] = [];
      const out = await runChain(
        { node: "src", transport: localTransport("src"), command: ["cat", "--", path.join(dir, "payload")], filter: 'read(STDIN, my $b, 4096); print $b; die "broken archive\\n";' },
        [receiver(dir, "a"), receiver(dir, "b")],
        (n, _bytes, done) => void (done && ended.push(n)),
        { filterArgs: ["x"] },
      );
      assert.deepEqual(out.delivered, []);
      assert.deepEqual(out.failed.map((f) => f.node), ["a", "b"]);
      assert.match(out.failed[0]?.why ?? "", /^the source src failed: the filter failed \(exit \d+\)$/);
      assert.deepEqual(ended, [], "no receiver took the cut stream as whole");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("without arguments no filter runs; a sender without a filter refuses arguments", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-chain-filter-"));
    try {
      writeFileSync(path.join(dir, "payload"), Buffer.alloc(1 << 16, 4));
      const failing = { node: "src", transport: localTransport("src"), command: ["cat", "--", path.join(dir, "payload")], filter: "exit 1;" };
      const whole = await runChain(failing, [receiver(dir, "a")], () => undefined);
      assert.deepEqual(whole.delivered.map((d) => [d.node, d.bytes]), [["a", 1 << 16]]);
      const refused = await runChain({ ...failing, filter: "" }, [receiver(dir, "b")], () => undefined, { filterArgs: ["x"] });
      assert.deepEqual(refused.delivered, []);
      assert.match(refused.unreached[0]?.why ?? "", /bad control line/);
      await assert.rejects(runChain(failing, [receiver(dir, "c")], () => undefined, { filterArgs: ["two words"] }), /not a filter argument/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the chain's authentication", () => {
  test("each receiver has its own secret, a listener that cannot prove it knows it gets no payload and never sees a secret, and the chain goes on past it", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-chain-auth-"));
    // Another process on the port the hop was told: it answers like a receiver, with a made-up proof.
    const heard: Buffer[] = [];
    const rogue = createServer((c) => {
      c.write(`challenge ${"1".repeat(32)}\n`);
      c.on("data", (d: Buffer) => {
        heard.push(d);
        c.write(`ok\nproof ${"0".repeat(64)}\n`);
      });
      c.on("error", () => undefined);
    });
    await new Promise<void>((resolve) => rogue.listen(0, "127.0.0.1", resolve));
    try {
      const port = (rogue.address() as AddressInfo).port;
      const payload = path.join(dir, "payload");
      writeFileSync(payload, Buffer.alloc(1 << 20, 7));
      const stdins = new Map<string, string>();
      const spy = (name: string, argv?: string[]): Transport => {
        const t = localTransport(name);
        return {
          ...t,
          spawn: (a) => {
            const p = t.spawn(argv ?? a);
            const write = p.stdin.write.bind(p.stdin);
            p.stdin.write = ((chunk: string) => {
              stdins.set(name, (stdins.get(name) ?? "") + String(chunk));
              return write(chunk);
            }) as typeof p.stdin.write;
            return p;
          },
        };
      };
      const receiver = (name: string, transport: Transport) => ({ node: name, transport, listen: "127.0.0.1", connect: "127.0.0.1", path: "fabric" as const, sink: ["sh", "-c", 'cat >> "$1"', "sh", path.join(dir, name)], skip: 0 });
      // "x" says it listens on the rogue's port (its hop only reports that and waits for its input's end).
      const fake = spy("x", ["sh", "-c", 'echo "port $1"; cat >/dev/null', "sh", String(port)]);
      const out = await runChain({ node: "src", transport: spy("src"), command: ["cat", "--", payload] }, [receiver("x", fake), receiver("a", spy("a")), receiver("b", spy("b"))], () => undefined);
      assert.deepEqual(out.unreached.map((u) => u.node), ["x"]);
      assert.match(out.unreached[0]?.why ?? "", /did not prove it knows its secret/);
      assert.deepEqual(out.delivered.map((d) => [d.node, d.from]), [["a", "src"], ["b", "a"]]);
      const secrets = ["x", "a", "b"].map((n) => /^([0-9a-f]{64})\n/.exec(stdins.get(n) ?? "")?.[1]);
      assert.ok(secrets.every((s) => s !== undefined) && new Set(secrets).size === 3, "one secret per receiver, first on its own stdin");
      const said = Buffer.concat(heard).toString("latin1");
      assert.ok(said.length < 200, `the rogue got no payload (${said.length} bytes)`);
      assert.ok(secrets.every((s) => !said.includes(s as string)), "no secret crossed the network");
      assert.match(said, /^proof [0-9a-f]{32} [0-9a-f]{64}\n$/);
    } finally {
      rogue.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the hop's HMAC is RFC 2104 HMAC-SHA-256", () => {
    const perl = HOP_PERL.slice(HOP_PERL.indexOf("sub nonce"), HOP_PERL.indexOf("sub write_all"));
    const key = "k".repeat(64);
    const got = execFileSync("perl", ["-e", `use strict; use POSIX (); ${perl} print hmac($ARGV[0], $ARGV[1]);`, key, "send ab cd"], { encoding: "utf8" });
    assert.equal(got, createHmac("sha256", key).update("send ab cd").digest("hex"));
  });
});
