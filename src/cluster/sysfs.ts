import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";

/** Read-only access to a node's /sys and /proc as files: a folder here, or a probe's dump. */
export interface FileTree {
  /** Entry names in a folder (absolute path as on the node), [] when it is not there. */
  list(dir: string): string[];
  /** A file's text, trimmed; undefined when it cannot be read (absent, or EINVAL as unused GIDs give). */
  read(file: string): string | undefined;
}

/** A tree rooted at a local folder: `root` stands for the node's `/` (fixtures, or this machine). */
export function folderTree(root: string): FileTree {
  const at = (p: string): string => path.join(root, p);
  return {
    list: (dir) => (existsSync(at(dir)) ? readdirSync(at(dir)).sort() : []),
    read: (file) => {
      try {
        return readFileSync(at(file), "utf8").trim();
      } catch {
        return undefined;
      }
    },
  };
}

const IB = "/sys/class/infiniband";
/** GIDs read per port (doctor's dump, readHcas, and the export's start script, src/export/fabric-start.ts). */
export const GIDS_READ = 16;

/**
 * The shell script that dumps what `readHcas` reads, for a node reached over SSH: one
 * `==> path <==` header per file (or `==> path/ <==` with one entry per line for a folder).
 * Its first argument is the root ("" on a node; a fixture folder in tests), left out of the paths.
 */
export const SYSFS_DUMP_SCRIPT = `root="$1"
for hca in "$root"${IB}/*; do
  [ -d "$hca" ] || continue
  h=\${hca#"$root"}
  printf '==> %s/ <==\\n' "$h/device/net"; ls "$hca/device/net" 2>/dev/null
  for port in "$hca"/ports/*; do
    [ -d "$port" ] || continue
    p=\${port#"$root"}
    for f in state phys_state link_layer; do printf '==> %s <==\\n' "$p/$f"; cat "$port/$f" 2>/dev/null; done
    i=0
    while [ $i -lt ${GIDS_READ} ]; do
      printf '==> %s <==\\n' "$p/gids/$i"; cat "$port/gids/$i" 2>/dev/null
      printf '==> %s <==\\n' "$p/gid_attrs/types/$i"; cat "$port/gid_attrs/types/$i" 2>/dev/null
      i=$((i+1))
    done
  done
done`;

/** The tree a SYSFS_DUMP_SCRIPT run printed. Folders are listed; everything else is a file. */
export function dumpTree(text: string): FileTree {
  const files = new Map<string, string>();
  let current: string | undefined;
  const lines: string[] = [];
  const flush = (): void => {
    if (current !== undefined) files.set(current, lines.join("\n").trim());
    lines.length = 0;
  };
  for (const line of text.split("\n")) {
    const m = /^==> (.*) <==$/.exec(line);
    if (m) {
      flush();
      current = m[1];
    } else lines.push(line);
  }
  flush();
  return {
    list: (dir) => {
      const listed = files.get(`${dir.replace(/\/$/, "")}/`);
      if (listed !== undefined) return listed.split("\n").filter(Boolean).sort();
      const prefix = `${dir.replace(/\/$/, "")}/`;
      return [...new Set([...files.keys()].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length).split("/")[0] as string))].sort();
    },
    read: (file) => {
      const v = files.get(file);
      return v === undefined || v === "" ? undefined : v;
    },
  };
}

export interface HcaPort {
  readonly port: number;
  readonly active: boolean;
  readonly state: string;
  /** The RoCE v2 GID index of this port whose GID carries an IPv4 address, with that address. */
  readonly rocev2?: { readonly index: number; readonly ipv4: string };
}

export interface Hca {
  readonly name: string;
  readonly netdevs: readonly string[];
  readonly ports: readonly HcaPort[];
}

/** `::ffff:a.b.c.d` as sysfs writes it: 0000:0000:0000:0000:0000:ffff:0a00:020b. */
export function gidIpv4(gid: string): string | undefined {
  const m = /^0000:0000:0000:0000:0000:ffff:([0-9a-f]{4}):([0-9a-f]{4})$/i.exec(gid.trim());
  if (!m) return undefined;
  const a = Number.parseInt(m[1] as string, 16);
  const b = Number.parseInt(m[2] as string, 16);
  return [a >> 8, a & 255, b >> 8, b & 255].join(".");
}

/** Every RoCE HCA with its netdevs, port states and RoCE v2 IPv4 GID, from one node's tree. */
export function readHcas(tree: FileTree): Hca[] {
  return tree.list(IB).map((name) => {
    const ports = tree.list(`${IB}/${name}/ports`).map((p): HcaPort => {
      const base = `${IB}/${name}/ports/${p}`;
      const state = tree.read(`${base}/state`) ?? "unknown";
      let rocev2: HcaPort["rocev2"];
      for (let i = 0; i < GIDS_READ && rocev2 === undefined; i++) {
        const type = tree.read(`${base}/gid_attrs/types/${i}`);
        const ipv4 = gidIpv4(tree.read(`${base}/gids/${i}`) ?? "");
        if (type !== undefined && /RoCE v2/i.test(type) && ipv4 !== undefined && ipv4 !== "0.0.0.0") rocev2 = { index: i, ipv4 };
      }
      return { port: Number(p), active: /ACTIVE/.test(state), state, ...(rocev2 === undefined ? {} : { rocev2 }) };
    });
    return { name, netdevs: tree.list(`${IB}/${name}/device/net`), ports };
  });
}
