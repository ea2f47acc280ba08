/**
 * Whose containers are these? Labels are written by whoever runs `docker run`, so a container that
 * carries a deployment's labels proves nothing. What launcher itself wrote is the launch id
 * (launcher.boot) it recorded in its store just before the deployment's first container started
 * (src/deploy/launch.ts): only containers carrying that id are the deployment's. Any other is a
 * stranger: reported, never routed, restarted or given a lane.
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
 * deployment's, given the launch id the store recorded for it; undefined: it is.
 */
export function strangerReason(d: { readonly deployment: string; readonly boot?: string }, recorded: string | undefined): string | undefined {
  const redo = `if it is yours, launcher down ${d.deployment} and launcher up it again`;
  if (recorded === undefined) return `launcher has no record of launching ${d.deployment} (started by hand, by another store's launcher, or by a launcher before launch ids were recorded): ${redo}`;
  if (d.boot === undefined) return `its containers carry no launch id (launcher.boot), and launcher launched ${d.deployment} as ${recorded}`;
  if (d.boot !== recorded) return `its containers carry launch id ${JSON.stringify(d.boot)}, but launcher launched ${d.deployment} as ${recorded}`;
  return undefined;
}

/**
 * A deployment launched before launch ids were recorded (the store's migration 11 marks those that
 * served then): the launch id first seen on its containers is taken as its own and recorded, so
 * that an upgrade does not orphan what runs; any other launch of it seen later is a stranger.
 */
export const UNRECORDED_LAUNCH = "";

/** The daemon's vouch for discovery: strangerReason against the store, taking an unrecorded launch once. */
export function vouchFrom(store: { launchedBoot(cluster: string, deployment: string): string | undefined; recordLaunch(cluster: string, deployment: string, boot: string, at: string): void }, now: () => Date) {
  return (d: { readonly cluster: string; readonly deployment: string; readonly boot?: string }): string | undefined => {
    const recorded = store.launchedBoot(d.cluster, d.deployment);
    if (recorded === UNRECORDED_LAUNCH && d.boot !== undefined) {
      store.recordLaunch(d.cluster, d.deployment, d.boot, now().toISOString());
      return undefined;
    }
    return strangerReason(d, recorded === UNRECORDED_LAUNCH ? undefined : recorded);
  };
}
