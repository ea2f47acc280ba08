import { redactText, redactValue } from "../config/redact.js";
import { shellJoin } from "../config/shell-words.js";
import { ENV_FROM_STDIN } from "../remote/docker.js";
import { adapterOf } from "../engine/registry.js";
import type { NodeSpec, Plan } from "./plan.js";

const secretsOf = (plan: Plan): string[] => (plan.api_key === undefined ? [] : [plan.api_key]);

/** Which of the plan's nodes to show: all, or the one `plan --node NAME` names. */
export interface NodeFilter {
  readonly node?: string;
}

/**
 * A node name the plan does not run on: its names (in start order) to say which it does. The
 * check lives here, beside what the filter shows, so that text and JSON agree on it.
 */
export function unknownNode(plan: Plan, filter: NodeFilter): readonly string[] | undefined {
  return filter.node === undefined || plan.nodes.some((n) => n.node === filter.node) ? undefined : plan.start_order;
}

/** The nodes in the order their containers start (at once: in rank order), as a reader follows a boot. */
export function nodesInStartOrder(plan: Plan, filter: NodeFilter = {}): NodeSpec[] {
  const at = (n: NodeSpec): number => plan.start_order.indexOf(n.node);
  return plan.nodes.filter((n) => filter.node === undefined || n.node === filter.node).sort((a, b) => at(a) - at(b));
}

/**
 * The plan as `--json` prints it: stable key order, one argv element per argument, the API key
 * redacted. `nodes` stay in rank order (`rank`, `start_order` say the rest): scripts index them.
 */
export function planJson(plan: Plan, filter: NodeFilter = {}): unknown {
  return redactValue({
    deployment: plan.deployment,
    ...(plan.lane === undefined ? {} : { lane: plan.lane }),
    cluster: plan.cluster,
    endpoint: plan.endpoint,
    served_model: plan.served_model,
    master_addr: plan.master_addr,
    master_port: plan.master_port,
    start_order: plan.start_order,
    start: plan.start,
    recipe: { ...plan.recipe, hash: plan.recipe_hash },
    nodes: plan.nodes.filter((n) => filter.node === undefined || n.node === filter.node).map((n) => ({
      rank: n.rank,
      role: n.role,
      node: n.node,
      host: n.host,
      image: n.image,
      container: n.container,
      env: n.env,
      argv: n.argv,
    })),
  }, secretsOf(plan));
}

/** One shell command, an option and its value per line, so that a long `docker run` stays readable. */
export function pasteable(argv: readonly string[]): string {
  const groups: string[][] = [];
  for (const arg of argv) {
    const last = groups[groups.length - 1];
    const startsGroup = last === undefined || arg.startsWith("-") || (last.length === 2 && last[0]?.startsWith("-") === true);
    if (startsGroup && !(last !== undefined && groups.length === 1 && last.length < 2)) groups.push([arg]);
    else last?.push(arg);
  }
  return groups.map((g) => shellJoin(g)).join(" \\\n    ");
}

/** The heredoc delimiter: never a line of an env file, whose lines all hold `=`. */
const ENV_END = "LAUNCHER_ENV";

/**
 * One node's command as it can be pasted: the argv, and when it reads its env from stdin
 * (`--env-file /dev/stdin`), the env as a quoted heredoc (no expansion: POSIX 2.7.4), one
 * `KEY=VALUE` per line as the env file launcher writes to that stdin.
 */
export function pasteableRun(spec: Pick<NodeSpec, "argv" | "env">): string {
  const command = pasteable(spec.argv);
  const fromStdin = spec.argv.some((a, i) => a === "--env-file" && spec.argv[i + 1] === ENV_FROM_STDIN);
  if (!fromStdin) return command;
  const lines = Object.entries(spec.env).map(([k, v]) => `${k}=${v}`);
  return [`${command} <<'${ENV_END}'`, ...lines, ENV_END].join("\n");
}

/** ", mp backend" for an engine that reads distributed_backend; nothing for one that starts its ranks its own way. */
const backendText = (r: Plan["recipe"]): string => (adapterOf(r.engine)?.recipeUse.keys.includes("distributed_backend") === false ? "" : `, ${r.distributed_backend} backend`);

/** A readable summary, then per node (in start order) a command that can be pasted into that node's shell. */
export function planText(plan: Plan, filter: NodeFilter = {}): string {
  const r = plan.recipe;
  const lines = [
    `deployment ${plan.deployment}${plan.lane === undefined ? "" : ` (lane ${plan.lane})`}: ${r.name}`,
    `  recipe    ${r.id} (${r.file}, hash ${plan.recipe_hash})`,
    `  engine    ${r.engine}${backendText(r)}, TP ${r.tensor_parallel_size} x PP ${r.pipeline_parallel_size} on ${plan.nodes.length} node${plan.nodes.length === 1 ? "" : "s"}`,
    `  image     ${r.docker_image}`,
    `  model     ${r.model} (served as ${plan.served_model})`,
    `  endpoint  ${plan.endpoint}/v1`,
    `  rendezvous ${plan.master_addr}:${plan.master_port}`,
    `  start     ${plan.start_order.join(", ")}${plan.nodes.length > 1 ? ` (${plan.start})` : ""}`,
    "",
  ];
  for (const n of nodesInStartOrder(plan, filter)) {
    lines.push(`# rank ${n.rank} (${n.role}) on ${n.node} [${n.host}]: container ${n.container}`);
    lines.push(pasteableRun(n));
    lines.push("");
  }
  return redactText(lines.join("\n"), secretsOf(plan));
}
