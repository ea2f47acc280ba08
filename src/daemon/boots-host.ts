import type { Output } from "../app/output.js";
import { UserError } from "../config/errors.js";
import { identityOf, prepareUp, upHost, type PreparedUp, type PrepareEnvironment } from "../app/prepare-up.js";
import type { BootEntry, BootRegistry } from "../supervise/boots.js";
import { decodeError, encodeError, type UpEvent } from "../boot/up-events.js";
import { upUseCase } from "../app/up-use-case.js";
import type { StateStore } from "../store/store.js";
import type { Cluster } from "../cluster/cluster.js";
import type { UpSubmission } from "../app/up-submission.js";
import { engineKeyRefusal } from "./engine-key.js";
import type { Caller, DaemonScope } from "../app/admit.js";

/** An Output whose every word becomes an event of the boot (the daemon has no terminal of its own). */
export function eventOutput(emit: (e: UpEvent) => void): Output {
  const say = (text: string): void => emit({ type: "say", text, t: Date.now() });
  return {
    out: say,
    err: say,
    warn: (text) => emit({ type: "warn", text, t: Date.now() }),
    json: (value) => say(JSON.stringify(value)),
    diagnostics: (diagnostics) => emit({ type: "diagnostics", diagnostics, t: Date.now() }),
  };
}

/**
 * The daemon's side of `up`: the submission is read and planned as the CLI would (the same
 * checks, the same messages, as events), then the same use case runs in the daemon's registry.
 * A submission refused before it starts gives its events, the error last.
 */
export function bootSubmitter(
  registry: BootRegistry,
  store: StateStore,
  /** The daemon's environment: $LAUNCHER_CLAIM_LEASE, its owner's cluster files, how its boots reach the nodes. */
  env: PrepareEnvironment,
  /** The daemon's own clusters and recipes: all a submission may name on its machine. */
  scope: DaemonScope,
  log: (line: string) => void,
  /**
   * A cluster file the client sent: `refuse` says why a boot on it cannot be taken (undefined: it
   * can), before it starts; `accepted`: the daemon watches that cluster from now on (routes and
   * supervises what runs there, the new file replacing an older one of that name).
   */
  uploaded?: {
    readonly refuse: (cluster: Cluster, file: { readonly file: string; readonly text: string }) => string | undefined;
    readonly accepted: (cluster: Cluster, file: { readonly file: string; readonly text: string }) => void;
    /**
     * The daemon's own user booted on a cluster file of its machine that is not one of the
     * daemon's (src/app/admit.ts, Caller): watched from its own file from now on, as an
     * uploaded one is, so that what runs there is routed and supervised.
     */
    readonly ownerFile?: (cluster: Cluster) => void;
  },
  /** The gateway has API keys: a recipe whose engine demands none is refused (src/daemon/engine-key.ts). */
  engineKeyRequired = false,
): (s: UpSubmission, caller?: Caller) => BootEntry | readonly UpEvent[] {
  return (s, caller = "client") => {
    const early: UpEvent[] = [];
    // Until the boot is accepted its words are kept, then they go to the boot's own events.
    let sink = (e: UpEvent): void => void early.push(e);
    const io = eventOutput((e) => sink(e));
    const refused = (e: unknown): readonly UpEvent[] => [...early, { type: "error", error: encodeError(e), t: Date.now() }];
    let prepared: PreparedUp;
    try {
      prepared = prepareUp(s, io, { daemon: scope, caller, env });
    } catch (e) {
      return refused(e);
    }
    const accepted = identityOf(prepared);
    const noKey = engineKeyRequired ? engineKeyRefusal(prepared.first) : undefined;
    if (noKey !== undefined) return refused(noKey);
    // A file sent that is one of the daemon's own (src/app/admit.ts) is that cluster, not an upload.
    const upload = s.cluster_file !== undefined && !scope.own.includes(prepared.cluster) ? s.cluster_file : undefined;
    const refusal = upload === undefined ? undefined : uploaded?.refuse(prepared.cluster, upload);
    if (refusal !== undefined) return refused(new UserError(refusal));
    let entry: BootEntry;
    try {
      entry = registry.start(identityOf(prepared), (emit, signal, detach) => {
        for (const e of early) emit(e);
        sink = emit;
        return upUseCase(prepared.request, prepared.cluster, prepared.first, upHost(prepared, store, emit, signal, detach));
      });
    } catch (e) {
      return refused(e);
    }
    log(`boot of ${accepted.deployment} (${s.ref}) accepted`);
    if (upload !== undefined) uploaded?.accepted(prepared.cluster, upload);
    else if (caller === "owner" && !scope.own.includes(prepared.cluster)) uploaded?.ownerFile?.(prepared.cluster);
    void entry.ended.then((e) => log(`boot of ${accepted.deployment}: ${e.type === "result" ? e.outcome.status : `failed: ${e.type === "error" ? decodeError(e.error).message : "?"}`}`));
    return entry;
  };
}
