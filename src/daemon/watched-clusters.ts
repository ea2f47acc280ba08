import path from "node:path";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import type { Cluster } from "../cluster/cluster.js";
import { openSession, type ClusterSession } from "../nodes/session.js";
import type { BootRegistry } from "../supervise/boots.js";
import { clientPart, composeUploaded, refusedSettings } from "../app/admit.js";
import type { Environment } from "../app/environment.js";
import type { Discovery, WatchSource } from "./discovery.js";
import { FORGET_UPLOADED_AFTER_MS, forgetUploadedCluster, idleUploaded, keepUploadedCluster, keptUploadedClusters, keptUploadedText, uploadVerdict } from "./uploaded-clusters.js";

/** A cluster file the daemon watches: where it is read, its cluster, its text. */
export interface WatchedFile {
  readonly file: string;
  readonly cluster: Cluster;
  readonly text: string;
}

/**
 * The cluster files to watch: the ones named (--cluster, else the one found), then those remote
 * clients uploaded with their `up` before (./uploaded-clusters.ts), unless one of that name is
 * named; an uploaded one that no longer reads is said and left out.
 */
export function clustersToWatch(named: readonly string[], uploadedDir: string, env: Pick<Environment, "readClusterFile" | "clusterOf">, log: (line: string) => void): WatchedFile[] {
  const watched = named.map((file) => {
    const read = env.readClusterFile(file);
    return { file, cluster: env.clusterOf(read), text: read.text };
  });
  const [own] = watched;
  for (const file of keptUploadedClusters(uploadedDir)) {
    try {
      // Checked again as on upload (a file kept by an older launcher may set [ssh]), and given
      // this daemon's [ssh] and [docker] as they are now.
      const client = clientPart(readTextFile(file, "uploaded cluster file"));
      const refused = refusedSettings(file, client);
      if (refused.length > 0) throw new UserError(`it sets ${refused.map((r) => r.setting).join(", ")}, which a client's file may not`);
      const text = own === undefined ? client : composeUploaded(client, own.cluster);
      const cluster = env.clusterOf({ file, text });
      if (watched.some((w) => w.cluster.name === cluster.name)) continue;
      keepUploadedCluster(uploadedDir, cluster.name, { file, text });
      watched.push({ file, cluster, text });
    } catch (e) {
      log(`not watching the uploaded cluster file ${file}: ${(e as Error).message}`);
    }
  }
  return watched;
}

/** How the container deaths of a cluster added later are followed, once supervision runs. */
export interface DeathFollower {
  follow(cluster: string, session: Promise<ClusterSession>): void;
  unfollow(cluster: string): void;
}

/**
 * The clusters the daemon watches and the life of those it did not start with. A cluster a remote
 * client's `up` brought (its file uploaded) is kept, then discovered (routed), supervised and its
 * restarts booted as the daemon's own are. A changed file of a name already uploaded replaces it
 * (refused while a boot on it runs: uploadVerdict); one of the daemon's own is left as it is. An
 * uploaded cluster with nothing deployed and no boot for a while is forgotten.
 */
export class WatchedClusters {
  /** One SSH session per cluster, opened locally (no node contacted) and kept, so that its connections are shared. */
  readonly sessions: Map<string, Promise<ClusterSession>>;
  private readonly own: ReadonlySet<string>;
  private readonly ownDefault: Cluster;
  /** Uploaded clusters watched now -> when last seen with a deployment or a boot (idleUploaded). */
  private readonly busySince: Map<string, number>;
  private deaths: DeathFollower | undefined;

  constructor(
    /** The daemon's own (its --cluster files, the first the default), then the uploaded ones it found. */
    watched: readonly WatchedFile[],
    ownCount: number,
    private readonly uploadedDir: string,
    private readonly discovery: Pick<Discovery, "add" | "replace" | "remove">,
    private readonly watchSource: (cluster: string, file: string) => WatchSource,
    private readonly registry: BootRegistry,
    private readonly log: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.own = new Set(watched.slice(0, ownCount).map((w) => w.cluster.name));
    this.ownDefault = (watched[0] as WatchedFile).cluster;
    this.busySince = new Map(watched.filter((w) => !this.own.has(w.cluster.name)).map((w) => [w.cluster.name, now()]));
    this.sessions = new Map(watched.map((w) => [w.cluster.name, openSession(w.cluster)]));
  }

