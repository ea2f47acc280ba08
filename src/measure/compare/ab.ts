/**
 * `launcher compare A B --run`: the whole A/B in one lane. Boot A in the lane, bench it and
 * evaluate it through the lane, swap the lane to B (the lane's usual swap: see README "Lanes"),
 * the same again; the caller prints the comparison. Written against ports: `up` is the lane boot
 * (`launcher up RECIPE --lane LANE`), `bench` and `eval` are `launcher bench`'s and `launcher
 * eval`'s use cases, which store their runs themselves. Through the lane's name both sides are
 * reached the same way, so a difference is the recipes', not the route's.
 */
import type { BenchRun, EvalRun } from "../../contract/evidence.js";
import type { Evidence } from "./compare.js";
import { checkInterrupted } from "../../config/abort.js";

export interface AbPorts {
  /** Boots the recipe into the lane and returns once it serves there (the second call swaps the lane). */
  up(recipe: string, lane: string): Promise<void>;
  /** Benches the target (the lane): every run of the series. */
  bench(target: string): Promise<BenchRun[]>;
  /** Evaluates the target on the question set; absent when no set was given (answers are then not compared). */
  eval?: (target: string) => Promise<EvalRun>;
  /** What is happening, for the user. */
  say(text: string): void;
}

/**
 * One side: boot it in the lane, then measure it there. The signal is checked before every step:
 * a port may end early and return normally when interrupted (a boot watched through the daemon
 * only detaches), and what follows must then not start (above all not B's boot, which would swap
 * the lane away from A).
 */
async function side(recipe: string, lane: string, ports: AbPorts, signal: AbortSignal): Promise<Evidence> {
  checkInterrupted(signal, `compare --run stopped before ${recipe} was booted in lane ${lane}`);
  ports.say(`${recipe}: booting in lane ${lane}`);
  await ports.up(recipe, lane);
  checkInterrupted(signal, `compare --run stopped after ${recipe}'s boot in lane ${lane}, before its bench`);
  ports.say(`${recipe}: bench through lane ${lane}`);
  const bench = await ports.bench(lane);
  if (ports.eval === undefined) return { label: recipe, bench };
  checkInterrupted(signal, `compare --run stopped after ${recipe}'s bench, before its eval`);
  ports.say(`${recipe}: eval through lane ${lane}`);
  return { label: recipe, bench, eval: await ports.eval(lane) };
}

/**
 * A, then B, in one lane. A failure stops there and is thrown as it came (the up, bench or eval
 * use case's own error); the lane is left as that step left it (serving A when B's boot failed
 * beside it, per the lane swap's rules). The lane ends serving B. Interrupted (`signal`), it throws
 * the project's Interrupted before the next step and starts nothing more.
 */
export async function abInOneLane(a: string, b: string, lane: string, ports: AbPorts, signal: AbortSignal): Promise<[Evidence, Evidence]> {
  const first = await side(a, lane, ports, signal);
  const second = await side(b, lane, ports, signal);
  return [first, second];
}
