import { createHash } from "node:crypto";
import { withDockerApi } from "./docker-api.js";

/**
 * Which layers of an image need not cross the network: those every target already stores.
 *
 * `docker load` looks each layer of the archive up by its chain ID and reads the layer's file only
 * when the store lacks it (moby/moby image/tarexport/load.go: `l.lss.Get(r.ChainID())`, then
 * `loadLayer` on a miss, which is what opens the file), and it accepts the image only when every
 * layer's content matches the config's diff IDs. So an archive without the files of layers the
 * target has loads the same image, bit for bit, and one that left out a layer the target lacks
 * fails (no image is tagged). A pushed vLLM fork shares its CUDA and torch layers, gigabytes,
 * with the image the nodes ran before: those stay where they are.
 *
 * The archive `docker save` writes names each layer's file by a form that depends on Docker's
 * version; both are known before the first byte:
 * - Docker 25 and later: `blobs/sha256/<diff ID>` (OCI layout; moby image/tarexport/save.go
 *   saveLayer: `lDgst := digest.Digest(l.DiffID())`). An image store kept by containerd names its
 *   blobs by their compressed digest instead: no name matches, nothing is left out.
 * - Docker before 25: `<v1 ID>/layer.tar`, where the v1 ID of every layer but the last is the
 *   SHA-256 of a fixed legacy config (an empty container config, created at the epoch) with the
 *   layer's chain ID and its parent's v1 ID (moby image/v1/imagev1.go CreateID, which marshals
 *   the config as a JSON object with sorted keys). The last layer's v1 ID hashes the image's whole
 *   config and is never left out (a target that stores every layer of the image is rare).
 * A name that is not right only means a layer is sent anyway.
 */

const sha256 = (text: string): string => createHash("sha256").update(text).digest("hex");
const DIGEST = /^sha256:[0-9a-f]{64}$/;

/**
 * The chain IDs of an image's layers, from its diff IDs (`docker image inspect` RootFS.Layers):
 * ChainID(L0) = DiffID(L0), ChainID(Ln) = SHA256(ChainID(Ln-1) + " " + DiffID(Ln))
 * (opencontainers/image-spec config.md, "Layer ChainID").
 */
export function chainIds(diffIds: readonly string[]): string[] {
  const out: string[] = [];
  for (const d of diffIds) out.push(out.length === 0 ? d : `sha256:${sha256(`${out[out.length - 1] as string} ${d}`)}`);
  return out;
}

/** RootFS.Layers as `docker image inspect --format '{{json .RootFS.Layers}}'` prints it: a list of strings, else undefined. */
export function diffIdsOf(json: string): string[] | undefined {
  try {
    const v: unknown = JSON.parse(json);
    return Array.isArray(v) && v.every((x): x is string => typeof x === "string") ? v : undefined;
  } catch {
    return undefined;
  }
}

/** Every chain ID a node stores, from the RootFS.Layers of each of its images. */
export function storedChains(images: readonly (readonly string[])[]): Set<string> {
  return new Set(images.flatMap((layers) => chainIds(layers)));
}

/**
 * The JSON a Docker before 25 hashes for the v1 ID of a layer that is not the image's last
 * (moby image/tarexport/save.go saveImage: `image.V1Image{Created: time.Unix(0, 0)}`, marshalled
 * with its empty container config; image/v1/imagev1.go CreateID adds layer_id and parent).
 */
const LEGACY_CONTAINER_CONFIG =
  '{"Hostname":"","Domainname":"","User":"","AttachStdin":false,"AttachStdout":false,"AttachStderr":false,"Tty":false,"OpenStdin":false,"StdinOnce":false,"Env":null,"Cmd":null,"Image":"","Volumes":null,"WorkingDir":"","Entrypoint":null,"OnBuild":null,"Labels":null}';

/**
 * The time `time.Unix(0, 0)` marshals to in Go: the epoch in dockerd's local time, RFC 3339 ("Z"
 * for UTC, else the offset), so the v1 IDs of a Docker before 25 depend on its node's time zone.
 */