  /** From now on, a cluster added or forgotten starts or stops the following of its container deaths. */
  followDeaths(deaths: DeathFollower): void {
    this.deaths = deaths;
  }

  /** Why a boot on a client's cluster file cannot be taken now, or undefined. */
  refusal(cluster: Cluster, file: { readonly text: string }): string | undefined {
    const v = this.verdict(cluster, file, this.bootOn(cluster.name));
    return v.kind === "refuse" ? v.message : undefined;
  }

  /** Kept and compared as it is booted on: the client's text with this daemon's [ssh] and [docker]. */
  private verdict(cluster: Cluster, file: { readonly text: string }, bootRunning: boolean): ReturnType<typeof uploadVerdict> {
    return uploadVerdict(cluster.name, {
      own: this.own.has(cluster.name),
      keptText: this.busySince.has(cluster.name) ? keptUploadedText(this.uploadedDir, cluster.name) : undefined,
      text: composeUploaded(file.text, this.ownDefault),
      bootRunning,
    });
  }

  private bootOn(name: string): boolean {
    return this.registry.list().some((b) => b.running && b.identity.cluster === name);
  }

  /** A boot on a client's cluster file was accepted (refusal said none): that boot is the one running on it now. */
  uploaded(cluster: Cluster, file: { readonly file: string; readonly text: string }): void {
    const v = this.verdict(cluster, file, false);
    if (v.kind === "same" || v.kind === "refuse") {
      if (v.kind === "same") this.busySince.set(cluster.name, this.now());
      return;
    }
    let kept: string;
    try {
      kept = keepUploadedCluster(this.uploadedDir, cluster.name, { file: file.file, text: composeUploaded(file.text, this.ownDefault) });
    } catch (e) {
      // The boot is accepted and runs: it is said here, never a 500 to its client.
      this.log(`cannot keep the cluster file uploaded for ${cluster.name} (${(e as Error).message}): its boot runs, but what runs there is not routed or supervised until it is uploaded again`);
      return;
    }
    this.watch(cluster, kept, v.kind === "replace");
    this.log(v.kind === "replace"
      ? `cluster ${cluster.name} was uploaded again with other content: watching the new one (kept as ${kept}) in place of the old`
      : `watching cluster ${cluster.name} (uploaded by a client, kept as ${kept}): what runs there is routed and supervised`);
  }

  /**
   * A cluster file of this machine its own user booted on (through the socket): watched from
   * where it is, and forgotten when idle as an uploaded one is; not kept, so a daemon started
   * again watches it only once that user boots on it again.
   */
  ownerFile(cluster: Cluster): void {
    // Watched already (one of its own, or a client's upload of that name): left as it is.
    if (this.sessions.has(cluster.name)) return;
    this.watch(cluster, path.resolve(cluster.file), false);
    this.log(`watching cluster ${cluster.name} (${path.resolve(cluster.file)}, booted on by this daemon's user): what runs there is routed and supervised`);
  }

  private watch(cluster: Cluster, file: string, replace: boolean): void {
    const session = openSession(cluster);
    this.sessions.set(cluster.name, session);
    this.busySince.set(cluster.name, this.now());
    if (replace) this.discovery.replace(this.watchSource(cluster.name, file));
    else this.discovery.add(this.watchSource(cluster.name, file));
    this.deaths?.follow(cluster.name, session);
  }

  /**
   * An uploaded cluster with nothing deployed on it and no boot for a while is forgotten: no more
   * SSH to hosts a client once named, and not watched again at the next start.
   */
  forgetIdle(deployments: readonly { readonly cluster: string }[]): void {
    const busy = new Set([...deployments.map((d) => d.cluster), ...this.registry.list().filter((b) => b.running).map((b) => b.identity.cluster)]);
    for (const name of idleUploaded(this.busySince, busy, this.now())) {
      this.busySince.delete(name);
      this.discovery.remove(name);
      this.sessions.delete(name);
      this.deaths?.unfollow(name);
      forgetUploadedCluster(this.uploadedDir, name);
      this.log(`forgetting the uploaded cluster ${name}: nothing deployed on it for ${FORGET_UPLOADED_AFTER_MS / 60_000} min (a client's up on it brings it back)`);
    }
  }
}
