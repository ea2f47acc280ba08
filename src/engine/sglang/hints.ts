/**
 * What SGLang's own failure lines tell the user to do (`up`'s failure message and `launcher
 * explain`, through the adapter's hintFor). Each shape is named with its place in SGLang's source.
 */

interface Rule {
  readonly pattern: RegExp;
  readonly say: (m: RegExpExecArray) => string;
}

const RULES: readonly Rule[] = [
  // python/sglang/srt/model_executor/model_runner.py profile_max_num_token: "Not enough memory.
  // Please try to increase --mem-fraction-static." (the KV pool would hold no token).
  { pattern: /Not enough memory\. Please try to increase --mem-fraction-static/, say: () => "the weights leave SGLang no room for its KV cache within --mem-fraction-static: raise it (the share of the node's memory SGLang takes for weights and KV cache), or serve a smaller model" },
  // torch's allocator: "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ...".
  { pattern: /CUDA out of memory/, say: () => "the GPU ran out of memory: lower --mem-fraction-static (on a DGX Spark the GPU shares the node's memory with the system; users keep about 0.5), or lower --cuda-graph-max-bs / --max-running-requests" },
  // argparse: "launch_server.py: error: unrecognized arguments: --foo".
  { pattern: /: error: unrecognized arguments: ([^\s]+)/, say: (m) => `the image's SGLang has no ${m[1] as string}: remove it from the recipe's args, or use an image whose SGLang takes it` },
  { pattern: /: error: argument ([^\s:]+): /, say: (m) => `SGLang refused the value of ${m[1] as string}: fix it in the recipe's args` },
  // uvicorn's bind failure (./log-shapes.ts BIND_FAILED): on rank 0 its API port, on a worker its
  // dummy health server's (loopback, the same port: ./command.ts). An IPv6 address is a 4-tuple
  // ('::', 30000, 0, 0) in asyncio's words.
  { pattern: /\[Errno 98\] error while attempting to bind on address \('([^']{1,100})', (\d{1,5})[,)]/, say: (m) => `port ${m[2] as string} at ${m[1] as string} is already in use on that node (SGLang binds the deployment's api_port there, on a worker for its health check): stop what listens on it, or give the deployment another api_port (up --port)` },
  { pattern: /CUDA error: device-side assert triggered/, say: () => "a CUDA kernel's assert fired (often a token id outside the model's vocabulary: a tokenizer that does not match the weights); set CUDA_LAUNCH_BLOCKING = \"1\" in the recipe's [env] to see the kernel" },
];

export function sglangHint(cause: string | undefined, lines: readonly string[]): string | undefined {
  for (const text of [...(cause === undefined ? [] : [cause]), ...lines]) {
    for (const r of RULES) {
      const m = r.pattern.exec(text);
      if (m !== null) return r.say(m);
    }
  }
  return undefined;
}
