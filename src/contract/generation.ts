/**
 * A wedged deployment: its /health answers but it completed no generation within its bound
 * (src/supervise/generation.ts is the rule, src/supervise/generation-watch.ts the daemon's watch).
 * One shape for every place that says so: the gateway's 503, the read API's supervision, /metrics,
 * and the supervisor's restart (its Failure kind and the history's reason are WEDGED_REASON).
 */
export interface WedgedDeployment {
  readonly cluster: string;
  readonly deployment: string;
  readonly served_model: string;
  readonly lane?: string;
  /** ISO time of its last completed generation (or of when it was first seen serving, when it completed none). */
  readonly since: string;
  /** Why its probe failed: "its probe of one token got no answer within 30 s". */
  readonly reason: string;
  /** The whole sentence: "deployment D is wedged since T: /health answers but ...". */
  readonly message: string;
}

/** The reason a restart of a wedged group records in the history, and its Failure kind. */
export const WEDGED_REASON = "wedged";

/** The gateway's error code for a request to a wedged deployment. */
export const WEDGED_CODE = "deployment_wedged";

/**
 * How often the gateway reports a streamed answer's progress to the generation watch: its first
 * chunk, then the first chunk after each such period. A chunk not reported came at most this long
 * after one that was, so the watch's rule (src/supervise/generation.ts) allows this much.
 */
export const PROGRESS_EVERY_MS = 1000;

/**
 * The one-token request of a generation probe, wherever it runs: the daemon's watch
 * (src/supervise/generation-watch.ts) and the program each engine's image runs as the exported
 * leader's liveness (src/engine/generation-probe.ts). The Completions API, which vLLM serves for
 * every text generation model and which needs no chat template, unlike /v1/chat/completions
 * (vllm-project/vllm docs/source/serving/openai_compatible_server.md, "Supported APIs"). `model`
 * is the served name, as every request through the gateway names it; the key goes as the gateway
 * sends it (./engine-auth.ts).
 */
export const PROBE_PATH = "/v1/completions";
export const probeBody = (servedModel: string): string => JSON.stringify({ model: servedModel, prompt: "Hello", max_tokens: 1, temperature: 0, stream: false });

/** The most of a probe's answer read: a one-token completion is a few hundred bytes. */
export const PROBE_ANSWER_BYTES = 64 * 1024;

/** The wait between a probe's quick failures (a dropped connection), within its bound. */
export const PROBE_RETRY_MS = 1000;
