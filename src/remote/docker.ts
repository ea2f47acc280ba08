import { RemoteError } from "../config/errors.js";
import { execChecked, outputTail, type Transport } from "./transport.js";

export interface ContainerInfo {
  readonly id: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly state: string;
  readonly running: boolean;
  readonly exitCode: number;
  readonly startedAt: string;
  readonly finishedAt: string;
  readonly image: string;
}

interface InspectJson {
  Id: string;
  Name: string;
  Image: string;
  Config: { Labels: Record<string, string> | null };
  State: { Status: string; Running: boolean; ExitCode: number; StartedAt: string; FinishedAt: string };
}

const PS_FAILED = 97;
// ps and inspect in one remote command: half the SSH round trips of every status poll.
const LIST_SCRIPT = `ids=$(docker ps --all --quiet --no-trunc --filter "label=$1") || exit ${PS_FAILED}
[ -z "$ids" ] && exit 0
exec docker inspect $ids`;


/**
 * The few Docker operations launcher needs, run on a node through its transport. Names and
 * images come after `--`: every docker command parses its flags with spf13/pflag, which ends
 * them at `--` (flag.go parseArgs), so a value can never be read as an option.
 */
export class DockerClient {
  constructor(readonly transport: Transport) {}

  get node(): string {
    return this.transport.node;
  }

  private ok(argv: readonly string[], what: string, timeoutMs = 60_000): Promise<string> {
    return execChecked(this.transport, argv, what, timeoutMs);
  }

  async serverVersion(): Promise<string> {
    return (await this.ok(["docker", "version", "--format", "{{.Server.Version}}"], "docker version", 20_000)).trim();
  }

  /** The image's ID, or undefined when the node does not have it. */
  async imageId(image: string): Promise<string | undefined> {
    const r = await this.transport.exec(["docker", "image", "inspect", "--format", "{{.Id}}", "--", image], { timeoutMs: 20_000 });
    // ssh's own failure is 255 (or a timeout): the node is unknown, not without the image.
    if (r.code === 255 || r.code === 124) throw new RemoteError(this.node, "SSH unreachable", outputTail(r));
    return r.code === 0 ? r.stdout.trim() : undefined;
  }

  /** Containers (running or not) that carry `label` (a key, or key=value). One round trip. */
  async containers(label: string): Promise<ContainerInfo[]> {
    const r = await this.transport.exec(["sh", "-c", LIST_SCRIPT, "sh", label], { timeoutMs: 20_000 });
    if (r.code === PS_FAILED || r.code === 255 || (r.code !== 0 && r.stdout.trim() === "")) throw new RemoteError(this.node, `docker ps failed (exit ${r.code})`, outputTail(r));
    // A container removed between ps and inspect is simply gone; inspect still prints the others.
    const json = JSON.parse(r.stdout.trim() || "[]") as InspectJson[];
    return json.map((c) => ({
      id: c.Id,
      name: c.Name.replace(/^\//, ""),
      labels: c.Config.Labels ?? {},
      state: c.State.Status,
      running: c.State.Running,
      exitCode: c.State.ExitCode,
      startedAt: c.State.StartedAt,
      finishedAt: c.State.FinishedAt,
      image: c.Image,
    }));
  }

  async run(argv: readonly string[]): Promise<string> {
    return (await this.ok(argv, "docker run")).trim();
  }

  /** SIGTERM, up to `graceSeconds`, then SIGKILL; then removal. Missing containers are fine. */
  async stopAndRemove(names: readonly string[], graceSeconds: number): Promise<void> {
    if (names.length === 0) return;
    await this.transport.exec(["docker", "stop", "--time", String(graceSeconds), "--", ...names], { timeoutMs: (graceSeconds + 30) * 1000 });
    await this.transport.exec(["docker", "rm", "--force", "--", ...names], { timeoutMs: 30_000 });
  }

  logs(container: string, options: { follow?: boolean; tail?: number; signal?: AbortSignal } = {}): AsyncIterable<string> {
    return this.transport.stream(
      ["docker", "logs", "--timestamps", ...(options.follow ? ["--follow"] : []), ...(options.tail === undefined ? [] : ["--tail", String(options.tail)]), "--", container],
      options.signal ? { signal: options.signal } : {},
    );
  }
}