function epochIn(offset: string): string {
  const m = /^([+-])(\d\d):(\d\d)$/.exec(offset);
  const minutes = m === null ? 0 : (m[1] === "-" ? -1 : 1) * (Number(m[2]) * 60 + Number(m[3]));
  if (minutes === 0) return "1970-01-01T00:00:00Z";
  return `${new Date(minutes * 60_000).toISOString().slice(0, 19)}${offset}`;
}

/** The v1 IDs (hex) Docker before 25 gives the image's layers in a save, but for the last; `epochOffset` the source's (`date -d @0 +%:z`). */
export function legacyLayerIds(diffIds: readonly string[], epochOffset = "+00:00"): string[] {
  const chains = chainIds(diffIds);
  const created = epochIn(epochOffset);
  const ids: string[] = [];
  for (const chain of chains.slice(0, -1)) {
    const parent = ids.length === 0 ? "" : `,"parent":"sha256:${ids[ids.length - 1] as string}"`;
    ids.push(sha256(`{"container_config":${LEGACY_CONTAINER_CONFIG},"created":"${created}","layer_id":"${chain}"${parent}}`));
  }
  return ids;
}

export interface LayerSkip {
  /** How many of the image's first layers every target stores. */
  readonly layers: number;
  /** The archive entries (layer files, in either form) to leave out. */
  readonly names: readonly string[];
  /** The layers (by position) whose files go in neither form: what the targets surely do not unpack. */
  readonly dropped: readonly number[];
}

/**
 * What to leave out of the archive sent to `targets` (each the chain IDs it stores): the longest
 * run of the image's first layers that every target has (a store holds a layer's parents too).
 * A diff ID that comes again among the layers still sent stays in both forms: one file in the OCI
 * form, and the first copy in the legacy form, which the later ones are symlinks to (moby
 * save.go saveLayer before 25: `os.Symlink` to the diff ID's first path). Undefined when nothing
 * can be left out, or the diff IDs do not read as digests.
 */
export function layerSkip(diffIds: readonly string[], targets: readonly ReadonlySet<string>[], epochOffset?: string): LayerSkip | undefined {
  if (targets.length === 0 || diffIds.length === 0 || !diffIds.every((d) => DIGEST.test(d))) return undefined;
  const chains = chainIds(diffIds);
  let layers = 0;
  while (layers < chains.length && targets.every((t) => t.has(chains[layers] as string))) layers++;
  if (layers === 0) return undefined;
  const kept = new Set(diffIds.slice(layers));
  const goes = (i: number): boolean => !kept.has(diffIds[i] as string);
  const positions = [...Array(layers).keys()].filter(goes);
  const legacy = legacyLayerIds(diffIds, epochOffset);
  const oci = positions.map((i) => `blobs/sha256/${(diffIds[i] as string).slice("sha256:".length)}`);
  const old = positions.filter((i) => i < legacy.length).map((i) => `${legacy[i] as string}/layer.tar`);
  return { layers, names: [...new Set([...oci, ...old])], dropped: positions.filter((i) => i < legacy.length) };
}

/** An entry name `layerSkip` gives: what the archive filter on a node takes as an argument. */
export const SKIPPABLE_ENTRY = /^(?:blobs\/sha256\/[0-9a-f]{64}|[0-9a-f]{64}\/layer\.tar)$/;

/**
 * The filter between `docker save` and the wire, on the source node: a tar stream copied as it
 * comes, but for the regular files named in @ARGV (data and all: the next header follows at once).
 * perl-base is on every node (./hop.ts says why), Archive::Tar is not, and a whole-archive
 * rewrite would hold gigabytes; a tar is 512-byte headers, each followed by its data padded to
 * 512 (POSIX pax, GNU tar's format). Kept: a header's own name (with the ustar prefix), a GNU long
 * name ('L') or a pax record ('x': path, size) before it, which go or stay with their entry;
 * sizes in octal or GNU base-256. Everything after the end-of-archive block is copied as it is.
 */
