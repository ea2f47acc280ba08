import { createRequire } from "node:module";
import path from "node:path";

// An eval set the practice engine answers (docker-images/practice-engine/lib/answers.js: `What is
// A op B?`, options by letter), one item or more for every grader: the one set the rig's eval
// tests score, each against the answers it knows the engine gives.

/** The practice engine's prompt hash (lib/answers.js picks its wrong answers by it). */
export const engineHash = (createRequire(import.meta.url)(path.resolve("docker-images/practice-engine/lib/http.js")) as { hash: (s: string) => number }).hash;

const choice = (q: string, options: readonly number[]): string => `${q}\n${options.map((o, i) => `${String.fromCharCode(65 + i)}) ${o}`).join("\n")}`;

export const ARITH_ITEMS = [
  { id: "add", prompt: "What is 2 + 3?", expected: "5", grader: "exact" },
  { id: "mul", prompt: "What is 7 * 6?", expected: "42", grader: "exact" },
  { id: "sub", prompt: "What is 10 - 12?", expected: "-2", grader: "exact" },
  { id: "add2", prompt: "What is 9 + 9?", expected: "18" },
  { id: "has", prompt: "Quickly: what is 31 + 40?", expected: "71", grader: "contains" },
  { id: "has2", prompt: "Say it: what is 11 x 11?", expected: "121", grader: "contains" },
  { id: "re", prompt: "What is 100 + 23?", expected: "^123$", grader: "regex" },
  { id: "re2", prompt: "What is 5 - 50?", expected: "^-45$", grader: "regex" },
  { id: "c1", prompt: choice("What is 4 + 4?", [7, 8, 9, 10]), expected: "B", grader: "choice" },
  { id: "c2", prompt: choice("What is 3 * 5?", [15, 16, 17, 18]), expected: "A", grader: "choice" },
  { id: "c3", messages: [{ role: "system", content: "End with 'Answer: $LETTER'." }, { role: "user", content: choice("What is 20 - 1?", [18, 21, 20, 19]) }], expected: "D", grader: "choice" },
  { id: "c4", messages: [{ role: "user", content: choice("What is 6 + 7?", [12, 14, 13, 11]) }], expected: "c", grader: "choice" },
] as const;
export type ArithItem = (typeof ARITH_ITEMS)[number];

/** The prompt the engine answers: the item's own, or its last message's. */
export const lastPrompt = (i: ArithItem): string => ("prompt" in i ? i.prompt : (i.messages[i.messages.length - 1]?.content ?? ""));

/** The ids of the items an engine answering wrong on `share` of prompts gets wrong (its rule, by the prompt's hash). */
export const wrongIdsAt = (share: number): string[] => ARITH_ITEMS.filter((i) => engineHash(lastPrompt(i)) / 0x100000000 < share).map((i) => i.id);
