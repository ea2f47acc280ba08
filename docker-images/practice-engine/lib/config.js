'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): PRACTICE_* environment knobs.
// Any malformed knob is a usage error (exit 2), like a bad flag.

class ConfigError extends Error {}

const MAX_LOAD_ALLOC_MIB = 2048;

const FAULTS = ['oom', 'cuda_oom', 'kv_too_small', 'engine_core_init', 'hang', 'worker_exit', 'crash_after_ready', 'invalid_config'];
// current: vLLM's log as main writes it; v0.11: the shapes of about v0.10 to early 2026 (lib/log.js).
const LOG_STYLES = ['current', 'v0.11'];

function num(env, name, def, { int = false, min = 0, gt = false } = {}) {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return def;
  const s = raw.trim();
  const ok = int ? /^[+-]?\d+$/.test(s) : /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s);
  const v = Number(s);
  if (!ok || !Number.isFinite(v) || (gt ? v <= min : v < min)) {
    throw new ConfigError(`${name} must be ${int ? 'an integer' : 'a number'} ${gt ? '>' : '>='} ${min}, got '${raw}'`);
  }
  return v;
}

/** Read PRACTICE_* knobs; args is the parsed command line (for rank defaults). */
function readConfig(env, args) {
  const c = {
    phaseDelayMs: num(env, 'PRACTICE_PHASE_DELAY_MS', 100, { int: true }),
    loadDelayMs: num(env, 'PRACTICE_LOAD_DELAY_MS', 300, { int: true }),
    loadSeconds: num(env, 'PRACTICE_LOAD_SECONDS', null),
    modelGib: num(env, 'PRACTICE_MODEL_GIB', 84.12),
    kvGib: num(env, 'PRACTICE_KV_GIB', 11.02),
    kvTokens: num(env, 'PRACTICE_KV_TOKENS', 1250000, { int: true, min: 1 }),
    tokensPerSec: num(env, 'PRACTICE_TOKENS_PER_SEC', 200),
    // lib/answers.js: the share of eval questions answered wrongly (the same ones every time).
    wrongAnswers: num(env, 'PRACTICE_WRONG_ANSWERS', 0),
    rendezvousTimeoutS: num(env, 'PRACTICE_RENDEZVOUS_TIMEOUT_S', 120, { gt: true }),
    crashAfterMs: num(env, 'PRACTICE_CRASH_AFTER_MS', 1000, { int: true }),
    recordLagMs: num(env, 'PRACTICE_RECORD_LAG_MS', 0, { int: true }),
    // A wedged engine (an EngineCore spinning in a decode hang): this long after its API listens,
    // /health still answers 200 and no generation ever makes a token again (null: never).
    wedgeAfterMs: num(env, 'PRACTICE_WEDGE_AFTER_MS', null, { int: true }),
    envChecks: (env.PRACTICE_ENV_CHECKS ?? '1').trim() !== '0',
    fault: null,
    faultRank: null,
    logStyle: (env.PRACTICE_LOG_STYLE ?? '').trim() || 'current',
    // A vLLM plugin (entry point) that fails to import: logged, and the boot goes on.
    failedPlugin: (env.PRACTICE_FAILED_PLUGIN ?? '').trim() || null,
    // Memory the "loader" takes step by step while loading and holds until exit, for launcher's
    // memory guard tests; bounded so that a test can never exhaust the machine that runs it.
    loadAllocMib: num(env, 'PRACTICE_LOAD_ALLOC_MIB', 0, { int: true }),
    loadAllocStepMib: num(env, 'PRACTICE_LOAD_ALLOC_STEP_MIB', 64, { int: true, gt: true }),
    // vLLM's own switch to its Rust HTTP frontend (VLLM_USE_RUST_FRONTEND, /work/notes/vllm28-research.md
    // 2.9): the head then prints that frontend's ready line. "1" is on, as vllm/envs.py reads its
    // other on/off switches (bool(int(...)); this one's own entry not re-read).
    rustFrontend: (env.VLLM_USE_RUST_FRONTEND ?? '').trim() === '1',
  };
  if (c.loadAllocMib > MAX_LOAD_ALLOC_MIB) {
    throw new ConfigError(`PRACTICE_LOAD_ALLOC_MIB must be at most ${MAX_LOAD_ALLOC_MIB} (2 GiB), got '${env.PRACTICE_LOAD_ALLOC_MIB}'`);
  }
  if (c.wrongAnswers > 1) throw new ConfigError(`PRACTICE_WRONG_ANSWERS must be a number from 0 to 1, got '${env.PRACTICE_WRONG_ANSWERS}'`);
  if (!LOG_STYLES.includes(c.logStyle)) {
    throw new ConfigError(`unknown PRACTICE_LOG_STYLE '${c.logStyle}' (known: ${LOG_STYLES.join(', ')})`);
  }
  const fault = (env.PRACTICE_FAULT ?? '').trim();
  if (fault !== '' && fault !== 'none') {
    if (!FAULTS.includes(fault)) {
      throw new ConfigError(`unknown PRACTICE_FAULT '${fault}' (known: ${FAULTS.join(', ')})`);
    }
    c.fault = fault;
    const defRank = fault === 'worker_exit' ? args.nnodes - 1 : 0;
    const r = num(env, 'PRACTICE_FAULT_RANK', defRank, { int: true });
    if (r >= args.nnodes) {
      throw new ConfigError(`PRACTICE_FAULT_RANK=${r} is out of range for --nnodes ${args.nnodes}`);
    }
    c.faultRank = r;
  }
  return c;
}

module.exports = { readConfig, ConfigError, FAULTS, MAX_LOAD_ALLOC_MIB };
