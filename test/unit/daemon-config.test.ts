import assert from "node:assert/strict";
import { test } from "node:test";
import { UserError } from "../../src/config/errors.js";
import { daemonConfig, type ConfigReaders, type ServeFlags } from "../../src/daemon/config.js";

// `launcher serve`'s flags -> the daemon's config: every default and every check, with the files
// and the environment handed in (nothing here reads a disk).

/** Files by path; reading one not listed fails as readTextFile does, naming what it is. */
function readers(files: Record<string, string> = {}, clusters: Record<string, string> = { "": "/home/me/.config/launcher/clusters/home.toml" }): ConfigReaders & { read: string[] } {
  const read: string[] = [];
  return {
    read,
    readFile: (file, what) => {
      read.push(`${what}: ${file}`);
      const text = files[file];
      if (text === undefined) throw new UserError(`cannot read the ${what} ${file}: no such file`);
      return text;
    },
    clusterPath: (option) => {
      const file = clusters[option ?? ""];
      if (file === undefined) throw new UserError(`no cluster ${option ?? "(default)"}`);
      return file;
    },
  };
}

const refused = (flags: ServeFlags, env: Record<string, string>, message: RegExp, r = readers()) =>
  assert.throws(() => daemonConfig(flags, env, r), (e: unknown) => e instanceof UserError && message.test(e.message), `${JSON.stringify(flags)} ${JSON.stringify(env)}`);

test("serve's defaults: loopback 8080, no keys, no control, the cluster found, and each duration", () => {
  const config = daemonConfig({}, {}, readers());
  assert.deepEqual(config, {
    listen: { host: "127.0.0.1", port: 8080 },
    listenText: "127.0.0.1:8080",
    apiKeys: [],
    control: false,
    adminKeys: [],
    clusterFiles: ["/home/me/.config/launcher/clusters/home.toml"],
    pollMs: 2_000,
    restartBackoffMs: 10_000,
    upstreamTimeoutMs: 60 * 60_000,
    idleTimeoutMs: 10 * 60_000,
    probeEveryMs: 60_000,
    probeBoundMs: 30_000,
    captureBodies: 0,
  });
});

test("--probe-every and --probe-bound: durations above zero; zero or no duration is refused naming the flag", () => {
  const config = daemonConfig({ probeEvery: "2s", probeBound: "1500ms" }, {}, readers());
  assert.deepEqual([config.probeEveryMs, config.probeBoundMs], [2_000, 1_500]);
  refused({ probeEvery: "0s" }, {}, /^--probe-every 0s is no time/);
  refused({ probeBound: "0" }, {}, /^--probe-bound 0 is no time/);
  refused({ probeBound: "soon" }, {}, /^--probe-bound "soon" is not a duration/);
});

test("--capture-bodies: a count of bytes from 0 to the most a record keeps; anything else is refused naming the flag", () => {
  assert.equal(daemonConfig({ captureBodies: "4096" }, {}, readers()).captureBodies, 4096);
  assert.equal(daemonConfig({ captureBodies: "0" }, {}, readers()).captureBodies, 0);
  assert.equal(daemonConfig({ captureBodies: "16384" }, {}, readers()).captureBodies, 16384);
  for (const bad of ["16385", "4k", "-1", "", "1e3", "0x10", "9999999999"]) {
    assert.throws(() => daemonConfig({ captureBodies: bad }, {}, readers()), (e: unknown) => e instanceof UserError && e.message.startsWith(`--capture-bodies ${bad} is not a count of bytes from 0 to 16384`), bad);
  }
});

