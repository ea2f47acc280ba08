import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { gatewayOf } from "../../src/cli/gateway-key.js";
import { UserError } from "../../src/config/errors.js";

test("bench and eval read the gateway's key one way: --api-key-file, else the first key of $LAUNCHER_API_KEY, else none", (t) => {
  const dir = mkdtempSync(join(tmpdir(), "launcher-gwkey-"));
  const saved = process.env.LAUNCHER_API_KEY;
  t.after(() => {
    rmSync(dir, { recursive: true, force: true });
    if (saved === undefined) delete process.env.LAUNCHER_API_KEY;
    else process.env.LAUNCHER_API_KEY = saved;
  });
  const file = join(dir, "key");
  writeFileSync(file, "# the gateway's key\nfrom-file\n");
  process.env.LAUNCHER_API_KEY = "from-env,second";
  assert.deepEqual(gatewayOf({ gateway: "http://127.0.0.1:8080", apiKeyFile: file }), { url: "http://127.0.0.1:8080", apiKey: "from-file" });
  assert.deepEqual(gatewayOf({ gateway: "http://127.0.0.1:8080" }), { url: "http://127.0.0.1:8080", apiKey: "from-env" });
  delete process.env.LAUNCHER_API_KEY;
  assert.deepEqual(gatewayOf({ gateway: "http://127.0.0.1:8080" }), { url: "http://127.0.0.1:8080" });
  assert.equal(gatewayOf({}), undefined);
  assert.throws(() => gatewayOf({ apiKeyFile: file }), (e: unknown) => e instanceof UserError && /needs --gateway/.test(e.message));
  assert.throws(() => gatewayOf({ gateway: "127.0.0.1:8080" }), (e: unknown) => e instanceof UserError && /not an http\(s\) URL/.test(e.message));
  writeFileSync(file, "# nothing\n");
  assert.throws(() => gatewayOf({ gateway: "http://127.0.0.1:8080", apiKeyFile: file }), /holds no key/);
});
