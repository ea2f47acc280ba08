import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { chainIds, layerSkip, leftOut, legacyLayerIds, saveWithout, storedChains, TAR_FILTER_PERL } from "../../src/transfer/layers.js";
import { pushSkip, type NodeProbe } from "../../src/transfer/route.js";

const digest = (s: string): string => `sha256:${createHash("sha256").update(s).digest("hex")}`;
const [a, b, c, d] = ["base", "cuda", "torch", "app"].map(digest) as [string, string, string, string];

test("chain IDs: the first layer's is its diff ID, each next one the SHA-256 of the one before, a space and its diff ID (image-spec)", () => {
  const chains = chainIds([a, b, c]);
  assert.equal(chains[0], a);
  assert.equal(chains[1], digest(`${a} ${b}`));
  assert.equal(chains[2], digest(`${chains[1] as string} ${c}`));
  // The same diff ID on another base is another layer.
  assert.notEqual(chainIds([b, c])[1], chains[2]);
  assert.deepEqual([...storedChains([[a, b], [a, d]])].sort(), [a, chains[1], chainIds([a, d])[1]].sort());
});

test("layer skip: the first layers every target stores, in both archive forms; nothing when one target lacks the base or the IDs are not digests", () => {
  const image = [a, b, c, d];
  const chains = chainIds(image);
  // Both targets ran an older build on the same base and CUDA layers; one of them also has torch.
  const n2 = storedChains([[a, b, digest("old torch")]]);
  const n3 = storedChains([[a, b, c]]);
  const skip = layerSkip(image, [n2, n3]);
  assert.equal(skip?.layers, 2);
  const legacy = legacyLayerIds(image);
  assert.equal(legacy.length, 3, "every layer but the last");
  assert.deepEqual(skip?.names, [`blobs/sha256/${a.slice(7)}`, `blobs/sha256/${b.slice(7)}`, `${legacy[0] as string}/layer.tar`, `${legacy[1] as string}/layer.tar`]);
  // The v1 IDs chain: each one's input names its parent, so no two layers share one.
  assert.equal(new Set(legacy).size, 3);
  assert.equal(layerSkip(image, [n3])?.layers, 3);
  assert.equal(layerSkip(image, [n2, storedChains([[digest("other base")]])]), undefined);
  assert.equal(layerSkip(image, []), undefined);
  assert.equal(layerSkip(["not-a-digest"], [new Set(["not-a-digest"])]), undefined);
  assert.ok(chains.every((x) => x.startsWith("sha256:")));
  // A diff ID that comes again among the layers sent stays in both forms: one file in the OCI form,
  // and in the legacy form the first copy, which the later one is a symlink to (save.go before 25).
  const again = layerSkip([a, b, c, a], [storedChains([[a, b]])]);
  assert.deepEqual(again?.names, [`blobs/sha256/${b.slice(7)}`, `${legacyLayerIds([a, b, c, a])[1] as string}/layer.tar`]);
  assert.deepEqual(again?.dropped, [1]);
  // A Docker before 25 on a node whose local time is not UTC writes the epoch with its offset.
  assert.notDeepEqual(legacyLayerIds(image, "+01:00"), legacyLayerIds(image));
  assert.deepEqual(legacyLayerIds(image, "+00:00"), legacyLayerIds(image));
});

test("a push's skip: only where the source runs the filter, and a target whose images containerd keeps stores none of them", () => {
  const probe = (node: string, extra: Partial<NodeProbe>): NodeProbe => ({ node, tools: true, path: "/var/lib/docker", store: "docker", ...extra });
  const source = probe("n1", { epochOffset: "+00:00" });
  const n2 = probe("n2", { images: [[a, b]] });
  assert.equal(pushSkip([a, b, c], source, [n2])?.layers, 2);
  // The same layers listed by a store containerd keeps: its archive must carry them all.
  assert.equal(pushSkip([a, b, c], source, [n2, probe("n3", { images: [[a, b]], store: "containerd" })]), undefined);
  // No perl on the source: no filter, the whole archive.
  assert.equal(pushSkip([a, b, c], { ...source, tools: false }, [n2]), undefined);
  assert.equal(pushSkip([a, b, c], undefined, [n2]), undefined);
  // The source's epoch offset goes into the legacy names.
  assert.deepEqual(pushSkip([a, b, c], { ...source, epochOffset: "+02:00" }, [n2])?.names, layerSkip([a, b, c], [storedChains([[a, b]])], "+02:00")?.names);
  assert.notDeepEqual(pushSkip([a, b, c], { ...source, epochOffset: "+02:00" }, [n2])?.names, pushSkip([a, b, c], source, [n2])?.names);
});

test("saveWithout: only layer entries reach the command line, as arguments after the program", () => {
  const argv = saveWithout("practice-engine:local", [`blobs/sha256/${a.slice(7)}`]);
  assert.deepEqual(argv.slice(0, 2), ["bash", "-c"]);
  assert.deepEqual(argv.slice(-2), ["practice-engine:local", `blobs/sha256/${a.slice(7)}`]);
  assert.throws(() => saveWithout("img", ["manifest.json"]), /not a layer entry/);
  assert.throws(() => saveWithout("img", ["; rm -rf /"]), /not a layer entry/);
});

