import { Option } from "commander";
import { UserError } from "../config/errors.js";
import { readTextFile } from "../config/read-file.js";
import { collectKeys } from "../gateway/auth.js";

/**
 * `--gateway URL` and its key, read one way by every command that sends requests through a
 * launcher gateway (bench, eval): `--api-key-file FILE`, else the first key of
 * `$LAUNCHER_API_KEY` (the variable `launcher serve` reads its keys from), else none.
 */
export interface GatewayFlags {
  gateway?: string;
  apiKeyFile?: string;
}

export function apiKeyFileOption(): Option {
  return new Option("--api-key-file <file>", "with --gateway: the file holding the gateway's API key (else the first key of $LAUNCHER_API_KEY)");
}

/** The gateway to go through and its key, or undefined for the engine directly. */
export function gatewayOf(flags: GatewayFlags): { url: string; apiKey?: string } | undefined {
  if (flags.gateway === undefined) {
    if (flags.apiKeyFile !== undefined) throw new UserError("--api-key-file is the gateway's key and needs --gateway", "the engine's own key is the one `up` recorded; it is used without a flag");
    return undefined;
  }
  const url = flags.gateway;
  if (!/^https?:\/\/[^/\s]+/.test(url)) throw new UserError(`--gateway ${JSON.stringify(url)} is not an http(s) URL`, "e.g. --gateway http://127.0.0.1:8080");
  const file = flags.apiKeyFile;
  const keys =
    file !== undefined
      ? collectKeys({ flags: [], env: undefined, file: { path: file, text: readTextFile(file, "API key file") } })
      : process.env.LAUNCHER_API_KEY === undefined
        ? []
        : collectKeys({ flags: [], env: process.env.LAUNCHER_API_KEY });
  const apiKey = keys[0];
  return apiKey === undefined ? { url } : { url, apiKey };
}
