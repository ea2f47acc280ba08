import type { EngineFlags, ManagedFlag } from "../adapter.js";
import { LLAMA_SERVER_OPTIONS, LLAMA_SERVER_VERSION, readOptionRow } from "./options.js";

/*
 * llama-server's command line as common/arg.cpp defines it (./options.ts, its table). Unlike
 * argparse, common_params_parse takes every option only as spelled (no prefixes), and a flag's
 * value is the next word; `--x=v` is taken too (common/arg.cpp common_params_parse_ex splits at
 * the first `=` of a word that starts with `--`).
 */

const ROWS = LLAMA_SERVER_OPTIONS.map(readOptionRow);

/** Every spelling of the option that `flag` is one of. */
function spellingsOf(flag: string): string[] {
  const row = ROWS.find((r) => r.names.includes(flag));
  if (row === undefined) throw new Error(`src/engine/llamacpp/options.ts has no option ${flag}`);
  return [...row.names];
}

/** Where a recipe names its GGUF files instead of a download at boot. */
const GGUF_INSTEAD = "name the GGUF files with the recipe's gguf (model = the Hub repo; launcher models pull fetches them), or give the file's path in the container as model";

/**
 * Flags launcher writes itself, and those it refuses. `env`: the same option read from the
 * environment (tools/server/README.md at 00dc8057, each row's "(env: ...)"; common/arg.cpp reads
 * it only when the command line does not give the option, so one launcher writes is silently
 * dropped and one it refuses takes effect): refused in a recipe's env alike. The head gets --model, --host, --port and
 * --rpc (./command.ts); a worker runs rpc-server, which reads none of the recipe's args.
 */
const MANAGED: readonly ManagedFlag[] = [
  { flags: spellingsOf("--host"), env: ["LLAMA_ARG_HOST"], instead: "launcher serves the API on the head's address it reaches it at; set api_bind in the cluster file to choose another" },
  { flags: spellingsOf("--port"), env: ["LLAMA_ARG_PORT"], instead: "set api_port in the cluster file or pass --port to launcher" },
  { flags: spellingsOf("--rpc"), env: ["LLAMA_ARG_RPC"], instead: "set required_nodes in the recipe: launcher starts rpc-server on every worker node and gives the head their fabric addresses" },
  // server-context.cpp answers /metrics 501 without --metrics: drain (a lane's swap waits for the
  // running requests, llamacpp:requests_processing) and the daemon's live view need it.
  { flags: spellingsOf("--metrics"), env: ["LLAMA_ARG_ENDPOINT_METRICS"], instead: "remove it: launcher always passes --metrics (drain and the daemon read /metrics)" },
  // tools/server/server.cpp: without a model path nor -hf the server runs as a router of child
  // servers ("router server is listening"), each on a port of its own.
  { flags: spellingsOf("--models-dir"), env: ["LLAMA_ARG_MODELS_DIR"], why: "llama-server then runs as a router that starts a server per model on ports of its own, where launcher serves one model at api_port", instead: "remove it; one recipe serves one model" },
  { flags: spellingsOf("--models-preset"), env: ["LLAMA_ARG_MODELS_PRESET"], why: "it is the router mode's, which serves several models on ports of its own", instead: "remove it; one recipe serves one model" },
  // Weights from the network at boot: launcher moves the weights itself (models pull / sync), and
  // a second model source beside the recipe's model stops nothing but loads another file.
  { flags: spellingsOf("--hf-repo"), env: ["LLAMA_ARG_HF_REPO"], why: "it downloads a model at boot beside the recipe's model", instead: GGUF_INSTEAD },
  { flags: spellingsOf("--hf-file"), env: ["LLAMA_ARG_HF_FILE"], why: "it picks a file of --hf-repo, which launcher does not use", instead: GGUF_INSTEAD },
  { flags: spellingsOf("--model-url"), env: ["LLAMA_ARG_MODEL_URL"], why: "it downloads a model at boot beside the recipe's model", instead: GGUF_INSTEAD },
  { flags: spellingsOf("--docker-repo"), env: ["LLAMA_ARG_DOCKER_REPO"], why: "it downloads a model at boot beside the recipe's model", instead: GGUF_INSTEAD },
  // server-http.cpp: with a key and a certificate httplib's SSLServer serves HTTPS only.
  { flags: [...spellingsOf("--ssl-key-file"), ...spellingsOf("--ssl-cert-file")], env: ["LLAMA_ARG_SSL_KEY_FILE", "LLAMA_ARG_SSL_CERT_FILE"], why: "llama-server then serves HTTPS only, and launcher's readiness check, drain and gateway speak plain HTTP to the engine", instead: "remove it; put TLS in front of launcher's gateway (launcher serve) instead" },
  // server-context.cpp: keys from --api-key-file are read inside the container, so launcher's
  // readiness check and gateway could not send one of them.
  { flags: spellingsOf("--api-key-file"), env: ["LLAMA_ARG_API_KEY_FILE"], why: "the keys are read from a file inside the container, which launcher's readiness check and gateway cannot send", instead: "give the key with --api-key (launcher passes it to the engine in LLAMA_API_KEY)" },
  // --api-prefix moves every route, /health and /v1 among them, under the prefix.
  { flags: spellingsOf("--api-prefix"), env: ["LLAMA_ARG_API_PREFIX"], why: "every route moves under the prefix, where launcher's readiness check (GET /health) and its gateway (/v1) do not look", instead: "remove it" },
  // Options that print and exit (arg.cpp: their handlers call exit(0)): no API to wait for.
  { flags: [...spellingsOf("--help"), ...spellingsOf("--version"), ...spellingsOf("--cache-list"), ...spellingsOf("--completion-bash"), ...spellingsOf("--list-devices")], why: "llama-server then prints and exits, with no API to wait for", instead: "remove it" },
];

/** The options whose rows list their values. */
const CHOICES = ROWS.filter((r) => r.choices !== undefined).map((r) => ({ flags: r.names, values: r.choices as readonly string[], instead: `give one of ${(r.choices as readonly string[]).join(", ")}` }));

/** llama.cpp's flags as launcher's table knows them (./options.ts). */
export const llamacppFlags: EngineFlags = {
  judge: { by: "table", engine: "llama.cpp", version: LLAMA_SERVER_VERSION },
  known: ROWS.flatMap((r) => r.names),
  // common/arg.cpp common_params_parse_ex looks each word up in its map of spellings: no prefixes.
  abbreviations: false,
  aliases: ROWS.filter((r) => r.names.length > 1).map((r) => r.names),
  managed: MANAGED,
  choices: CHOICES,
  boolean: ROWS.filter((r) => !r.takesValue).flatMap((r) => r.names),
  many: ROWS.filter((r) => r.arity > 1).flatMap((r) => r.names),
  // arg.cpp: --chat-template-kwargs "must be a valid json object string"; --ui-config and
  // --mcp-servers-json are parsed with json::parse.
  json: [...spellingsOf("--chat-template-kwargs"), ...spellingsOf("--ui-config"), ...spellingsOf("--mcp-servers-json")],
  jsonWhenBraced: [],
  model: spellingsOf("--model"),
  singleNode: [],
  worldSize: [],
  dividesTensorParallel: [],
  backend: [],
  flagFiles: [],
  // --api-key "(env: LLAMA_API_KEY)": the flag wins over the env (arg.cpp reads env only for an
  // option the command line did not set).
  apiKey: { flags: spellingsOf("--api-key"), env: "LLAMA_API_KEY" },
};

/** Every spelling of one option of the table (the adapter's model and memory flags). */
export const llamacppSpellings = spellingsOf;
