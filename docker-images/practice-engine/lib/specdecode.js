'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): speculative decoding's counters on /metrics,
// as vLLM exposes them when a speculative config is set (vllm/v1/spec_decode/metrics.py
// SpecDecodingProm, registered by vllm/v1/metrics/loggers.py PrometheusStatLogger with the labels
// model_name and engine): the prometheus_client Counters
//   vllm:spec_decode_num_drafts, vllm:spec_decode_num_draft_tokens,
//   vllm:spec_decode_num_accepted_tokens, vllm:spec_decode_num_accepted_tokens_per_pos{position}
// which prometheus_client writes with the `_total` suffix. Nothing is drafted for real: each
// decoding step "drafts" num_speculative_tokens tokens and "accepts" a share of them such that
// accepted / drafted follows PRACTICE_SPEC_ACCEPT_RATE exactly over a run (an error-carrying
// count, not chance: tests can check the rate launcher reports), and the step yields accepted + 1
// tokens (the bonus token), as vLLM's mean acceptance length counts it.

const { ConfigError } = require('./config.js');

/** num_speculative_tokens of a `--speculative-config` value (JSON), or 0 when there is none. */
function speculativeTokens(raw) {
  if (typeof raw !== 'string') return 0;
  let v;
  try {
    v = JSON.parse(raw);
  } catch {
    return 0; // args.js already refused JSON that does not parse; a non-JSON value drafts nothing here
  }
  const k = v && typeof v === 'object' ? v.num_speculative_tokens : undefined;
  return Number.isInteger(k) && k > 0 ? k : 0;
}

function acceptRate(env) {
  const raw = (env.PRACTICE_SPEC_ACCEPT_RATE ?? '').trim();
  if (raw === '') return 0.7;
  const v = Number(raw);
  if (!/^(\d+\.?\d*|\.\d+)$/.test(raw) || !(v >= 0 && v <= 1)) {
    throw new ConfigError(`PRACTICE_SPEC_ACCEPT_RATE must be a number from 0 to 1, got '${env.PRACTICE_SPEC_ACCEPT_RATE}'`);
  }
  return v;
}

/** The engine's speculative decoding, or null without a speculative config (then no counters, as vLLM). */
function createSpecDecode(flags, env) {
  const k = speculativeTokens(flags['speculative-config']);
  if (k === 0) return null;
  const rate = acceptRate(env);
  const c = { drafts: 0, draftTokens: 0, accepted: 0, perPos: new Array(k).fill(0) };
  let carry = 0; // accepted tokens owed to the rate, carried between steps
  let left = 0; // tokens of the current step not yet emitted
  return {
    numSpeculativeTokens: k,
    rate,
    counters: c,
    /** One emitted token: a new step (one draft) starts when the last one's tokens are out. */
    onToken() {
      if (left === 0) {
        carry += rate * k;
        const a = Math.min(k, Math.floor(carry + 1e-9));
        carry -= a;
        c.drafts++;
        c.draftTokens += k;
        c.accepted += a;
        for (let i = 0; i < a; i++) c.perPos[i]++;
        left = a + 1;
      }
      left--;
    },
    /** Prometheus text lines, labels as vLLM's (model_name, engine). */
    metricsLines(modelName) {
      const esc = modelName.replace(/\\/g, '\\\\').replace(/"/g, '\\"');
      const labels = `model_name="${esc}",engine="0"`;
      const counter = (name, help, samples) => [
        `# HELP ${name}_total ${help}`,
        `# TYPE ${name}_total counter`,
        ...samples.map(([extra, v]) => `${name}_total{${labels}${extra}} ${v.toFixed(1)}`),
      ];
      return [
        ...counter('vllm:spec_decode_num_drafts', 'Number of spec decoding drafts.', [['', c.drafts]]),
        ...counter('vllm:spec_decode_num_draft_tokens', 'Number of draft tokens.', [['', c.draftTokens]]),
        ...counter('vllm:spec_decode_num_accepted_tokens', 'Number of accepted tokens.', [['', c.accepted]]),
        ...counter('vllm:spec_decode_num_accepted_tokens_per_pos', 'Accepted tokens per draft position.', c.perPos.map((v, i) => [`,position="${i}"`, v])),
      ];
    },
  };
}

module.exports = { createSpecDecode, speculativeTokens };
