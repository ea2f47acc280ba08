import { isIP } from "node:net";
import { error, type Diagnostic, type Loc } from "./diagnostic.js";

/**
 * The kinds of values that reach a command line (ssh's destination, docker run's image, -v
 * specs, container names). Each value from a recipe, a cluster file or a flag is checked here
 * at validation time, so that nothing a file says can be read as an option by ssh or docker,
 * nor split into two by Docker's own syntaxes. Pure: one function per kind, no I/O.
 */
export interface Kind {
  /** What a good value is, for messages: "a host name, IP address or ssh_config alias". */
  readonly what: string;
  /** What to write instead. */
  readonly hint: string;
  /** Why `value` is not of this kind, or undefined when it is. */
  check(value: string): string | undefined;
}

// Control characters (newline, NUL, escape...) never belong in a name or a path we pass on.
const CONTROL = /[\u0000-\u001f\u007f]/;

const leadingDash = (v: string): string | undefined => (v.startsWith("-") ? "it starts with '-', so a command would read it as an option" : undefined);

const charset = (re: RegExp, allowed: string) => (v: string): string | undefined => {
  const bad = [...v].find((c) => !re.test(c));
  return bad === undefined ? undefined : `${JSON.stringify(bad)} is not allowed (only ${allowed})`;
};

function first(...checks: ((v: string) => string | undefined)[]): (v: string) => string | undefined {
  return (v) => {
    for (const c of checks) {
      const problem = c(v);
      if (problem !== undefined) return problem;
    }
    return undefined;
  };
}

const nonEmpty = (v: string): string | undefined => (v === "" ? "it is empty" : undefined);
const maxLength = (n: number) => (v: string): string | undefined => (v.length > n ? `it is ${v.length} characters long (at most ${n})` : undefined);

/**
 * An ssh destination: a DNS name, an IPv4/IPv6 literal or an ssh_config alias. ssh also reads
 * `user@host` and `ssh://` URIs in that position (ssh.c parse_ssh_uri), and `%` tokens in
 * options that repeat the host: none of that is a host, so only names and literals pass.
 */
export const HOST: Kind = {
  what: "a host name, an IPv4/IPv6 address or an ssh_config alias",
  hint: "write the bare name or address (letters, digits, . _ -); set the SSH user in `user` and the port in `port`",
  check: (v) => (isIP(v) !== 0 ? undefined : first(nonEmpty, leadingDash, maxLength(253), charset(/[A-Za-z0-9._-]/, "letters, digits, . _ -"))(v)),
};

/** Where HTTP reaches a node: it goes into URLs as `http://ADDRESS:PORT`, so IPv6 needs brackets there. */
export const ADDRESS: Kind = {
  what: "a host name or an IPv4 address",
  hint: "write a DNS name or an IPv4 address (an IPv6 address goes in brackets: [fd00::1])",
  check: (v) => (/^\[[0-9A-Fa-f:.]+\]$/.test(v) && isIP(v.slice(1, -1)) === 6 ? undefined : isIP(v) === 4 ? undefined : first(nonEmpty, leadingDash, maxLength(253), charset(/[A-Za-z0-9.-]/, "letters, digits, . -"))(v)),
};

/** A POSIX portable user name (the portable filename character set, not starting with '-'). */
export const USER: Kind = {
  what: "a POSIX user name",
  hint: "letters, digits, . _ - and not starting with '-', at most 32 characters",
  check: first(nonEmpty, leadingDash, maxLength(32), charset(/[A-Za-z0-9._-]/, "letters, digits, . _ -")),
};

/**
 * A name that becomes part of a Docker container name (node names, deployment and lane names).
 * Docker's own rule is [a-zA-Z0-9][a-zA-Z0-9_.-]+ (moby daemon/names/names.go).
 */
export const NODE_NAME: Kind = {
  what: "a node name",
  hint: "use at least 2 characters: letters, digits, _ . - starting with a letter or digit (it becomes part of container names)",
  check: (v) => (/^[A-Za-z0-9][A-Za-z0-9_.-]+$/.test(v) ? undefined : v.length < 2 ? "it is shorter than 2 characters" : first(leadingDash, charset(/[A-Za-z0-9_.-]/, "letters, digits, _ . -"))(v) ?? "it must start with a letter or a digit"),
};

/** Deployment and lane names: container names and labels, and (lanes) the model name clients send. */
export const DEPLOYMENT_NAME: Kind = {
  what: "a deployment or lane name",
  hint: "use lower-case letters, digits, _ . - starting with a letter or digit (it becomes part of container names)",
  check: (v) => (/^[a-z0-9][a-z0-9_.-]*$/.test(v) ? undefined : first(nonEmpty, leadingDash, maxLength(128), charset(/[a-z0-9_.-]/, "lower-case letters, digits, _ . -"))(v) ?? "it must start with a letter or a digit"),
};