test("every flag given: each --cluster in order, the durations, the keys of each kind from flag, env and file", () => {
  const r = readers({ "/k/api": "# inference\nk2\n", "/k/admin": "a1\n" }, { "": "/default.toml", spark: "/c/spark.toml", "./lab.toml": "/w/lab.toml" });
  const config = daemonConfig(
    { listen: "0.0.0.0:9000", cluster: ["spark", "./lab.toml"], apiKey: ["k1"], apiKeyFile: "/k/api", poll: "500ms", restartBackoff: "1m", upstreamTimeout: "5m", idleTimeout: "30s", control: true, adminKeyFile: "/k/admin" },
    { LAUNCHER_API_KEY: "k3", LAUNCHER_ADMIN_KEY: "a2" },
    r,
  );
  assert.deepEqual(config.listen, { host: "0.0.0.0", port: 9000 });
  assert.deepEqual(config.clusterFiles, ["/c/spark.toml", "/w/lab.toml"]);
  assert.deepEqual([config.pollMs, config.restartBackoffMs, config.upstreamTimeoutMs, config.idleTimeoutMs], [500, 60_000, 300_000, 30_000]);
  assert.deepEqual(config.apiKeys, ["k1", "k3", "k2"]);
  assert.deepEqual(config.adminKeys, ["a2", "a1"]);
  assert.equal(config.control, true);
  assert.deepEqual(r.read, ["API key file: /k/api", "admin key file: /k/admin"]);
});

test("the admin keys are read only with --control", () => {
  const r = readers({ "/k/admin": "a1\n" });
  const config = daemonConfig({ adminKeyFile: "/k/admin" }, { LAUNCHER_ADMIN_KEY: "" }, r);
  assert.deepEqual([config.control, config.adminKeys, r.read], [false, [], []]);
});

test("refusals: an address that is not HOST:PORT; another than loopback without a key; one key of both kinds; a duration that is not one", () => {
  refused({ listen: "localhost" }, {}, /^--listen localhost is not HOST:PORT$/);
  refused({ listen: "0.0.0.0:8080" }, {}, /^refusing to listen on 0\.0\.0\.0 without an API key/);
  refused({ control: true, apiKey: ["same"] }, { LAUNCHER_ADMIN_KEY: "same" }, /^an admin key is also an inference key$/);
  refused({ poll: "often" }, {}, /^--poll "often" is not a duration$/);
  refused({ restartBackoff: "1x" }, {}, /^--restart-backoff "1x" is not a duration$/);
  refused({ upstreamTimeout: "" }, {}, /^--upstream-timeout "" is not a duration$/);
  refused({ idleTimeout: "-1s" }, {}, /^--idle-timeout "-1s" is not a duration$/);
  refused({ cluster: ["nowhere"] }, {}, /^no cluster nowhere$/);
  // Listening anywhere is fine with a key.
  assert.equal(daemonConfig({ listen: "[::]:8080" }, { LAUNCHER_API_KEY: "k" }, readers()).listen.host, "::");
});

test("an empty key source is refused in the words of its own kind, and names its own file as it is", () => {
  refused({}, { LAUNCHER_API_KEY: " , " }, /^LAUNCHER_API_KEY is set but holds no key/);
  refused({ control: true }, { LAUNCHER_ADMIN_KEY: "," }, /^LAUNCHER_ADMIN_KEY is set but holds no key/);
  refused({ apiKeyFile: "/k/empty" }, {}, /^the API key file \/k\/empty holds no key$/, readers({ "/k/empty": "# none\n" }));
  // The admin key's file is named as given, even a name that holds the inference key's words.
  const odd = "/keys/LAUNCHER_API_KEY API key file";
  refused({ control: true, adminKeyFile: odd }, {}, /^the admin key file \/keys\/LAUNCHER_API_KEY API key file holds no key$/, readers({ [odd]: "\n" }));
  refused({ apiKey: [""] }, {}, /^--api-key was given an empty key/);
});

test("every duration is judged before a cluster file is looked for: a bad flag is named even when --cluster names nothing", () => {
  refused({ cluster: ["nowhere"], poll: "often" }, {}, /^--poll "often" is not a duration$/);
  refused({ cluster: ["nowhere"], restartBackoff: "1x" }, {}, /^--restart-backoff "1x" is not a duration$/);
  refused({ cluster: ["nowhere"], upstreamTimeout: "" }, {}, /^--upstream-timeout "" is not a duration$/);
  refused({ cluster: ["nowhere"], idleTimeout: "-1s" }, {}, /^--idle-timeout "-1s" is not a duration$/);
});
