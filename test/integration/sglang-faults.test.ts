import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { launcher, launcherContainers, listed, ok, onHost, practiceSuite, startGateway, storedRestarts, variant, within } from "./practice-cluster.js";

// SGLang's faults that its own parser or its own log say, on the practice cluster (issue 31):
// a misspelt flag refused at up's preflight by the image's own parser (the practice persona answers
// launcher's dump program from its option table, as an SGLang image answers from server_args.py),
// a scheduler that dies after it served (its process tree exits, as SGLang's SIGQUIT handler and
// subprocess watchdog make it): a rank exited, restarted by a daemon with the cause its log gives;
// a scheduler that hangs after it served (its HTTP lives on, /health 503 after its wait): status
// calls it degraded, never a boot, and a daemon that meets it so restarts it; and an API key that
// SGLang logs in plain text: only rank 0 has it, and launcher's up and logs never show it.
const HOSTS = 2;
const dir = practiceSuite(HOSTS, "launcher-sglang-faults-");
const BASE = "practice-sglang-2x";
const here = { LAUNCHER_DAEMON: "none" };

describe("SGLang's faults on the practice cluster", { concurrency: false }, () => {
  test("a misspelt SGLang flag is refused by up's preflight, judged by the image's own parser, before any container starts", async () => {
    const recipe = variant(dir, "sg-typo", BASE, 'args = ["--served-model-name", "practice-sglang", "--mem-fraction-static", "0.25", "--mem-fraction-statc", "0.3"]\n');
    // Launcher's table cannot tell: validate leaves it to the image's parser.
    ok(await launcher(["validate", recipe], 60_000, here), "validate by the table");
    const up = await launcher(["up", recipe, "--nodes", "n1,n2", "--timeout", "90"], 120_000, here);
    assert.equal(up.code, 1, `${up.stdout}\n${up.stderr}`);
    assert.match(up.stderr, /the args of sg-typo, judged by SGLang 0\.5\.5's own parser in image practice-engine:local/);
    assert.match(up.stderr, /--mem-fraction-statc is not a flag of SGLang 0\.5\.5 in image practice-engine:local: its parser stops with "unrecognized arguments"/);
    assert.deepEqual(launcherContainers(HOSTS), [], "refused before any container started");
  });

  test("a worker node where the API port is taken (SGLang's worker binds it for its health check): up's preflight refuses it before any container starts", async () => {
    const recipe = variant(dir, "sg-port", BASE, "");
    const port = "18123";
    // Something of no deployment listens on n2's loopback at the port (a container on n2's host network).
    onHost(2, ["docker", "run", "-d", "--rm", "--network", "host", "--name", "s31d-port-holder", "--entrypoint", "node", "practice-engine:local", "-e", `require("net").createServer().listen(${port}, "127.0.0.1")`]);
    try {
      await within(30_000, "the port held on n2", async () => (/:46CB /.test(onHost(2, ["cat", "/proc/net/tcp"])) ? true : undefined));
      const up = await launcher(["up", recipe, "--nodes", "n1,n2", "--port", port, "--timeout", "90"], 120_000, here);
      assert.equal(up.code, 1, `${up.stdout}\n${up.stderr}`);
      assert.match(up.stderr, /preflight failed for sg-port; no container was started/);
      assert.match(up.stderr, new RegExp(`n2: port ${port} is already in use there, and the engine's rank on it listens on that port too \\(its health check\\): free it or pass --port`));
      assert.deepEqual(launcherContainers(HOSTS), []);
    } finally {
      onHost(2, ["docker", "rm", "-f", "s31d-port-holder"]);
    }
  });

  test("a scheduler dead after ready: its process tree exits, status says which rank, and a daemon restarts it with the cause its log gives", { timeout: 300_000 }, async () => {
    const recipe = variant(dir, "sg-crash", BASE, '[env]\nPRACTICE_FAULT = "crash_after_ready"\nPRACTICE_FAULT_RANK = "0"\nPRACTICE_CRASH_AFTER_MS = "4000"\n');
    try {
      ok(await launcher(["up", recipe, "--nodes", "n1,n2", "--restart", "on-failure:1"], 180_000, here), "up sg-crash --restart");
      const { value: dead } = await within(60_000, "sg-crash no longer serving", async () => {
        const d = await listed("sg-crash", here);
        return d !== undefined && d.status !== "serving" ? d : undefined;
      });
      assert.equal(dead.status, "degraded", JSON.stringify(dead));
      const shown = ok(await launcher(["status"], 60_000, here), "status").stdout;
      assert.match(shown, /^sg-crash {2}degraded/m);
      assert.match(shown, /rank 0 on n1 \(exited, exit 137\)/);
      const gw = await startGateway(["--poll", "500ms", "--restart-backoff", "1s"]);
      try {
        const { value: r } = await within(120_000, "a restart of sg-crash recorded", async () => storedRestarts("sg-crash").find((x) => x.attempt === 1)).catch((e: Error) =>
          assert.fail(`${e.message}: ${JSON.stringify(storedRestarts("sg-crash"))}\n${gw.log()}`),
        );
        assert.equal(r.reason, "rank-exited", JSON.stringify(r));
        assert.match(r.message ?? "", /^rank 0 on n1 exited \(exit 137\)/);
        assert.match(r.cause ?? "", /RuntimeError: CUDA error: device-side assert triggered/);
      } finally {
        await gw.stop();
      }
    } finally {
      await launcher(["down", "deployment/sg-crash", "--grace", "1"], 120_000, here);
    }
  });

  test("a scheduler hung after ready: its HTTP lives, /health 503 after its wait; status says degraded, never a boot, and a daemon started after restarts it", { timeout: 300_000 }, async () => {
    const recipe = variant(dir, "sg-hang", BASE, '[env]\nPRACTICE_SGLANG_HANG_AFTER_MS = "3000"\nPRACTICE_SGLANG_HEALTH_TIMEOUT_MS = "1000"\n');
    try {
      ok(await launcher(["up", recipe, "--nodes", "n1,n2", "--restart", "on-failure:1"], 180_000, here), "up sg-hang --restart");
      const { value: hung } = await within(60_000, "sg-hang no longer serving", async () => {
        const d = await listed("sg-hang", here);
        return d !== undefined && d.status !== "serving" ? d : undefined;
      });
      assert.equal(hung.status, "degraded", JSON.stringify(hung));
      assert.equal(launcherContainers(HOSTS).filter((c) => c.includes("sg-hang") && c.endsWith(":running")).length, 2, "both ranks still run");
      const gw = await startGateway(["--poll", "500ms", "--restart-backoff", "1s"]);
      try {
        const { value: r } = await within(120_000, "a restart of sg-hang recorded", async () => storedRestarts("sg-hang").find((x) => x.attempt === 1)).catch((e: Error) =>
          assert.fail(`${e.message}: ${JSON.stringify(storedRestarts("sg-hang"))}\n${gw.log()}`),
        );
        assert.equal(r.reason, "unhealthy");
        assert.match(r.message ?? "", /^the engine does not answer \/health \(degraded/);
      } finally {
        await gw.stop();
      }
    } finally {
      await launcher(["down", "deployment/sg-hang", "--grace", "1"], 120_000, here);
    }
  });

  test("an API key SGLang logs in plain text: only rank 0 gets it, and up's failure report and launcher logs never show it", { timeout: 300_000 }, async () => {
    const KEY = "sk-sglang-practice-7f3a";
    const served = variant(dir, "sg-key", BASE, `args = ["--served-model-name", "practice-sglang", "--mem-fraction-static", "0.25", "--api-key", "${KEY}"]\n`);
    try {
      ok(await launcher(["up", served, "--nodes", "n1,n2"], 180_000, here), "up sg-key");
      // SGLang's own line holds it on the head; the worker never had it.
      assert.match(onHost(1, ["docker", "logs", "launcher-sg-key-r0"]), new RegExp(`'api_key': '${KEY}'`));
      assert.match(onHost(2, ["docker", "logs", "launcher-sg-key-r1"]), /'api_key': None/);
      assert.doesNotMatch(onHost(2, ["docker", "inspect", "--format", "{{json .Config.Env}}", "--", "launcher-sg-key-r1"]), /SGLANG_API_KEY/);
      const logs = ok(await launcher(["logs", "deployment/sg-key"], 60_000, here), "logs").stdout;
      assert.match(logs, /'api_key': '<redacted>'/);
      assert.ok(!logs.includes(KEY), "launcher logs hides the key");
    } finally {
      await launcher(["down", "deployment/sg-key", "--grace", "1"], 120_000, here);
    }
    const failing = variant(dir, "sg-key-fail", BASE, `args = ["--served-model-name", "practice-sglang", "--api-key", "${KEY}"]\n[env]\nPRACTICE_FAULT = "cuda_oom"\nPRACTICE_FAULT_RANK = "0"\n`);
    const up = await launcher(["up", failing, "--nodes", "n1,n2", "--timeout", "90"], 120_000, here);
    assert.equal(up.code, 1, up.stderr);
    assert.match(up.stderr, /'api_key': '<redacted>'/, "the head's settings line is among the lines up shows");
    assert.ok(!`${up.stdout}${up.stderr}`.includes(KEY), "up's failure report hides the key");
    assert.deepEqual(launcherContainers(HOSTS), []);
  });
});
