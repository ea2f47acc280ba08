/*
 * What a pod of `launcher export k8s --node-ip-is-fabric` says when its start finds that the pod's
 * address is not its node's fabric address (src/export/fabric-start.ts writes it, before the
 * engine runs). An engine whose ranks listen on that address (llama.cpp's rpc-server) lists the
 * pattern among its fatal lines, so that `launcher explain` on `kubectl logs` names it as the cause.
 */

import { escapeRegExp, linePattern } from "../config/reg-exp.js";

export const NOT_FABRIC_ADDRESS = "launcher: pod address";
export const NOT_FABRIC_ADDRESS_TAIL = "is not this node's fabric address";

/** The line as written: `launcher: pod address IP is not this node's fabric address (FABRIC): ...`. */
export const NOT_FABRIC_ADDRESS_PATTERN = linePattern(NOT_FABRIC_ADDRESS, ` \\S* ?${escapeRegExp(NOT_FABRIC_ADDRESS_TAIL)}`, true);