/** A Linux network interface name (IFNAMSIZ is 16 with the NUL; no '/' nor whitespace). */
export const IFACE: Kind = {
  what: "a network interface name",
  hint: "at most 15 characters: letters, digits, _ . : -, e.g. enp1s0f1np1",
  check: first(nonEmpty, leadingDash, maxLength(15), charset(/[A-Za-z0-9_.:-]/, "letters, digits, _ . : -")),
};

/** An RDMA device name as NCCL_IB_HCA lists them (rocep1s0f1, mlx5_0, mlx5_0:1). */
export const HCA: Kind = {
  what: "an RDMA device name",
  hint: "write the device as /sys/class/infiniband lists it, e.g. rocep1s0f1 or mlx5_0 (optionally :PORT)",
  check: first(nonEmpty, leadingDash, maxLength(64), charset(/[A-Za-z0-9_.:-]/, "letters, digits, _ . : -")),
};

/**
 * A path on either side of a bind mount. The plan passes mounts as `--volume HOST:CONTAINER[:ro]`
 * and Docker splits that spec on ':' (docker/cli cli/compose/loader/volume.go ParseVolume, which
 * `docker run -v` uses; ',' separates only the options after the second ':'), so a ':' would
 * move the rest into another field.
 */
function mountPath(v: string, tildeAllowed: boolean): string | undefined {
  if (v === "") return "it is empty";
  if (CONTROL.test(v)) return "it contains a control character (newline, tab...)";
  if (v.includes(":")) return "it contains ':', which Docker's --volume HOST:CONTAINER syntax splits on";
  if (v.startsWith("/")) return undefined;
  if (tildeAllowed && (v === "~" || v.startsWith("~/"))) return undefined;
  return tildeAllowed ? "it is neither absolute nor under ~/" : "it is not an absolute path";
}

export const HOST_PATH: Kind = {
  what: "a host path",
  hint: "host paths are absolute, or start with ~/ for the SSH user's home on each node; no ':' nor control characters",
  check: (v) => mountPath(v, true),
};

export const CONTAINER_PATH: Kind = {
  what: "a container path",
  hint: "container paths are absolute (start with /); no ':' nor control characters",
  check: (v) => mountPath(v, false),
};

/** A home folder: absolute, and it ends up in mount specs through `~`, so a mount path's rules hold. */
export const HOME: Kind = {
  what: "a home folder",
  hint: "write the absolute path of the SSH user's home on the node, e.g. /home/ai",
  check: (v) => mountPath(v, false),
};

// docker/distribution reference/regexp.go (ReferenceRegexp): name [":" tag] ["@" digest],
// name = [domain "/"] path-component ("/" path-component)*, at most 255 characters
// (reference.go NameTotalLengthMax).
const DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
const DOMAIN = `(?:${DOMAIN_COMPONENT}(?:\\.${DOMAIN_COMPONENT})*|\\[(?:[a-fA-F0-9:]+)\\])(?::[0-9]+)?`;
const PATH_COMPONENT = "[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*";
const NAME = `(?:${DOMAIN}/)?${PATH_COMPONENT}(?:/${PATH_COMPONENT})*`;
const TAG = "[\\w][\\w.-]{0,127}";
const DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}";
const REFERENCE = new RegExp(`^(${NAME})(?::${TAG})?(?:@${DIGEST})?$`);

export const IMAGE: Kind = {
  what: "a Docker image reference",
  hint: "write [registry/]name[:tag][@digest] with a lower-case name, e.g. vllm/vllm-openai:v0.11.0 or practice-engine:local",
  check: (v) => {
    const problem = first(nonEmpty, leadingDash)(v);
    if (problem !== undefined) return problem;
    const m = REFERENCE.exec(v);
    if (m === null) return "it does not follow Docker's reference grammar";
    if ((m[1] ?? "").length > 255) return "its name is longer than 255 characters";
    return undefined;
  },
};

/** Docker's size syntax (go-units RAMInBytes): a number and an optional unit. */
export const DOCKER_SIZE: Kind = {
  what: "a Docker size",
  hint: 'write a number and a unit, e.g. "32gb" or "16g"',
  check: (v) => (/^\d+(\.\d+)* ?[kKmMgGtTpP]?[iI]?[bB]?$/.test(v) ? undefined : "it is not a number with an optional unit (b, k, m, g, t, p)"),
};

/** The diagnostic text for a value that is not of its kind: `FIELD "VALUE" is not KIND: WHY`. */
export function kindProblem(kind: Kind, field: string, value: string): { message: string; hint: string } | undefined {
  const why = kind.check(value);
  return why === undefined ? undefined : { message: `${field} ${JSON.stringify(value)} is not ${kind.what}: ${why}`, hint: kind.hint };
}

/** An error at `loc` when `value` is not of its kind, else nothing: for the file parsers. */
export function kindDiagnostics(loc: Loc, kind: Kind, field: string, value: string): Diagnostic[] {
  const p = kindProblem(kind, field, value);
  return p === undefined ? [] : [error(loc, p.message, p.hint)];
}
