import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { foundRecipes } from "../../src/app/lookup.js";
import { clusterPath, localRecipes, recipeDirs } from "../../src/app/this-process.js";
import { PACKAGE_ROOT } from "../../src/config/package-info.js";
import { sshFileProblem } from "../../src/cluster/locate.js";
import { formatDiagnostic } from "../../src/config/diagnostic.js";
import { UserError } from "../../src/config/errors.js";
import { readSmallNoFollow, statusUids } from "../../src/config/private-dir.js";
import { bindAddressOf, type AddressLookup } from "../../src/nodes/session.js";
import { uniquePrefixes } from "../../src/engine/vllm/abbrev.js";
import { vllmFlags } from "../../src/engine/vllm/flags.js";
import { flagNames } from "../../src/engine/flag-names.js";
import { planDeployment, type Plan } from "../../src/plan/plan.js";
import { fileRecipeSource } from "../../src/recipe/fs-source.js";
import { catalogueSource } from "../../src/recipe/uploaded-source.js";
import { apiKeyOf, withoutApiKeyFlags } from "../../src/recipe/args.js";
import { resolveRecipe } from "../../src/recipe/resolve.js";
import { SshDocker, envOffCommandLine } from "../../src/remote/docker.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { recordingTransport } from "../support/docker-parts.js";
import { BASE, memorySource } from "../support/memory-source.js";

// Review of issue 24: local files launcher finds on its own, env names that reach the container,
// env values on a saved plan's command line, an abbreviated key flag, the head's bind address.

const asRoot = { skip: process.getuid?.() !== 0 ? "needs root to make files of another uid" : false };

function asNobody(argv: string[]): void {
  const r = spawnSync("setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", ...argv], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
}

