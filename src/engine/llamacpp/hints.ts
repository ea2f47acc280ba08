/**
 * What to do about a failed llama.cpp boot, from its own words: one row per cause, first match wins.
 * The lines are llama.cpp's (./log-shapes.ts names where each comes from).
 */
const HINTS: readonly { readonly test: RegExp; readonly hint: string }[] = [
  // docker run's own error when the --entrypoint launcher names is not in the image (moby's
  // "exec: \"/app/rpc-server\": stat /app/rpc-server: no such file or directory").
  { test: /\/app\/rpc-server: no such file/, hint: "the image has no /app/rpc-server: llama.cpp's published images are built without its RPC backend; build one with -DGGML_RPC=ON (docker-images/llamacpp-spark/Dockerfile), or run the recipe on one node" },
  { test: /\/app\/llama-server: no such file/, hint: "the image has no /app/llama-server, where llama.cpp's images keep it: set entrypoint in the recipe to the image's llama-server" },
  { test: /model must be loaded with the first split/, hint: "the recipe's model is not the first part of a split GGUF: name the -00001-of-N file; llama.cpp finds the other parts beside it" },
  { test: /^gguf_init_from_file\w*: failed to open/, hint: "the GGUF file is not where the recipe's model says inside the container: check the model path and the mount that holds it (extra_mounts), on every node that runs the head" },
  { test: /cudaMalloc failed: out of memory|failed to allocate \S+ buffer|unable to allocate \S+ buffer/, hint: "the weights do not fit the memory left on the node: offload fewer layers (-ngl), use a smaller quantisation, or spread the model over more nodes (required_nodes)" },
  { test: /^llama_init_from_model: failed to /, hint: "the context does not fit: lower --ctx-size (-c) or --parallel, or quantise the KV cache (--cache-type-k q8_0 --cache-type-v q8_0)" },
  { test: /Failed to connect to \S+|RPC handshake failed/, hint: "the head could not reach a worker's rpc-server: check that the worker's container runs and that its fabric address and master_port are reachable from the head" },
  { test: /RPC server version mismatch/, hint: "the head's llama.cpp and a worker's rpc-server speak different RPC protocol versions: run one image on every node" },
  { test: /Remote RPC server crashed/, hint: "a worker's rpc-server died under the head: its own log says why (launcher logs DEPLOYMENT)" },
  { test: /^Failed to create server socket/, hint: "rpc-server could not bind its fabric address and master_port: another process holds the port, or the address is not the node's" },
  { test: /^error: (?:invalid|unknown) argument: /, hint: "llama-server does not know a flag of the recipe's args: check it against `llama-server --help` of the image's build" },
  { test: /^No devices found|^Failed to create backend for device/, hint: "rpc-server found no GPU: check that the container gets the node's GPU (docker run_args in the cluster file) and that the image is a CUDA build" },
];

export function llamacppHint(cause: string | undefined, lines: readonly string[]): string | undefined {
  const words = [cause ?? "", ...lines];
  return HINTS.find((h) => words.some((l) => h.test.test(l)))?.hint;
}