export const TAR_FILTER_PERL = String.raw`
use strict; use warnings;
my %drop = map { ($_ => 1) } @ARGV;
binmode STDIN; binmode STDOUT;
sub fill {
  my ($n) = @_; my $b = '';
  while (length($b) < $n) { my $r = sysread(STDIN, $b, $n - length($b), length($b)); die "reading the archive: $!\n" unless defined $r; last if $r == 0; }
  return $b;
}
sub put {
  my $o = 0;
  while ($o < length $_[0]) { my $w = syswrite(STDOUT, $_[0], length($_[0]) - $o, $o); die "writing the archive: $!\n" unless defined $w; $o += $w; }
}
sub padded { return $_[0] + (512 - $_[0] % 512) % 512; }
sub size_of {
  my ($f) = @_;
  if (ord(substr($f, 0, 1)) & 0x80) { my $n = ord(substr($f, 0, 1)) & 0x7f; $n = $n * 256 + ord(substr($f, $_, 1)) for 1 .. 11; return $n; }
  $f =~ s/[\0 ]+$//; $f =~ s/^[\0 ]+//; return $f eq '' ? 0 : oct($f);
}
sub pass {
  my ($n, $keep) = @_; my $left = padded($n);
  while ($left > 0) { my $c = fill($left > 1048576 ? 1048576 : $left); die "the archive ends inside an entry\n" if $c eq ''; put($c) if $keep; $left -= length $c; }
}
my ($held, $long, $psize, $left_out, $bytes) = ('', undef, undef, 0, 0);
while (1) {
  my $h = fill(512);
  if (length($h) < 512) { put($held . $h); last; }
  if ($h eq "\0" x 512) { put($held . $h); while ((my $c = fill(1048576)) ne '') { put($c); } last; }
  my $type = substr($h, 156, 1);
  my $size = size_of(substr($h, 124, 12));
  if ($type eq 'x' || $type eq 'L') {
    my $d = fill(padded($size)); die "the archive ends inside an entry\n" if length($d) < padded($size);
    my $body = substr($d, 0, $size);
    if ($type eq 'L') { ($long = $body) =~ s/\0.*//s; }
    else {
      my $p = 0;
      while ($p < length $body) {
        my ($len) = substr($body, $p, 20) =~ /^(\d+) /; last unless $len;
        my $rec = substr($body, $p, $len); $p += $len;
        if ($rec =~ /^\d+ path=(.*)\n\z/s) { $long = $1; } elsif ($rec =~ /^\d+ size=(\d+)\n\z/) { $psize = $1; }
      }
    }
    $held .= $h . $d; next;
  }
  my $name = unpack('Z100', $h);
  my $prefix = substr($h, 257, 6) eq "ustar\0" ? unpack('Z155', substr($h, 345, 155)) : '';
  $name = "$prefix/$name" if $prefix ne '';
  $name = $long if defined $long;
  $size = $psize if defined $psize;
  my $keep = !(($type eq '0' || $type eq "\0") && $drop{$name});
  if ($keep) { put($held . $h); } else { $left_out++; $bytes += $size; }
  pass($size, $keep);
  ($held, $long, $psize) = ('', undef, undef);
}
print STDERR "left out $left_out layer files ($bytes bytes) that every target stores\n" if $left_out;
`;

/** What TAR_FILTER_PERL says it left out (its one stderr line, above), from the source's stderr; undefined when it left nothing out. */
export function leftOut(stderr: string): { readonly files: number; readonly bytes: number } | undefined {
  const m = /^left out (\d+) layer files \((\d+) bytes\) that every target stores$/m.exec(stderr);
  return m === null ? undefined : { files: Number(m[1]), bytes: Number(m[2]) };
}

/**
 * The source's payload command: `docker save` through TAR_FILTER_PERL, leaving out `names` (each
 * checked to be an entry layerSkip gives: values reach the command line only as arguments), with
 * pipefail so that a failed save fails the command.
 */
export function saveWithout(image: string, names: readonly string[]): string[] {
  return withDockerApi("bash", 'f=$1 img=$2; shift 2; set -o pipefail; docker_api save "$img" | perl -e "$f" -- "$@"', [TAR_FILTER_PERL, image, ...layerEntries(names)]);
}

/** `names`, each checked to be an entry layerSkip gives: what TAR_FILTER_PERL takes, on the command line or through a hop. */
export function layerEntries(names: readonly string[]): readonly string[] {
  const bad = names.find((n) => !SKIPPABLE_ENTRY.test(n));
  if (bad !== undefined) throw new Error(`not a layer entry of docker save: ${bad}`);
  return names;
}
