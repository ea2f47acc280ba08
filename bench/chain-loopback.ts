// The node-to-node chain alone, on this machine: a source hop and N receiving hops run locally
// (no SSH, no Docker), so the hop program's own costs show: the set-up (listen, connect each hop
// to the next) and the stream's rate through the perl forwarders. Each step's time is printed.
// Run: npx tsx bench/chain-loopback.ts [--mib 300] [--hops 3] [--rounds 3]
import { mkdtempSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { tmpdir } from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";
import { localTransport } from "../src/remote/local.js";
import { runChain } from "../src/transfer/chain.js";

const { values } = parseArgs({ options: { mib: { type: "string", default: "300" }, hops: { type: "string", default: "3" }, rounds: { type: "string", default: "3" } } });
const MIB = Number(values.mib);
const dir = mkdtempSync(path.join(tmpdir(), "launcher-chain-bench-"));
try {
  const payload = path.join(dir, "payload");
  spawnSync("sh", ["-c", 'head -c "$1" /dev/urandom > "$2"', "sh", String(MIB << 20), payload]);
  for (let round = 0; round < Number(values.rounds); round++) {
    const start = performance.now();
    const at = new Map<string, number>();
    const receivers = Array.from({ length: Number(values.hops) }, (_, i) => ({
      node: `r${i + 1}`,
      transport: localTransport(`r${i + 1}`),
      listen: "127.0.0.1",
      connect: "127.0.0.1",
      path: "fabric" as const,
      // What a node does with the bytes, without a disk in the way: counted and dropped.
      sink: ["sh", "-c", "cat > /dev/null"],
      skip: 0,
    }));
    const out = await runChain({ node: "src", transport: localTransport("src"), command: ["cat", "--", payload] }, receivers, () => undefined, {
      step: (step) => {
        if (!at.has(step)) at.set(step, performance.now() - start);
      },
    });
    const total = (performance.now() - start) / 1000;
    if (out.delivered.length !== receivers.length) throw new Error(`not delivered: ${JSON.stringify(out)}`);
    const steps = [...at].map(([s, ms]) => `${s} ${(ms / 1000).toFixed(3)}`).join(", ");
    console.log(`round ${round + 1}: ${total.toFixed(2)} s, ${(MIB / total).toFixed(1)} MiB/s end to end; steps (s from start): ${steps}`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