/** A root-owned sticky folder (like /tmp) to plant in, made the working folder for `fn`, then removed. */
function inPlantedFolder(fn: (root: string) => void): void {
  const root = mkdtempSync(path.join(tmpdir(), "launcher-j2-"));
  chmodSync(root, 0o1777);
  const before = process.cwd();
  const env = { cluster: process.env.LAUNCHER_CLUSTER, xdg: process.env.XDG_CONFIG_HOME, recipes: process.env.LAUNCHER_RECIPES };
  process.chdir(root);
  delete process.env.LAUNCHER_CLUSTER;
  delete process.env.LAUNCHER_RECIPES;
  process.env.XDG_CONFIG_HOME = path.join(root, "config");
  try {
    fn(root);
  } finally {
    process.chdir(before);
    for (const [k, v] of [["LAUNCHER_CLUSTER", env.cluster], ["XDG_CONFIG_HOME", env.xdg], ["LAUNCHER_RECIPES", env.recipes]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    rmSync(root, { recursive: true, force: true });
  }
}

const PRACTICE = readFileSync(path.join(PACKAGE_ROOT, "recipes", "practice-2x", "recipe.toml"), "utf8");
const fileOf = (found: ReturnType<ReturnType<typeof localRecipes>["find"]>): string => ("error" in found ? `error: ${found.error}` : found.file);

describe("H3: a recipe found by a bare name in the current folder or ./recipes is read only when trusted", () => {
  test("the daemon's catalogue passes over another uid's ./recipes/NAME of its working folder too (fails before: it read any recipe there)", asRoot, () => {
    inPlantedFolder((root) => {
      mkdirSync(path.join(root, "recipes"));
      chmodSync(path.join(root, "recipes"), 0o1777);
      asNobody(["mkdir", "-m", "755", path.join(root, "recipes", "practice-2x")]);
      asNobody(["sh", "-c", `printf '%s' "$1" > "$2"`, "sh", PRACTICE.replace(/docker_image = .*/, 'docker_image = "evil:latest"'), path.join(root, "recipes", "practice-2x", "recipe.toml")]);
      const warned: string[] = [];
      const found = catalogueSource(recipeDirs(), foundRecipes((l) => warned.push(l))).find("practice-2x");
      assert.equal(fileOf(found), path.join(PACKAGE_ROOT, "recipes", "practice-2x", "recipe.toml"));
      assert.equal(warned.length, 1, warned.join("\n"));
      assert.match(warned[0] ?? "", /recipes\/practice-2x\/recipe\.toml is not read: it is owned by uid 65534/);
    });
  });

  test("another uid's ./NAME/recipe.toml and ./recipes/NAME are passed over for the bundled recipe, with a warning (fails before: ./practice-2x won)", asRoot, () => {
    inPlantedFolder((root) => {
      asNobody(["mkdir", "-m", "755", path.join(root, "practice-2x")]);
      asNobody(["sh", "-c", `printf '%s' "$1" > "$2"`, "sh", PRACTICE.replace(/docker_image = .*/, 'docker_image = "evil:latest"'), path.join(root, "practice-2x", "recipe.toml")]);
      const bundled = path.join(PACKAGE_ROOT, "recipes", "practice-2x", "recipe.toml");
      const warned: string[] = [];
      assert.equal(fileOf(fileRecipeSource(recipeDirs(), foundRecipes((l) => warned.push(l))).find("practice-2x")), bundled);
      assert.equal(fileOf(localRecipes().find("practice-2x")), bundled, "the shell wires the check in");
      assert.equal(warned.length, 1, warned.join("\n"));
      assert.match(warned[0] ?? "", /^practice-2x\/recipe\.toml is not read: it is owned by uid 65534, neither you \(uid 0\) nor root; a recipe found by its name in the current folder or \.\/recipes is read only when/);

      // ./recipes/NAME: the same, and the next place is tried.
      mkdirSync(path.join(root, "recipes"));
      chmodSync(path.join(root, "recipes"), 0o1777);
      asNobody(["mkdir", "-m", "755", path.join(root, "recipes", "mine")]);
      asNobody(["sh", "-c", `printf '%s' "$1" > "$2"`, "sh", PRACTICE, path.join(root, "recipes", "mine", "recipe.toml")]);
      const missing = localRecipes().find("mine");
      assert.ok("error" in missing && /recipes\/mine\/recipe\.toml is not read \(it is owned by uid 65534/.test(missing.error), JSON.stringify(missing));
    });
  });

  test("a recipe of yours in a folder others may write is passed over; yours in your folder is read", asRoot, () => {
    inPlantedFolder((root) => {
      mkdirSync(path.join(root, "recipes", "open"), { recursive: true });
      writeFileSync(path.join(root, "recipes", "open", "recipe.toml"), PRACTICE, { mode: 0o644 });
      chmodSync(path.join(root, "recipes", "open"), 0o777);
      const open = localRecipes().find("open");
      assert.ok("error" in open && /its folder is writable by group or others \(mode 0777\)/.test(open.error), JSON.stringify(open));
      chmodSync(path.join(root, "recipes", "open"), 0o755);
      assert.equal(fileOf(localRecipes().find("open")), path.join("recipes", "open", "recipe.toml"));
      // A world-writable file of yours is refused too.
      chmodSync(path.join(root, "recipes", "open", "recipe.toml"), 0o666);
      assert.match(fileOf(localRecipes().find("open")), /it is writable by group or others \(mode 0666\)/);
    });
  });

  test("a path the user types is their choice: read as named, whoever owns it", asRoot, () => {
    inPlantedFolder((root) => {
      asNobody(["mkdir", "-m", "777", path.join(root, "theirs")]);
      asNobody(["sh", "-c", `printf '%s' "$1" > "$2"`, "sh", PRACTICE, path.join(root, "theirs", "recipe.toml")]);
      for (const ref of ["./theirs/", "theirs/recipe.toml", path.join(root, "theirs")]) {
        assert.match(fileOf(localRecipes().find(ref)), /theirs\/recipe\.toml$/, ref);
      }
    });
  });
});

describe("H7: files a ./cluster.toml names under [ssh] pass the same rule", () => {
  const CLUSTER = (ssh: string): string => `name = "here"\n[ssh]\n${ssh}\n[[nodes]]\nname = "n1"\nhost = "h1"\n`;

  test("sshFileProblem: the first refused file, with its key; none when all pass", () => {
    const trust = (f: string): string | undefined => (f.endsWith("bad") ? "is owned by uid 65534" : undefined);
    assert.equal(sshFileProblem({ config: "/c/ok", identity: "/c/ok2" }, trust), undefined);
    assert.deepEqual(sshFileProblem({ config: "/c/ok", known_hosts: "/c/bad" }, trust), { key: "known_hosts", file: "/c/bad", problem: "is owned by uid 65534" });
  });

  test("./cluster.toml whose [ssh] config is another uid's is refused, naming the file (fails before: ssh -F read it)", asRoot, () => {
    inPlantedFolder((root) => {
      writeFileSync(path.join(root, "cluster.toml"), CLUSTER('config = "ssh_config"'), { mode: 0o644 });
      asNobody(["sh", "-c", `echo 'ProxyCommand touch /tmp/pwned' > "$1"`, "sh", path.join(root, "ssh_config")]);
      assert.throws(
        () => clusterPath(undefined),
        (e: unknown) => e instanceof UserError && /^\.\/cluster\.toml is not used: the file its \[ssh\] config names, .*ssh_config, is owned by uid 65534/.test(e.message),
      );
      // Named by its path, it is the user's choice, as ssh -F is.
      assert.equal(clusterPath("./cluster.toml"), "./cluster.toml");
      // A world-writable identity of yours is refused as well; a missing one is ssh's to report.
      writeFileSync(path.join(root, "cluster.toml"), CLUSTER('identity = "id"\nknown_hosts = "absent"'), { mode: 0o644 });
      writeFileSync(path.join(root, "id"), "key", { mode: 0o600 });
      assert.equal(clusterPath(undefined), "cluster.toml");
      chmodSync(path.join(root, "id"), 0o666);
      assert.throws(() => clusterPath(undefined), (e: unknown) => e instanceof UserError && /\[ssh\] identity names, id, is writable by group or others \(mode 0666\)/.test(e.message));
    });
  });
});

function planOf(recipeText: string): Plan {
  const r = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": recipeText }));
  assert.ok(r.recipe, r.diagnostics.map(formatDiagnostic).join("\n"));
  const parsed = parseCluster("c.toml", `[[nodes]]\nname = "a1"\nhost = "h1"\naddress = "10.0.0.11"\nfabric_ip = "10.9.0.1"\nfabric_iface = "eth1"\n[[nodes]]\nname = "a2"\nhost = "h2"\nfabric_ip = "10.9.0.2"\nfabric_iface = "eth1"\n`);
  assert.ok(parsed.cluster);
  const p = planDeployment(r.recipe, parsed.cluster);
  assert.ok(p.ok, p.ok ? "" : p.diagnostics.map(formatDiagnostic).join("\n"));
  return p.plan;
}

test("H5: a mount's env naming a dev switch is refused at the mount, unless the recipe opts in (fails before: only [env] was looked at)", () => {
  const mount = `[[extra_mounts]]\nhost = "/tmp/prof"\ncontainer = "/prof"\nenv = "VLLM_TORCH_PROFILER_DIR"\n`;
  const errors = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": `${BASE}${mount}` })).diagnostics.map(formatDiagnostic);
  assert.equal(errors.length, 1, errors.join("\n"));
  assert.match(errors[0] ?? "", /^recipes\/r\/recipe\.toml:18:\d+: error: the mount at \/prof sets env VLLM_TORCH_PROFILER_DIR, which opens \/start_profile and \/stop_profile with no key/);
  const optedIn = resolveRecipe("r", memorySource({ "recipes/r/recipe.toml": `unsafe_dev_routes = true\n${BASE}${mount}` }));
  assert.ok(optedIn.recipe);
  assert.match(optedIn.diagnostics.map(formatDiagnostic).join("\n"), /recipe\.toml:19:\d+: warning: the mount at \/prof sets env VLLM_TORCH_PROFILER_DIR/);
});

describe("H8: an abbreviated key flag is the key flag", () => {
  test("the spellings are computed from the flag table: --api-k and longer, as --api-server-count shares --api-", () => {
    assert.deepEqual(vllmFlags().apiKey.flags, ["--api-key", "--api-ke", "--api-k"]);
    assert.ok(flagNames(vllmFlags()).includes("--api-server-count"));
    assert.deepEqual(uniquePrefixes("--api-key", ["--api-key", "--api-server-count", "--api-kernel"]), ["--api-key"], "a flag sharing --api-ke leaves only the whole flag");
    assert.deepEqual(uniquePrefixes("--api_key", ["--apix"]), ["--api-key", "--api-ke", "--api-k", "--api-"], "up to the prefix another flag shares");
  });

  test("--api-ke K, --api-k=K and --api_k K leave the command line and are the deployment's key (fails before: they stayed in argv)", () => {
    for (const written of ['"--api-ke", "sk-abbr-1"', '"--api-k=sk-abbr-1"', '"--api_k", "sk-abbr-1"']) {
      const args = BASE.replace(`"--enable-prefix-caching",`, `"--enable-prefix-caching", ${written},`);
      const plan = planOf(args);
      assert.equal(plan.api_key, "sk-abbr-1", written);
      for (const n of plan.nodes) {
        assert.ok(!n.argv.some((a) => a.includes("sk-abbr-1") || a.startsWith("--api")), `${written}: ${n.argv.join(" ")}`);
        // The key goes to the rank that serves the API only (src/plan/plan.ts nodeSpec).
        assert.equal(n.env.VLLM_API_KEY, n.rank === 0 ? "sk-abbr-1" : undefined);
      }
    }
    assert.deepEqual(withoutApiKeyFlags(["--api-k", "k1", "--max-model-len", "8"], vllmFlags()), { args: ["--max-model-len", "8"], key: "k1" });
    assert.equal(apiKeyOf(["--api-ke", "k2"], {}, vllmFlags()), "k2");
    // --api- is ambiguous for vLLM's parser: not the key flag, and left for vLLM to refuse.
    assert.equal(apiKeyOf(["--api-", "k3"], {}, vllmFlags()), undefined);
  });
});

describe("H6: no env value on docker run's command line, whatever plan it came from", () => {
  const OLD = ["docker", "run", "--detach", "--name", "lnch-x-0", "--label", "launcher.deployment=x", "--env", "VLLM_API_KEY=sk-old", "-e", "A=1", "--env=B=2=3", "-eC=4", "-e=D=5", "--env", "INHERITED", "--volume", "/a:/b", "--", "img:1", "vllm", "serve", "-e", "E=6"];

  test("envOffCommandLine moves every K=V before `--` into the env file; --env K and the command stay", () => {
    const off = envOffCommandLine(OLD, { HF_HUB_OFFLINE: "1", A: "old" });
    assert.deepEqual(off.argv, ["docker", "run", "--detach", "--name", "lnch-x-0", "--label", "launcher.deployment=x", "--env", "INHERITED", "--volume", "/a:/b", "--env-file", "/dev/stdin", "--", "img:1", "vllm", "serve", "-e", "E=6"]);
    assert.deepEqual(off.env, { HF_HUB_OFFLINE: "1", A: "1", VLLM_API_KEY: "sk-old", B: "2=3", C: "4", D: "5" });
    const fresh = ["docker", "run", "--env-file", "/dev/stdin", "--", "img"];
    assert.deepEqual(envOffCommandLine(fresh, { K: "v" }), { argv: fresh, env: { K: "v" } });
    assert.throws(() => envOffCommandLine(["docker", "run", "--env", "K=v", "img"], {}), (e: unknown) => e instanceof UserError && /no `--` before the image/.test(e.message));
  });

  test("SshDocker.run sends an old plan's env on stdin, not on ssh's command line (fails before: --env VLLM_API_KEY=... was in argv)", async () => {
    const { transport, calls } = recordingTransport("a1");
    assert.equal(await new SshDocker(transport).run(OLD, { VLLM_API_KEY: "sk-old" }), "cid");
    assert.ok(!calls[0]?.argv.some((a) => a.includes("sk-old")), calls[0]?.argv.join(" "));
    assert.match(calls[0]?.options?.stdin ?? "", /^VLLM_API_KEY=sk-old$/m);
  });
});

describe("R3: the head's bind address as this machine resolves it", () => {
  const fake = (answers: Partial<Record<0 | 4, string | Error>>): { lookup: AddressLookup; asked: (0 | 4)[] } => {
    const asked: (0 | 4)[] = [];
    return {
      asked,
      lookup: async (_name, family) => {
        asked.push(family);
        const a = answers[family];
        if (a === undefined || a instanceof Error) throw a ?? new Error("ENOTFOUND");
        return a;
      },
    };
  };

  test("IPv4 first, then any family; an unscoped or scoped link-local IPv6 is never used (fails before: the first answer, whatever it was)", async () => {
    assert.equal(await bindAddressOf("spark1", fake({ 4: "192.168.1.11", 0: "fd00::11" }).lookup), "192.168.1.11");
    const v6 = fake({ 0: "fd00::11" });
    assert.equal(await bindAddressOf("spark1", v6.lookup), "fd00::11");
    assert.deepEqual(v6.asked, [4, 0]);
    for (const ll of ["fe80::1", "FE80::2", "febf::3", "fe80::1%eth0"]) assert.equal(await bindAddressOf("spark1", fake({ 0: ll }).lookup), undefined, ll);
    assert.equal(await bindAddressOf("spark1", fake({ 0: "fec0::1" }).lookup), "fec0::1", "fec0 is past fe80::/10");
    assert.equal(await bindAddressOf("spark1", fake({}).lookup), undefined);
  });

  test("a lookup that never answers leaves the name unresolved within the bound", async () => {
    const t0 = Date.now();
    assert.equal(await bindAddressOf("spark1", () => new Promise(() => {}), 50), undefined);
    assert.ok(Date.now() - t0 < 5_000);
  });
});

describe("one home for /proc uids and the no-follow small read", () => {
  test("statusUids reads every uid of the Uid: line; none when it is missing or not numbers", () => {
    assert.deepEqual(statusUids("Name:\tx\nUid:\t1000\t1000\t1000\t0\nGid:\t1\n"), [1000, 1000, 1000, 0]);
    assert.deepEqual(statusUids("Name:\tx\n"), []);
    assert.deepEqual(statusUids("Uid:\t10 x\n"), []);
  });

  test("readSmallNoFollow: at most max bytes of a file, a link refused (ELOOP), nothing there undefined", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "launcher-j2-read-"));
    try {
      const f = path.join(dir, "f");
      writeFileSync(f, "0123456789");
      assert.deepEqual(readSmallNoFollow(f, 4)?.text, "0123");
      assert.equal(readSmallNoFollow(f, 4)?.facts.kind, "file");
      symlinkSync(f, path.join(dir, "l"));
      assert.throws(() => readSmallNoFollow(path.join(dir, "l"), 4), (e: unknown) => (e as NodeJS.ErrnoException).code === "ELOOP");
      assert.equal(readSmallNoFollow(path.join(dir, "absent"), 4), undefined);
      assert.deepEqual(readSmallNoFollow(dir, 4), { facts: readSmallNoFollow(dir, 4)?.facts, text: "" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
