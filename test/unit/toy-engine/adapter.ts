import type { EngineAdapter, EngineRecipe, RankCommand, RankContext } from "../../../src/engine/adapter.js";

/**
 * A second engine that exists only for the seam test: this folder plus one registry entry is all
 * it takes (test/unit/engine-seam.test.ts registers it). Its words are made up, and differ from
 * vLLM's on purpose, so that any vLLM fact still wired outside src/engine shows up in the plan.
 */
export const toy: EngineAdapter = {
  name: "toy",
  // The toy reads no parallel sizes nor backend: a recipe that sets them is refused.
  recipeUse: { engine: "Toy", keys: ["entrypoint"], envPrefixes: ["TOY_"] },
  flags: {
    managed: [{ flags: ["--listen", "-l"], instead: "set api_port in the cluster file" }],
    boolean: ["--quiet"],
    many: ["--alias"],
    json: ["--tuning"],
    jsonWhenBraced: [],
    model: ["--weights"],
    singleNode: [],
    worldSize: [],
    dividesTensorParallel: [],
    backend: [],
    flagFiles: [],
    apiKey: { flags: ["--secret"], env: "TOY_SECRET" },
  },
  managedEnv: ["TOY_PEER"],
  bootPhases: [
    { phase: "loading", pattern: /toy: loading weights/ },
    { phase: "kv-cache", pattern: /toy: cache holds (\d+) tokens/, figures: { kv_tokens: 1 } },
    { phase: "serving", pattern: /toy: listening/ },
  ],
  // The toy's log has no header or process prefix: a line is its own message.
  readLine: (raw: string) => ({ text: raw, body: raw }),
  fatalPatterns: [/toy: gave up/],
  exceptionPattern: /^toy error: /,
  wrapperPatterns: [/^toy error: a peer failed/],
  peerLossPatterns: [],
  warningPatterns: [/toy: could not load extra/],
  readyPattern: /toy: listening/,
  rendezvousPatterns: [/toy: waiting for peers/],
  apiMethods: { "/v1/chat/completions": ["POST"], "/v1/toy/poke": ["PUT"] },
  rankCommand: (recipe: EngineRecipe, ctx: RankContext): RankCommand => ({
    entrypoint: ["toyserve"],
    command: ["--weights", recipe.model, "--peer", `${ctx.masterAddr}:${ctx.masterPort}`, "--rank", String(ctx.rank), ...(ctx.rank === 0 ? ["--listen", String(ctx.apiPort)] : []), ...recipe.args],
  }),
  nodeEnv: (_recipe, node) => (node.fabric_ip === undefined ? {} : { TOY_PEER: node.fabric_ip }),
  // The toy's head hands out the ranks, so it starts first.
  startOrder: () => "head first",
  // The toy asks nothing of its image but a version line.
  image: { versionCommand: ["toyserve", "--version"], parseVersion: (out: string) => out.trim() || null, problems: () => [] },
  modelFlags: { servedName: ["--alias"], revision: ["--weights-rev"] },
  healthPath: "/toy/alive",
  metricsPath: "/toy/metrics",
  runningRequestsMetric: "toy_busy",
};
