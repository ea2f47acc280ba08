'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): `vllm serve --distributed-executor-backend ray`
// on the Ray head, as vLLM's RayDistributedExecutor starts (vllm/v1/executor/ray_utils.py
// initialize_ray_cluster: ray.init, then a placement group of world-size GPU bundles, waited for
// with "Waiting for creating a placement group ..." and failed with "Cannot provide a placement
// group ..."; vllm/v1/executor/ray_executor.py: env carry-over to every worker, logged by
// vllm/ray/ray_env.py). One practice node has one GPU.

const ray = require('./ray.js');
const log = require('./log.js');
const faults = require('./faults.js');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pySet = (xs) => (xs.length === 0 ? 'set()' : `{${xs.map((x) => `'${x}'`).join(', ')}}`);
const pyList = (xs) => `[${xs.map((x) => `'${x}'`).join(', ')}]`;

/** Returns null when the workers are ready, else the exception line that ends the start. */
async function startRayExecutor(proc, args, cfg) {
  const addr = ray.currentAddress();
  if (!addr) return 'ConnectionError: Could not find any running Ray instance. Please specify the one to connect to by setting `--address` flag or `RAY_ADDRESS` environment variable.';
  log.out(`${new Date().toISOString().replace('T', ' ').slice(0, 23)}\tINFO worker.py:1951 -- Connecting to existing Ray cluster at address: ${addr.host}:${addr.port}...`);
  const world = args.tensorParallelSize * args.pipelineParallelSize;
  const specs = `[${Array.from({ length: world }, () => "{'GPU': 1.0}").join(', ')}]`;
  log.info(proc, 'ray_utils.py:339', 'No current placement group found. Creating a new placement group.');
  const started = Date.now();
  let nextNote = 10;
  for (;;) {
    const alive = (await ray.rayNodes(addr)).filter((n) => n.Alive).length;
    if (alive >= world) break;
    const waited = (Date.now() - started) / 1000;
    if (waited >= cfg.rendezvousTimeoutS) {
      return `ValueError: Cannot provide a placement group of placement_group_specs=${specs} within ${Math.round(waited)} seconds. See \`ray status\` and \`ray list nodes\` to make sure the cluster has enough resources.`;
    }
    if (waited >= nextNote) {
      nextNote *= 2;
      log.info(proc, 'ray_utils.py:207', `Waiting for creating a placement group of specs for ${Math.round(waited)} seconds. specs=${specs}. Check \`ray status\` and \`ray list nodes\` to see if you have enough resources, and make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are running on a multi-node.`);
    }
    await sleep(500);
  }
  const { file, excluded, copied, warning } = ray.carryOver(process.env);
  if (warning) log.warn(proc, 'ray_env.py:27', warning);
  log.info(proc, 'ray_env.py:160', `RAY_NON_CARRY_OVER_ENV_VARS from config: ${pySet(excluded)}`);
  log.info(proc, 'ray_env.py:166', `Copying the following environment variables to workers: ${pyList(Object.keys(copied))}`);
  log.info(proc, 'ray_env.py:171', `If certain env vars should NOT be copied, add them to ${file} file`);
  const done = await ray.ask(addr, { type: 'env', env: copied }, 30_000);
  const failed = (done.results || []).find((r) => r.error);
  if (failed) {
    // A worker's exception reaches the driver's log through Ray, prefixed with the actor and its node.
    log.error(`RayWorkerWrapper pid=${log.PID + 1}, ip=${failed.ip}`, 'worker_base.py:620', `Error executing method 'init_device'. This might cause deadlock in distributed execution.`);
    faults.startupError(failed.error, 'vllm/v1/worker/worker_base.py');
    return `RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}`;
  }
  log.info(proc, 'ray_executor.py:180', `workers ready on ${(done.results || []).length + 1} Ray nodes`);
  watchNodes(proc, addr);
  return null;
}

/**
 * From here on, a Ray node that dies (its `ray start` left the GCS) takes a worker with it: the
 * head's engine core fails with Ray's ActorDiedError naming that node's ip (faults.rayNodeDied).
 * Asked of the GCS every WATCH_MS; the timer never keeps the process up.
 */
const WATCH_MS = 250;
function watchNodes(proc, addr) {
  let asking = false;
  const timer = setInterval(async () => {
    if (asking || log.isExiting()) return;
    asking = true;
    try {
      const nodes = await ray.rayNodes(addr);
      const dead = nodes.findIndex((n) => !n.Alive);
      if (dead < 0) return;
      clearInterval(timer);
      faults.rayNodeDied(proc, nodes[dead].NodeManagerAddress, dead);
      log.exit(1);
    } catch {
      // The GCS lives in this container: an answer missed now is asked again.
    } finally {
      asking = false;
    }
  }, WATCH_MS);
  timer.unref();
  log.onExit(() => clearInterval(timer));
}

module.exports = { startRayExecutor };
