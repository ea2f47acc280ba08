import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, describe, test } from "node:test";
import { DOCKER_API_PERL, dockerSave, withDockerApi } from "../../src/transfer/docker-api.js";

// Which way docker_api goes (a stand-in `docker` CLI), and how its program reads answers that a
// real daemon gives only when something breaks (a stand-in daemon on a unix socket). The real
// daemons' answers, good and bad, are checked on the practice cluster (test/integration/fresh-hosts/transfer.test.ts).
const dir = mkdtempSync(path.join(tmpdir(), "launcher-docker-api-"));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Ran {
  code: number | null;
  stdout: Buffer;
  stderr: string;
  /** The stand-in CLI's calls other than `context inspect`. */
  calls: string[];
}

/**
 * Runs `argv` with a stand-in docker CLI whose `context inspect` prints `endpoint` (fails when
 * undefined) and that logs every other call; `pathDirs`: the rest of PATH. Asynchronous: a
 * stand-in daemon in this process must be able to answer meanwhile.
 */
async function withStandIn(argv: readonly string[], endpoint: string | undefined, input: Buffer | string = "", pathDirs: readonly string[] = [process.env.PATH ?? ""]): Promise<Ran> {
  const log = path.join(dir, "calls.log");
  rmSync(log, { force: true });
  const docker = path.join(dir, "docker");
  writeFileSync(docker, `#!/bin/sh\nif [ "$1 $2" = "context inspect" ]; then ${endpoint === undefined ? "exit 1" : `echo '${endpoint}'; exit 0`}; fi\necho "$*" >> '${log}'\n`);
  chmodSync(docker, 0o755);
  const [shell, ...args] = argv;
  // By its full path: the PATH given may hold no shell.
  const child = spawn(`/bin/${shell as string}`, args, { env: { ...process.env, PATH: [dir, ...pathDirs].join(":") } });
  const out: Buffer[] = [];
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => out.push(d));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
  child.stdin.on("error", () => undefined);
  child.stdin.end(input);
  const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
  let calls: string[] = [];
  try {
    calls = readFileSync(log, "utf8").trim().split("\n");
  } catch {
    calls = [];
  }
  return { code, stdout: Buffer.concat(out), stderr, calls };
}

/**
 * A stand-in Docker daemon on a unix socket: `answer` gets the request's head (and, for a load, the
 * whole request once its last chunk came) and writes raw bytes back. Returns the endpoint and a stop.
 */
