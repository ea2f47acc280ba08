import { runLocal, spawnLocal, streamLocal, type Transport } from "./transport.js";

/** This machine, as if it were a node: for `--local` image builds and the image to push from. */
export function localTransport(name = "local"): Transport {
  const split = (argv: readonly string[]): [string, string[]] => [argv[0] ?? "true", argv.slice(1)];
  return {
    node: name,
    exec: (argv, options) => runLocal(...split(argv), options),
    stream: (argv, options) => streamLocal(...split(argv), options?.signal),
    spawn: (argv) => spawnLocal(...split(argv)),
  };
}
