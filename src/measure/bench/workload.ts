import { createHash } from "node:crypto";
import * as z from "zod";
import type { Diagnostic } from "../../config/diagnostic.js";
import { UserError } from "../../config/errors.js";
import { messagesOf, PROMPT_FIELDS, readLine, type ChatMessage } from "../jsonl.js";

export type { ChatMessage };

/** What one request sends. */
export interface BenchPrompt {
  readonly messages: readonly ChatMessage[];
  /** max_tokens; absent: the workload's --output-len. */
  readonly output_len?: number;
  /** Its length in words, the input count when an engine gives no `usage`. */
  readonly planned_input: number;
}

export const MAX_CONCURRENCY = 1024;

/** `--concurrency 1,4,8`: distinct whole numbers from 1, in the order given. */
export function parseConcurrencies(text: string): number[] {
  const parts = text.split(",").map((p) => p.trim());
  const bad = parts.find((p) => !/^\d+$/.test(p) || Number(p) < 1 || Number(p) > MAX_CONCURRENCY);
  if (bad !== undefined || parts.length === 0) {
    throw new UserError(`--concurrency ${JSON.stringify(text)}: ${JSON.stringify(bad ?? "")} is not a whole number from 1 to ${MAX_CONCURRENCY}`, "e.g. --concurrency 1,4,8");
  }
  const levels = parts.map(Number);
  if (new Set(levels).size !== levels.length) throw new UserError(`--concurrency ${JSON.stringify(text)} names a level twice`, "e.g. --concurrency 1,4,8");
  return levels;
}

// Filler words; several, so that a prompt is not one repeated token (an engine may compress that).
const WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima", "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform", "victor", "whiskey", "xray", "yankee", "zulu"];

/** `n` words, differing from the first word on for each `seed` (so that no two requests share a cached prefix). */
function words(n: number, seed: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(i === 0 ? `r${seed}` : (WORDS[(i * 7 + seed * 13) % WORDS.length] as string));
  return out.join(" ");
}

/**
 * The synthetic prompt of request `index`: `inputLen` words (a word is about one token; the input
 * reported is the engine's own count, from `usage`), after `depth` words of earlier context as
 * llama-benchy's `--depth` puts a context of that depth before the question. The context is
 * distinct per request: a prefix cache would otherwise answer it for free after the first.
 */
export function syntheticPrompt(index: number, inputLen: number, depth: number): BenchPrompt {
  const question: ChatMessage = { role: "user", content: words(inputLen, index) };
  if (depth === 0) return { messages: [question], planned_input: inputLen };
  const context: ChatMessage = { role: "user", content: words(depth, index + 1_000_003) };
  return { messages: [context, { role: "assistant", content: "ok" }, question], planned_input: depth + 1 + inputLen };
}

const countWords = (s: string): number => (s.match(/\S+/g) ?? []).length;

/** A message's words: its text, or its content parts' `text` (an image part counts none). */
const wordsOf = (m: ChatMessage): number =>
  typeof m.content === "string" ? countWords(m.content) : m.content.reduce<number>((a, p) => a + (typeof (p as { text?: unknown }).text === "string" ? countWords((p as { text: string }).text) : 0), 0);

const PROMPT_KEYS = ["prompt", "messages", "output_len"] as const;
const LineSchema = z.strictObject({ ...PROMPT_FIELDS, output_len: z.number().int().min(1).optional() });

/** A `--prompts FILE.jsonl`: one JSON object a line, `{"prompt": "..."}` or `{"messages": [...]}`, with an optional `output_len` (read as eval reads its set). */
export function parsePrompts(file: string, text: string): { prompts: BenchPrompt[]; sha256: string } {
  const prompts: BenchPrompt[] = [];
  const problems: Diagnostic[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    if (raw.trim() === "") return;
    const read = readLine(file, i + 1, raw, LineSchema, { keys: PROMPT_KEYS, example: '{"prompt": "Why is the sky blue?", "output_len": 128}' });
    problems.push(...read.diagnostics);
    const l = read.value;
    if (l === undefined) return;
    const messages = messagesOf(l);
    prompts.push({ messages, planned_input: messages.reduce((a, m) => a + wordsOf(m), 0), ...(l.output_len === undefined ? {} : { output_len: l.output_len }) });
  });
  if (problems.length > 0) throw new UserError(`${file}: ${problems.length} problem(s) in the prompts file`, undefined, problems);
  if (prompts.length === 0) throw new UserError(`${file} holds no prompts`, 'one JSON object a line, e.g. {"prompt": "Why is the sky blue?"}');
  return { prompts, sha256: createHash("sha256").update(text).digest("hex") };
}
