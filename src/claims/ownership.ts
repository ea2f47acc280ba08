import type { StateStore } from "../store/store.js";

/**
 * Whose containers are these? Labels are written by whoever runs `docker run`, so a container that
 * carries a deployment's labels proves nothing by itself. What launcher itself wrote is the launch
 * id (launcher.boot) it recorded in its store just before the deployment's first container started
 * (src/boot/launch.ts). While this store holds a deployment as running (it serves, or is being
 * taken down with its engine key still given out, or a kept boot of it is in progress), only
 * containers carrying that id are the deployment's: any other group of that name is a stranger,
 * reported, never routed, restarted or given a lane (the gateway would hand it that deployment's
 * engine key). A deployment this store does not hold as running (launched from another machine's
 * or another store's launcher, or by hand) is routed and supervised as any other: the gateway
 * serves every deployment, whoever started it and from wherever (README, "The gateway").
 */

/** A group of containers that names a deployment but is not launcher's launch of it. */
export interface Stranger {
  readonly cluster: string;
  readonly deployment: string;
  /** The launch id its containers carry; absent: none. */
  readonly boot?: string;
  readonly reason: string;
}

/**
 * Why a group of containers (one name and one launch, as status groups them) is not the
 * deployment's, given the launch id this store holds it running under (undefined: it holds none,
 * and any launch of it is welcome); undefined: it is.
 */
export function strangerReason(d: { readonly deployment: string; readonly boot?: string }, running: string | undefined): string | undefined {
  if (running === undefined) return undefined;
  const redo = `if it is yours, launcher down ${d.deployment} and launcher up it again`;
  if (d.boot === undefined) return `its containers carry no launch id (launcher.boot), and launcher launched ${d.deployment} as ${running}, which it holds as running: ${redo}`;
  if (d.boot !== running) return `its containers carry launch id ${JSON.stringify(d.boot)}, but launcher launched ${d.deployment} as ${running}, which it holds as running: ${redo}`;
  return undefined;
}

/**
 * A deployment launched before launch ids were recorded (the store's migration 11 marks those that
 * served then): the launch id first seen on its containers is taken as its own and recorded, so
 * that an upgrade does not orphan what runs; any other launch of it seen later is a stranger.
 */
export const UNRECORDED_LAUNCH = "";

/** What vouchFrom reads and writes of the store (src/store/store.ts). */
export type LaunchRecords = Pick<StateStore, "launchedBoot" | "recordLaunch" | "deploymentServed" | "servedEndpoint" | "engineKey" | "bootsInProgress">;

/**
 * The launch id this store holds the deployment running under, or undefined: none recorded, or
 * what was recorded is over (taken down, or a boot that failed) and the name is free for anyone's.
 * Being taken down counts while its engine key is still given out (until deploymentStopped).
 */
export function runningLaunch(store: LaunchRecords, cluster: string, deployment: string): string | undefined {
  const recorded = store.launchedBoot(cluster, deployment);
  if (recorded === undefined) return undefined;
  const held =
    store.deploymentServed(cluster, deployment) ||
    store.engineKey(cluster, deployment) !== undefined ||
    store.bootsInProgress().some((b) => b.cluster === cluster && b.deployment === deployment);
  return held ? recorded : undefined;
}

/**
 * Why a group that carries the right launch id is still not the deployment: its endpoint label is
 * not where launcher recorded the deployment serving (a launch id is readable by whoever can run
 * `docker inspect`, so a copy of it with another endpoint would take the deployment's traffic and
 * engine key); undefined: it is, or nothing was recorded yet (still booting).
 */
export function endpointReason(d: { readonly deployment: string; readonly endpoint: string }, served: string | undefined): string | undefined {
  if (served === undefined || served === d.endpoint) return undefined;
  return `its containers say it serves at ${d.endpoint}, but launcher recorded ${d.deployment} serving at ${served}: if it is yours, launcher down ${d.deployment} and launcher up it again`;
}

/** The daemon's vouch for discovery: strangerReason against the launch the store holds running, taking an unrecorded launch once. */
export function vouchFrom(store: LaunchRecords, now: () => Date) {
  return (d: { readonly cluster: string; readonly deployment: string; readonly boot?: string; readonly endpoint?: string }): string | undefined => {
    const running = runningLaunch(store, d.cluster, d.deployment);
    if (running === UNRECORDED_LAUNCH) {
      if (d.boot === undefined) return undefined;
      store.recordLaunch(d.cluster, d.deployment, d.boot, now().toISOString());
      return undefined;
    }
    const stranger = strangerReason(d, running);
    if (stranger !== undefined || running === undefined || d.endpoint === undefined) return stranger;
    return endpointReason({ deployment: d.deployment, endpoint: d.endpoint }, store.servedEndpoint(d.cluster, d.deployment));
  };
}
