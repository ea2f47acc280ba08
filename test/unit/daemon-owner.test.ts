import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import type { Cluster } from "../../src/cluster/cluster.js";
import { parseCluster } from "../../src/cluster/parse.js";
import { UserError } from "../../src/config/errors.js";
import { forTheDaemon } from "../../src/cli/up.js";
import { refusedSettings, submissionPathProblem, submittedCluster, type Caller, type DaemonScope } from "../../src/app/admit.js";
import { bootSubmitter } from "../../src/daemon/boots-host.js";
import { processEnvironment } from "../../src/app/environment.js";
import { CONTROL_PATHS } from "../../src/daemon/protocol.js";
import type { UpSubmission } from "../../src/app/up-submission.js";
import { BootRegistry } from "../../src/supervise/boots.js";
import { decodeError, type UpEvent } from "../../src/boot/up-events.js";
import { keyChecker } from "../../src/gateway/auth.js";
import { controlApi } from "../../src/daemon/control.js";
import type { StateStore } from "../../src/store/store.js";
import { BASE } from "../support/memory-source.js";

// The daemon's own user through its socket is as trusted as `up` in its own process; a file sent
// over TCP that is one of the daemon's own, byte for byte, is that cluster.

const NODES = '[[nodes]]\nname = "s1"\nhost = "127.0.0.1"\nport = 1\n[[nodes]]\nname = "s2"\nhost = "127.0.0.2"\nport = 1\n';
/** A real cluster file has its [ssh] and [docker]: what a client's file may not set. */
const SPARK_TEXT = `name = "spark"\n[ssh]\noptions = ["ConnectTimeout=5"]\n[docker]\nrun_args = ["--network", "host"]\n${NODES}`;
const SPARK_FILE = "/home/me/.config/launcher/clusters/spark.toml";
const spark = parseCluster(SPARK_FILE, SPARK_TEXT).cluster as Cluster;
const LAB_FILE = "/home/me/lab.toml";
const lab = parseCluster(LAB_FILE, SPARK_TEXT.replace('name = "spark"', 'name = "lab"')).cluster as Cluster;

const scope = (loaded: string[] = []): DaemonScope => ({
  own: [spark],
  catalogue: { find: (ref) => ({ error: `recipe "${ref}" is not one of the daemon's own` }) },
  ownTexts: new Map([["spark", SPARK_TEXT]]),
  load: (option) => {
    loaded.push(option);
    if (option === LAB_FILE) return lab;
    throw new UserError(`no cluster file ${option}`);
  },
});

test("through the owner's socket --cluster goes as the file this command reads (absolute), never as a cluster file; over TCP the file goes", () => {
  const here = {
    recipes: () => [],
    cluster: (option: string) => (option === "spark" ? { file: SPARK_FILE, text: SPARK_TEXT } : undefined),
    clusterPath: (option: string) => (option === "spark" ? SPARK_FILE : undefined),
  };
  const socket = { socket: "/run/user/1000/launcher-daemon/control-a.sock" };
  assert.deepEqual(forTheDaemon({ ref: "chat", cluster: "spark" }, socket, here), { ref: "chat", cluster: SPARK_FILE });
  assert.deepEqual(forTheDaemon({ ref: "chat", cluster: "elsewhere" }, socket, here), { ref: "chat", cluster: "elsewhere" }, "a name not found here is the daemon's to find");
  assert.deepEqual(forTheDaemon({ ref: "chat" }, socket, here), { ref: "chat" });
  assert.deepEqual(forTheDaemon({ ref: "chat", cluster: "spark" }, {}, here), { ref: "chat", cluster_file: { file: SPARK_FILE, text: SPARK_TEXT } });
});

test("the owner's --cluster may be a path or a name of its config, with [ssh] and [docker]; a client's may not", () => {
  const loaded: string[] = [];
  assert.equal(submissionPathProblem({ ref: "chat", cluster: LAB_FILE }, "owner"), undefined);
  assert.match(submissionPathProblem({ ref: "/etc/shadow", cluster: LAB_FILE }, "owner") ?? "", /^recipe "\/etc\/shadow" is a path/, "recipes come as the files the CLI sent, the owner's too");
  assert.match(submissionPathProblem({ ref: "chat", cluster: LAB_FILE }, "client") ?? "", /^cluster "\/home\/me\/lab\.toml" is a path/);
  assert.equal(submittedCluster({ ref: "chat", cluster: LAB_FILE }, scope(loaded), "owner"), lab);
  assert.deepEqual(loaded, [LAB_FILE]);
  // Its own cluster, by name or by its file's path, is the daemon's own (the one it watches).
  assert.equal(submittedCluster({ ref: "chat", cluster: "spark" }, scope(loaded), "owner"), spark);
  assert.equal(submittedCluster({ ref: "chat", cluster: SPARK_FILE }, scope(loaded), "owner"), spark);
  assert.deepEqual(loaded, [LAB_FILE], "its own clusters are not read again");
  // A client names the daemon's clusters only.
  assert.throws(() => submittedCluster({ ref: "chat", cluster: "lab" }, scope(loaded), "client"), /^UserError: the daemon has no cluster named "lab"/);
  assert.deepEqual(loaded, [LAB_FILE], "nothing is read for a client");
});

