import assert from "node:assert/strict";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { test } from "node:test";
import { environmentOf } from "../../src/app/environment.js";
import type { Output } from "../../src/app/output.js";
import { PACKAGE_ROOT } from "../../src/config/package-info.js";
import { UserError } from "../../src/config/errors.js";
import { prepareUp } from "../../src/app/prepare-up.js";
import { DEFAULT_LEASE_MS } from "../../src/claims/claims.js";

// `up`'s preparation on an environment of a folder of its own: the default cluster of its config
// folder, its recipe folder, its lease; nothing of this process's environment is read.

const quiet: Output = { out: () => undefined, err: () => undefined, warn: () => undefined, json: () => undefined, diagnostics: () => undefined };
const CLUSTER = 'name = "lab"\n\n[[nodes]]\nname = "a1"\nhost = "a1.lab"\nuser = "me"\nfabric_ip = "10.0.0.1"\nfabric_iface = "enp1"\n\n[[nodes]]\nname = "a2"\nhost = "a2.lab"\nuser = "me"\nfabric_ip = "10.0.0.2"\nfabric_iface = "enp1"\n';

test("up is prepared from the environment it is given: its config folder's default cluster, its recipes, its claim lease", () => {
  const dir = mkdtempSync(path.join(tmpdir(), "launcher-prepare-"));
  try {
    const config = path.join(dir, "config", "launcher");
    mkdirSync(path.join(config, "clusters"), { recursive: true });
    writeFileSync(path.join(config, "clusters", "lab.toml"), CLUSTER);
    writeFileSync(path.join(config, "default-cluster"), "lab\n");
    cpSync(path.join(PACKAGE_ROOT, "recipes", "practice-2x"), path.join(dir, "recipes", "my-practice"), { recursive: true });
    const vars = { XDG_CONFIG_HOME: path.join(dir, "config"), LAUNCHER_RECIPES: path.join(dir, "recipes"), LAUNCHER_CLAIM_LEASE: "5s" };
    const env = environmentOf({ vars, home: dir }, quiet);

    const prepared = prepareUp({ ref: "my-practice", lane: "chat" }, quiet, { env });
    assert.equal(prepared.cluster.name, "lab");
    assert.equal(prepared.cluster.file, path.join(config, "clusters", "lab.toml"));
    assert.equal(prepared.first.deployment, "my-practice");
    assert.deepEqual(prepared.first.nodes.map((n) => n.node), ["a1", "a2"]);
    assert.equal(prepared.leaseMs, 5_000);
    assert.equal(prepared.request.lane, "chat");

    // Another environment, another answer: no lease set is the default; no default cluster is the usual error.
    const bare = environmentOf({ vars: { XDG_CONFIG_HOME: path.join(dir, "elsewhere"), LAUNCHER_RECIPES: path.join(dir, "recipes") }, home: dir }, quiet);
    assert.throws(() => prepareUp({ ref: "my-practice" }, quiet, { env: bare }), (e: unknown) => e instanceof UserError && /cluster/.test(e.message));
    assert.equal(prepareUp({ ref: "my-practice", cluster: path.join(config, "clusters", "lab.toml") }, quiet, { env: bare }).leaseMs, DEFAULT_LEASE_MS);
    assert.throws(() => prepareUp({ ref: "my-practice" }, quiet, { env: environmentOf({ vars: { ...vars, LAUNCHER_CLAIM_LEASE: "soon" }, home: dir }, quiet) }), /\$LAUNCHER_CLAIM_LEASE "soon" is not a duration/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