// The filter itself, run by this machine's perl on archives GNU tar writes (pax and GNU forms, long
// names) and on one written here with a base-256 size, read back by GNU tar.
const dir = mkdtempSync(path.join(tmpdir(), "launcher-layers-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function filter(archive: Buffer, drop: readonly string[]): { out: Buffer; err: string } {
  const r = spawnSync("perl", ["-e", TAR_FILTER_PERL, "--", ...drop], { input: archive, maxBuffer: 1 << 28 });
  assert.equal(r.status, 0, r.stderr.toString());
  return { out: r.stdout, err: r.stderr.toString() };
}
const list = (archive: Buffer): string[] => {
  const r = spawnSync("tar", ["-t"], { input: archive, encoding: "buffer" });
  assert.equal(r.status, 0, r.stderr.toString());
  return r.stdout.toString().split("\n").filter((l) => l !== "");
};

for (const format of ["pax", "gnu"]) {
  test(`tar filter (${format}): the named layer files go, data and all; every other entry, long names included, comes through whole`, () => {
    const src = path.join(dir, format);
    // Split into the ustar prefix (pax) or a GNU long name; and one no prefix can hold (a pax path record).
    const long = `${"x".repeat(64)}/${"y".repeat(64)}/layer.tar`;
    const longer = `${"z".repeat(120)}.tar`;
    const files: Record<string, Buffer> = {
      [`blobs/sha256/${a.slice(7)}`]: Buffer.alloc(70_000, 1),
      [`blobs/sha256/${b.slice(7)}`]: Buffer.alloc(513, 2),
      [`${"e".repeat(64)}/layer.tar`]: Buffer.alloc(1024, 3),
      [`${"e".repeat(64)}/json`]: Buffer.from("{}"),
      [long]: Buffer.alloc(100, 4),
      [longer]: Buffer.alloc(10, 5),
      "manifest.json": Buffer.from('[{"Layers":[]}]'),
    };
    for (const [name, data] of Object.entries(files)) {
      mkdirSync(path.dirname(path.join(src, name)), { recursive: true });
      writeFileSync(path.join(src, name), data);
    }
    const made = spawnSync("tar", ["-c", `--format=${format}`, "-C", src, ...Object.keys(files)], { encoding: "buffer", maxBuffer: 1 << 28 });
    assert.equal(made.status, 0, made.stderr.toString());
    const { out, err } = filter(made.stdout, [`blobs/sha256/${a.slice(7)}`, `${"e".repeat(64)}/layer.tar`, long, longer]);
    assert.deepEqual(list(out), [`blobs/sha256/${b.slice(7)}`, `${"e".repeat(64)}/json`, "manifest.json"]);
    assert.deepEqual(leftOut(err), { files: 4, bytes: 71134 });
    const back = path.join(dir, `${format}-out`);
    mkdirSync(back);
    const x = spawnSync("tar", ["-x", "-C", back], { input: out });
    assert.equal(x.status, 0, x.stderr.toString());
    for (const name of [`blobs/sha256/${b.slice(7)}`, "manifest.json"]) assert.deepEqual(readFileSync(path.join(back, name)), files[name]);
    // Nothing named: the archive comes through byte for byte.
    const whole = filter(made.stdout, []);
    assert.deepEqual(whole.out, made.stdout);
    assert.equal(leftOut(whole.err), undefined, "nothing left out, nothing said");
  });
}

/** One ustar header (GNU tar checks the checksum), its size in GNU base-256 when asked. */
function header(name: string, size: number, base256: boolean): Buffer {
  const h = Buffer.alloc(512);
  h.write(name, 0, "utf8");
  h.write("0000644\0", 100);
  h.write("0000000\0", 108);
  h.write("0000000\0", 116);
  if (base256) {
    h[124] = 0x80;
    h.writeUIntBE(size, 124 + 6, 6);
  } else h.write(`${size.toString(8).padStart(11, "0")}\0`, 124);
  h.write("00000000000\0", 136);
  h.write("0", 156);
  h.write("ustar\0", 257);
  h.write("00", 263);
  h.fill(" ", 148, 156);
  let sum = 0;
  for (const byte of h) sum += byte;
  h.write(`${sum.toString(8).padStart(6, "0")}\0 `, 148);
  return h;
}
const entry = (name: string, data: Buffer, base256 = false): Buffer => Buffer.concat([header(name, data.length, base256), data, Buffer.alloc((512 - (data.length % 512)) % 512)]);

test("tar filter: a size in GNU base-256 (how sizes of 8 GiB and more are written) is read as such", () => {
  const kept = Buffer.alloc(3000, 7);
  const archive = Buffer.concat([entry(`${"f".repeat(64)}/layer.tar`, Buffer.alloc(5000, 9), true), entry("keep.bin", kept, true), Buffer.alloc(1024)]);
  const { out } = filter(archive, [`${"f".repeat(64)}/layer.tar`]);
  assert.deepEqual(list(out), ["keep.bin"]);
  assert.deepEqual(out.subarray(512, 512 + kept.length), kept);
});