async function standInDaemon(answer: (request: string, socket: Socket) => void): Promise<{ endpoint: string; stop: () => Promise<void> }> {
  const socketPath = path.join(dir, `d${Math.random().toString(36).slice(2)}.sock`);
  const server = createServer((socket) => {
    let request = "";
    socket.on("data", (d: Buffer) => {
      request += d.toString("latin1");
      const head = request.indexOf("\r\n\r\n");
      if (head < 0) return;
      if (request.startsWith("GET ") || request.endsWith("\r\n0\r\n\r\n")) answer(request, socket);
    });
    socket.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return { endpoint: `unix://${socketPath}`, stop: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** An HTTP/1.1 answer whose body is `parts`, one chunk each (RFC 9112 7.1), and the last chunk unless `cut`. */
const chunked = (parts: readonly string[], cut = false): string =>
  `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${parts.map((p) => `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`).join("")}${cut ? "" : "0\r\n\r\n"}`;

/** A tar's end as every writer closes it: two zero blocks. */
const TAR_END = Buffer.alloc(1024);
const loadArgv = withDockerApi("sh", "docker_api load", []);

test("the program compiles under this machine's perl", async () => {
  const r = spawn("perl", ["-c", "-e", DOCKER_API_PERL]);
  assert.equal(await new Promise((resolve) => r.on("close", resolve)), 0);
});

describe("which way docker_api goes", () => {
  test("an endpoint that is not a local socket (tcp, ssh) or a CLI without contexts: the CLI saves and loads, the image after --", async () => {
    for (const endpoint of ["tcp://10.0.0.5:2376", "ssh://spark@dgx1", undefined]) {
      assert.deepEqual((await withStandIn(dockerSave("vllm:fork-7"), endpoint)).calls, ["save -- vllm:fork-7"], String(endpoint));
      assert.deepEqual((await withStandIn(loadArgv, endpoint)).calls, ["load --quiet"], String(endpoint));
    }
  });

  test("a local socket on a node without perl: the CLI still does the work", async () => {
    // Only the stand-in and the shell's own builtins: no perl on this PATH.
    assert.deepEqual((await withStandIn(dockerSave("vllm:fork-7"), "unix:///var/run/docker.sock", "", [])).calls, ["save -- vllm:fork-7"]);
  });

  test("a socket that takes no connection (a docker that is a wrapper around sudo): the CLI does the work, with the archive whole", async () => {
    const r = await withStandIn(withDockerApi("sh", 'docker_api load; wc -c', []), `unix://${path.join(dir, "nobody.sock")}`, "x".repeat(5000));
    assert.deepEqual(r.calls, ["load --quiet"]);
    assert.equal(r.stderr, "");
    // The stand-in CLI reads nothing: every byte is still there for it.
    assert.equal(r.stdout.toString().trim(), "5000");
  });

  test("a socket that answers: the CLI is not asked to save or load; an unknown mode is refused either way", async () => {
    const daemon = await standInDaemon((_req, socket) => socket.end(Buffer.concat([Buffer.from("HTTP/1.0 200 OK\r\n\r\ntar"), TAR_END])));
    try {
      const r = await withStandIn(dockerSave("vllm:fork-7"), daemon.endpoint);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(r.calls, []);
      assert.equal((await withStandIn(withDockerApi("sh", "docker_api bogus", []), daemon.endpoint)).code, 2);
      assert.equal((await withStandIn(withDockerApi("sh", "docker_api bogus", []), "tcp://10.0.0.5:2376")).code, 2);
    } finally {
      await daemon.stop();
    }
  });
});

describe("answers a daemon gives when something breaks (a stand-in daemon)", () => {
  test("a save asks for the name percent-encoded, writes the body as it comes, and fails when the archive stops before a tar's end", async () => {
    let asked = "";
    const daemon = await standInDaemon((req, socket) => {
      asked = req.split("\r\n")[0] ?? "";
      socket.end(Buffer.concat([Buffer.from("HTTP/1.0 200 OK\r\nContent-Type: application/x-tar\r\n\r\n"), Buffer.alloc(1000, 7)]));
    });
    try {
      const r = await withStandIn(dockerSave("nvcr.io/nvidia/vllm:25.09 py3"), daemon.endpoint);
      assert.equal(asked, "GET /images/get?names=nvcr.io%2Fnvidia%2Fvllm%3A25.09%20py3 HTTP/1.0");
      assert.equal(r.stdout.length, 1000, "what came was passed on");
      assert.equal(r.code, 1);
      assert.equal(r.stderr.trim(), "the archive from the Docker daemon ended before its end");
    } finally {
      await daemon.stop();
    }
  });

  test("a save that fails after its first byte: the daemon's message, not a success", async () => {
    const daemon = await standInDaemon((_req, socket) => socket.end(`HTTP/1.0 200 OK\r\n\r\n${"t".repeat(700)}{"errorDetail":{"message":"layer does not exist"},"error":"layer does not exist"}\r\n`));
    try {
      const r = await withStandIn(dockerSave("x:1"), daemon.endpoint);
      assert.equal(r.code, 1);
      assert.equal(r.stderr.trim(), "Error response from daemon: layer does not exist");
    } finally {
      await daemon.stop();
    }
  });

  test("a load: the archive goes in chunks; the answer's lines, split across chunks with extensions, print as docker load --quiet prints them", async () => {
    let body = "";
    const daemon = await standInDaemon((req, socket) => {
      body = req.slice(req.indexOf("\r\n\r\n") + 4);
      const text = '{"stream":"Loaded image: engine:1\\n"}\r\n{"stream":"Loaded image ID: sha256:ab\\u003c\\n"}\r\n';
      // Split inside a line, the first chunk with an extension.
      socket.end(chunked([text.slice(0, 16), text.slice(16)]).replace("\r\n10\r\n", "\r\n10;x=y\r\n"));
    });
    try {
      const r = await withStandIn(loadArgv, daemon.endpoint, "archive bytes");
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.toString(), "Loaded image: engine:1\nLoaded image ID: sha256:ab<\n");
      assert.equal(body, "d\r\narchive bytes\r\n0\r\n\r\n");
    } finally {
      await daemon.stop();
    }
  });

  test("a load whose answer is cut short, or carries an error, fails and claims nothing loaded", async () => {
    const answers = [
      // The connection ends before the last chunk: the load's outcome is unknown.
      chunked(['{"stream":"Loaded image: engine:1\\n"}\r\n'], true),
      // An error inside a 200 answer, as the handler writes it.
      chunked(['{"errorDetail":{"message":"no space left on device"},"error":"no space left on device"}\r\n']),
      // A refusal before the body.
      'HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 26\r\n\r\n{"message":"out of order"}',
    ];
    const said = ["Loaded image: engine:1\nthe Docker daemon's answer ended before its end", "no space left on device", "Error response from daemon: out of order"];
    for (const [i, raw] of answers.entries()) {
      const daemon = await standInDaemon((_req, socket) => socket.end(raw));
      try {
        const r = await withStandIn(loadArgv, daemon.endpoint, "archive");
        assert.equal(r.code, 1, raw);
        assert.equal(r.stdout.length, 0, "nothing on stdout, where LOAD_ONLY_SCRIPT reads what was loaded");
        assert.equal(r.stderr.trim(), said[i]);
      } finally {
        await daemon.stop();
      }
    }
  });
});
