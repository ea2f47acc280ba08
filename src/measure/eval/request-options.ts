import { UserError } from "../../config/errors.js";

/**
 * The `reasoning_effort` values of the chat completions request (vllm/entrypoints/openai/protocol.py
 * ChatCompletionRequest: `Optional[Literal["low", "medium", "high"]]`; another value is a 400).
 */
export const REASONING_EFFORTS = ["low", "medium", "high"] as const;
export type ReasoningEffort = (typeof REASONING_EFFORTS)[number];

export interface RequestOptionFlags {
  /** `--chat-template-kwargs '{"thinking":false}'`: a JSON object. */
  readonly chatTemplateKwargs?: string;
  readonly reasoningEffort?: ReasoningEffort;
}

/**
 * The per-request fields of the chat completions body the flags ask for, as the request takes
 * them: `chat_template_kwargs` an object (protocol.py: `Optional[dict[str, Any]]`, handed to the
 * chat template), `reasoning_effort` a string. Only what was given is sent.
 */
export function requestOptions(flags: RequestOptionFlags): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (flags.chatTemplateKwargs !== undefined) {
    let value: unknown;
    try {
      value = JSON.parse(flags.chatTemplateKwargs);
    } catch (e) {
      throw new UserError(`--chat-template-kwargs is not JSON: ${(e as Error).message}`, `give a JSON object, e.g. --chat-template-kwargs '{"thinking":false}'`);
    }
    if (value === null || typeof value !== "object" || Array.isArray(value)) {
      throw new UserError(`--chat-template-kwargs must be a JSON object, got ${JSON.stringify(value)}`, `e.g. --chat-template-kwargs '{"thinking":false}'`);
    }
    out.chat_template_kwargs = value;
  }
  if (flags.reasoningEffort !== undefined) out.reasoning_effort = flags.reasoningEffort;
  return out;
}