test("a cluster file sent that is one of the daemon's own, same name and same text, is that cluster; another text of that name still collides", () => {
  const sent = (file: string, text: string): UpSubmission => ({ ref: "chat", cluster_file: { file, text } });
  assert.equal(submittedCluster(sent("/laptop/spark.toml", SPARK_TEXT), scope()), spark, "a copy of the daemon's file, [ssh] and all");
  const nameless = SPARK_TEXT.replace('name = "spark"\n', "");
  const withoutName = { ...scope(), ownTexts: new Map([["spark", nameless]]) };
  assert.equal(submittedCluster(sent("/laptop/spark.toml", nameless), withoutName), spark, "named by its file, as the daemon's is");
  assert.throws(() => submittedCluster(sent("/laptop/other.toml", nameless), withoutName), /sets how the daemon's SSH or Docker run/, "the same text under another name is another cluster");
  const changed = `name = "spark"\n${NODES.replace("127.0.0.2", "10.9.9.9")}`;
  assert.throws(() => submittedCluster(sent("/laptop/spark.toml", changed), scope()), /is named "spark", as one of the daemon's own clusters is, with other content/);
});

/** Recipes the client sent: a two-node recipe the daemon does not have. */
const RECIPES = [{ ref: "chat", file: "/laptop/chat/recipe.toml", id: "chat", text: BASE }];

/** The refusal of a submission stopped at the registry (reached only once everything before it said yes). */
function submitted(s: UpSubmission, caller: Caller, uploads: string[]): Error {
  const registry = { start: () => { throw new UserError("reached the registry"); }, list: () => [] } as unknown as BootRegistry;
  const submit = bootSubmitter(registry, {} as StateStore, processEnvironment(), scope(), () => undefined, {
    refuse: (c) => {
      uploads.push(`refuse ${c.name}`);
      return undefined;
    },
    accepted: (c) => void uploads.push(`accepted ${c.name}`),
  });
  const events = submit(s, caller) as readonly UpEvent[];
  const last = events.at(-1);
  assert.equal(last?.type, "error");
  return decodeError((last as Extract<UpEvent, { type: "error" }>).error);
}

test("boots: the owner's cluster path boots; the daemon's own file sent is not taken for an upload", () => {
  const uploads: string[] = [];
  assert.equal(submitted({ ref: "chat", recipes: RECIPES, cluster: LAB_FILE }, "owner", uploads).message, "reached the registry");
  assert.match(submitted({ ref: "chat", recipes: RECIPES, cluster: LAB_FILE }, "client", uploads).message, /^cluster "\/home\/me\/lab\.toml" is a path/);
  assert.equal(submitted({ ref: "chat", recipes: RECIPES, cluster_file: { file: "/laptop/spark.toml", text: SPARK_TEXT } }, "client", uploads).message, "reached the registry");
  assert.deepEqual(uploads, [], "neither refused nor kept as a client's upload");
});

test("control API: the socket's submissions are the owner's (a cluster path passes); over TCP they are a client's (a path is refused)", async () => {
  const callers: Caller[] = [];
  const options = { registry: new BootRegistry(Date.now), submit: (_s: UpSubmission, caller: Caller) => (callers.push(caller), []), maxBodyBytes: 4096 };
  const post = async (handler: ReturnType<typeof controlApi>): Promise<number> => {
    const server = createServer((req, res) => void handler(req, res, (req.url ?? "/").split("?")[0] ?? "/"));
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${CONTROL_PATHS.boots}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer admin-secret" },
        body: JSON.stringify({ ref: "chat", cluster: LAB_FILE }),
      });
      await res.text();
      return res.status;
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  };
  assert.equal(await post(controlApi({ ...options, ownerSocket: true })), 200);
  assert.equal(await post(controlApi({ ...options, checkAdmin: keyChecker(["admin-secret"]) })), 400);
  assert.deepEqual(callers, ["owner"]);
});

test("what a client's file may not set comes back as settings, typed, not read out of the messages' words", () => {
  const refused = refusedSettings("/laptop/c.toml", `[ssh]\n[docker]\nrun_args = ["--privileged"]\nextra_args = []\n${NODES}`);
  assert.deepEqual(refused.map((r) => r.setting), ["ssh", "docker.run_args", "docker.extra_args"]);
  assert.deepEqual(refused.map((r) => r.diagnostic.loc.line), [1, 3, 4]);
});

test("boots: a cluster file of the owner's machine that is not one of the daemon's is watched from then on; the daemon's own and a client's name are not", () => {
  const watched: string[] = [];
  const entry = { ended: new Promise(() => undefined) };
  const registry = { start: () => entry, list: () => [] } as unknown as BootRegistry;
  const submit = bootSubmitter(registry, {} as StateStore, processEnvironment(), scope(), () => undefined, {
    refuse: () => undefined,
    accepted: (c) => void watched.push(`upload ${c.name}`),
    ownerFile: (c) => void watched.push(`owner ${c.name} ${c.file}`),
  });
  assert.equal(submit({ ref: "chat", recipes: RECIPES, cluster: LAB_FILE }, "owner"), entry);
  assert.equal(submit({ ref: "chat", recipes: RECIPES, cluster: SPARK_FILE }, "owner"), entry);
  assert.equal(submit({ ref: "chat", recipes: RECIPES, cluster: "spark" }, "client"), entry);
  assert.deepEqual(watched, [`owner lab ${LAB_FILE}`]);
});
