import assert from "node:assert/strict";
import { test } from "node:test";
import { RemoteError } from "../../src/config/errors.js";
import { linkedBlob, namePathProblem, parseInspection, revisionProblem, snapshotTotals } from "../../src/plan/weights.js";

// What a node's cache says is untrusted (a recipe's container writes that cache): the checks
// that stand between it and a path launcher reads or writes.
const REV = "5e1f0c4a9b8d7e6f5a4b3c2d1e0f9a8b7c6d5e4f";
const SHA = "b4cc28da729ab6cc58b96e890e1a687f959a54468980c8b8d5b27e0b5acbd468";
const GIT = "0123456789abcdef0123456789abcdef01234567";
const hex = (s: string): string => Buffer.from(s, "utf8").toString("hex");
const REPO = "/home/ai/.cache/huggingface/hub/models--org--m";

test("revisions: a 40-hex commit or a plain branch or tag name; anything that could leave snapshots/ or read as a flag is refused", () => {
  for (const ok of [REV, "main", "v1.0", "refs/pr/1", "86f746b3", "release_2024-01"]) assert.equal(revisionProblem(ok), undefined, ok);
  for (const bad of ["", "../../../../../.ssh", "..", ".", "a/../b", "main/..", "/etc", "-rf", "--force", ".hidden", "a//b", "a/", "a b", "a\nb", "main\0", "x".repeat(201), "a..b"]) {
    assert.notEqual(revisionProblem(bad), undefined, JSON.stringify(bad));
  }
});

test("names listed under snapshots/REV/: `..`, absolute paths, control characters and empty parts are refused", () => {
  for (const ok of ["config.json", "sub/dir/x.bin", ".gitattributes", "a..b"]) assert.equal(namePathProblem(ok), undefined, ok);
  const cases: [string, RegExp][] = [
    ["../../../.ssh/authorized_keys", /`\.\.`/],
    ["sub/../../x", /`\.\.`/],
    ["/home/ai/.ssh/id_ed25519", /absolute/],
    ["a\nF 1 - evil", /control character/],
    ["tab\there", /control character/],
    ["a//b", /empty part/],
    ["./x", /`\.`/],
    ["", /empty name/],
  ];
  for (const [name, why] of cases) assert.match(namePathProblem(name) ?? "", why, JSON.stringify(name));
});

test("links: only into blobs/ of the same repo, by huggingface_hub's relative path for the file's depth, to a blob name", () => {
  assert.deepEqual(linkedBlob("config.json", `../../blobs/${GIT}`), { blob: GIT });
  assert.deepEqual(linkedBlob("sub/dir/x.bin", `../../../../blobs/${SHA}`), { blob: SHA });
  for (const [path, link] of [
    ["config.json", "/home/ai/.ssh/id_ed25519"],
    ["config.json", "../../../../../.ssh/id_ed25519"],
    ["config.json", `../../../blobs/${SHA}`],
    ["sub/x.bin", `../../blobs/${SHA}`],
    ["config.json", "../../blobs/../refs/main"],
    ["config.json", "../../blobs/id_rsa"],
    ["config.json", `../../snapshots/${SHA}`],
  ] as const) {
    assert.ok("problem" in linkedBlob(path, link), `${path} -> ${link}`);
  }
});

test("an inspection: its files parsed; a bad ref, name or link is a RemoteError naming the node and the file", () => {
  const good = `ref ${hex("main")} ${hex(REV)}\nsnapshot\nL 10 ${hex("config.json")} ${hex(`../../blobs/${GIT}`)}\nL -1 ${hex("w.bin")} ${hex(`../../blobs/${SHA}`)}\nF 3 ${hex("README.md")}\nend\n`;
  const seen = parseInspection("n2", REPO, "", good);
  assert.ok(seen.kind === "snapshot");
  assert.equal(seen.revision, REV);
  assert.deepEqual(snapshotTotals(seen.files), { files: 2, bytes: 13, broken: 1 });
  assert.deepEqual(parseInspection("n2", REPO, "", "missing no folder\n"), { kind: "missing", reason: "no folder" });
  const refusedAs = (text: string, file: string, pin = ""): void => {
    assert.throws(() => parseInspection("n2", REPO, pin, text), (e: unknown) => e instanceof RemoteError && e.node === "n2" && e.message.startsWith(`${REPO}/${file}`), file);
  };
  refusedAs(`ref ${hex("main")} ${hex("../../../../../.ssh")}\nend\n`, "refs/main");
  refusedAs(`ref ${hex("v1")} ${hex("-rf")}\nend\n`, "refs/v1", "v1");
  refusedAs(`ref ${hex("main")} ${hex(REV)}\nsnapshot\nF 3 ${hex("../x")}\nend\n`, `snapshots/${REV}`);
  refusedAs(`ref ${hex("main")} ${hex(REV)}\nsnapshot\nF 3 ${hex("a\nb")}\nend\n`, `snapshots/${REV}`);
  refusedAs(`ref ${hex("main")} ${hex(REV)}\nsnapshot\nL 3 ${hex("k")} ${hex("/home/ai/.ssh/id_ed25519")}\nend\n`, `snapshots/${REV}/k`);
  refusedAs(`ref ${hex("main")} ${hex(REV)}\nsnapshot\nO -1 ${hex("fifo")}\nend\n`, `snapshots/${REV}/fifo`);
  refusedAs(`ref ${hex("main")} ${hex(REV)}\nsnapshot\nF 3 ff\nend\n`, `snapshots/${REV}`);
  // A ref file's content is never shown (it could be anything the container put there).
  assert.throws(() => parseInspection("n2", REPO, "", `ref ${hex("main")} ${hex("-----BEGIN OPENSSH PRIVATE KEY-----")}\nend\n`), (e: Error) => !e.message.includes("PRIVATE"));
  assert.throws(() => parseInspection("n2", REPO, "", `ref ${hex("main")} ${hex(REV)}\nsnapshot\n`), /cut short/, "no end line");
});
