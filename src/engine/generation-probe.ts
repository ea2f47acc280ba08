import { PROBE_ANSWER_BYTES, PROBE_PATH, PROBE_RETRY_MS, probeBody } from "../contract/generation.js";

/*
 * The generation probe as a program an engine's own image runs (an exported leader's liveness,
 * src/export/lws.ts): the daemon's probe (src/supervise/generation-watch.ts) said again in the
 * image's own tools. The same request (src/contract/generation.ts), the same rule: a 200 that
 * completed a token passes; a 4xx passes, as the daemon calls it "refused" and learns nothing of
 * the engine's generation from it (its API answers); every other answer, or none, fails, and is
 * tried again every PROBE_RETRY_MS until the bound is spent, so that one dropped connection is no
 * failure. The answer is read up to PROBE_ANSWER_BYTES. The engine's key is read from the
 * container's env inside the program and sent as the daemon sends it (src/contract/engine-auth.ts):
 * it is never a word of the command, so neither the YAML nor a process listing shows it.
 *
 * The daemon probes only a quiet engine: tokens through the gateway, or its token counter going
 * up, are generation (src/supervise/generation.ts). The programs keep the counter they read in a
 * file of the container (STATE_FILE and the port), so that a run that finds it risen since the
 * last passes without a probe: a busy engine, whose probe could wait its turn past the bound, is
 * not restarted for it. After a probe's token the counter is read again, so that the probe's own
 * token is never taken for traffic. A container restarted has a new file system, and starts anew.
 */

/** Where a program keeps the counter it last read (with the port after it): the container's own /tmp. */
export const STATE_FILE = "/tmp/launcher-generation-probe-";

/** The most of the metrics page read: vLLM's, with its histograms, is some hundred KiB. */
const METRICS_BYTES = 4 * 1024 * 1024;

/** Where the probe finds the engine, and how long it may take. */
export interface GenerationProbeTarget {
  /** The env variable holding the address the engine's API listens on, as its container sees it. */
  readonly hostEnv: string;
  readonly port: number;
  /** The env variable holding the engine's API key, when it demands one. */
  readonly keyEnv?: string;
  /** The name the engine serves the model under: the request's `model`. */
  readonly servedModel: string;
  /** By then the program has exited non-zero, whatever it waits for. */
  readonly boundSeconds: number;
  /**
   * The engine's generated-token counter on its metrics path (the names EngineMetricNames gives,
   * the first one present counted): a rise since the program's last run is generation, as the
   * daemon counts it, and no probe is sent. Absent: every run sends one.
   */
  readonly counter?: { readonly path: string; readonly names: readonly string[] };
}

/** An exec command (argv) for a target: exit 0 when the engine generated, non-zero when it did not within the bound. */
export type GenerationProbe = (target: GenerationProbeTarget) => readonly string[];

/** What each program prints first: kubelet shows a failed probe's output in the pod's events. */
const SAYS = "launcher generation probe: ";

/** An env name a program may write as it is (the names come from the adapters and the export, never from a recipe). */
function envName(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`generation probe: ${JSON.stringify(name)} is no env name`);
  return name;
}

/**
 * Python 3's standard library only (vLLM's and SGLang's images run python3). A SIGALRM ends the
 * whole program at the bound, since urllib's timeout bounds each socket operation, not the
 * answer (docs.python.org urllib.request.urlopen "timeout"; signal.setitimer ITIMER_REAL); once a
 * token came, the alarm is off, so that the counter's read after it cannot turn the pass into a
 * failure, and that read's socket timeout is what is left of the bound. No
 * proxy (a recipe's HTTP_PROXY is for the model hub, never for the engine) and no redirect
 * followed, as the daemon's fetch (redirect: "error"). The token rule is generatedToken's
 * (src/supervise/generation-watch.ts): usage.completion_tokens, else a non-empty choice's text;
 * the counter's sum is sumGauge's (src/engine/metrics-text.ts). The key goes on both requests, as
 * the daemon sends it everywhere alike.
 */
const PYTHON = String.raw`import json, os, re, signal, sys, time, urllib.error, urllib.request
env, port, key_env, body, bound, limit, pause, path, mpath, names, state, mlimit = sys.argv[1:13]
bound, limit, pause, mlimit = float(bound), int(limit), float(pause), int(mlimit)
def done(code, why):
    print('${SAYS}' + why, flush=True)
    os._exit(code)
signal.signal(signal.SIGALRM, lambda *_: done(1, 'no token within %g s' % bound))
signal.setitimer(signal.ITIMER_REAL, bound)
host = os.environ.get(env) or '127.0.0.1'
base = 'http://%s:%s' % ('[' + host + ']' if ':' in host else host, port)
headers = {'content-type': 'application/json'}
key = os.environ.get(key_env, '') if key_env else ''
if key:
    headers['authorization'] = 'Bearer ' + key
class Stay(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *a):
        return None
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), Stay)
def token(raw):
    try:
        a = json.loads(raw)
    except ValueError:
        return False
    if not isinstance(a, dict):
        return False
    n = a['usage'].get('completion_tokens') if isinstance(a.get('usage'), dict) else None
    if isinstance(n, (int, float)) and not isinstance(n, bool):
        return n >= 1
    c = a.get('choices')
    t = c[0].get('text') if isinstance(c, list) and c and isinstance(c[0], dict) else None
    return isinstance(t, str) and t != ''
end = time.monotonic() + bound
def counted():
    if not mpath:
        return None
    try:
        with opener.open(urllib.request.Request(base + mpath, headers=headers), timeout=max(end - time.monotonic(), 0.01)) as r:
            lines = [l.strip() for l in r.read(mlimit).decode('utf-8', 'replace').splitlines()]
    except Exception:
        return None
    for name in names.split(','):
        found = [re.fullmatch(r'(?:\{[^}]*\})? ([\d.eE+-]+)', l[len(name):]) for l in lines if l.startswith(name)]
        found = [float(m.group(1)) for m in found if m]
        if found:
            return sum(found)
    return None
def keep(n):
    try:
        if n is not None:
            with open(state + port, 'w') as f:
                f.write(repr(n))
    except OSError:
        pass
try:
    with open(state + port) as f:
        before = float(f.read())
except (OSError, ValueError):
    before = None
seen = counted()
keep(seen)
if seen is not None and before is not None and seen > before:
    done(0, 'the engine generated %g tokens since the last run: no probe' % (seen - before))
why = 'no answer'
while True:
    status, raw = 0, b''
    try:
        with opener.open(urllib.request.Request(base + path, body.encode(), headers), timeout=max(end - time.monotonic(), 0.01)) as r:
            status, raw = r.status, r.read(limit + 1)
    except urllib.error.HTTPError as e:
        status = e.code
    except Exception as e:
        why = 'no answer: %s' % e
    if 400 <= status < 500:
        done(0, 'refused (HTTP %d): its API answers, its generation is not known' % status)
    if status == 200 and len(raw) > limit:
        why = 'its answer passed %d bytes' % limit
    elif status == 200 and token(raw):
        signal.setitimer(signal.ITIMER_REAL, 0)
        keep(counted())
        done(0, 'one token')
    elif status == 200:
        why = 'answered with no token'
    elif status:
        why = 'answered HTTP %d' % status
    if time.monotonic() + pause >= end:
        done(1, '%s (tried for %g s)' % (why, bound))
    time.sleep(pause)
`;

/** vLLM's and SGLang's: `python3 -c PROGRAM` with the target's values as its arguments. */
export const pythonGenerationProbe: GenerationProbe = (t) => [
  "python3",
  "-c",
  PYTHON,
  envName(t.hostEnv),
  String(t.port),
  t.keyEnv === undefined ? "" : envName(t.keyEnv),
  probeBody(t.servedModel),
  String(t.boundSeconds),
  String(PROBE_ANSWER_BYTES),
  String(PROBE_RETRY_MS / 1000),
  PROBE_PATH,
  t.counter?.path ?? "",
  (t.counter?.names ?? []).join(","),
  STATE_FILE,
  String(METRICS_BYTES),
];

/**
 * POSIX sh, curl and coreutils (llama.cpp's image, docker-images/llamacpp-spark/Dockerfile, has
 * curl and no python3). The key goes to curl as a header read from stdin (`-H @-`: headers from a
 * file, `-` for stdin, since curl 7.55.0, curl/curl #1486), printed there by sh's own printf from
 * "$VAR", so no argv holds it. Each attempt's --max-time is what is left of the bound, counted in
 * date's whole seconds. The first attempt, and the counter's read after a token, get at least
 * 1 s: a second can turn between the bound's start and its first reading, and curl reads
 * --max-time 0 as no limit (libcurl's CURLOPT_TIMEOUT: 0 "never times out"). So the program ends
 * within about 2 s past its bound. `head -c` bounds the answer, since --max-filesize stops an
 * answer of no announced length only from curl 8.4.0 on (curl docs/cmdline-opts/max-filesize.md);
 * the marker after curl's own words says the answer was read whole. The token rule is generatedToken's as
 * far as sh's patterns say it: a "completion_tokens" of 1 or more, else a non-empty "text"
 * (llama-server writes its JSON compact, nlohmann::json dump() with no indent:
 * tools/server/server.cpp). The counter is summed by awk (mawk is in every Ubuntu base image).
 */
function curlProgram(hostEnv: string, keyEnv: string | undefined): string {
  const key = keyEnv === undefined ? ":" : `[ -z "\${${keyEnv}:-}" ] || printf 'authorization: Bearer %s\\n' "\$${keyEnv}"`;
  return `LC_ALL=C
body=$1 bound=$2 limit=$3 pause=$4 path=$5 port=$6 mpath=$7 names=$8 state=$9$6 mlimit=\${10}
host=\${${hostEnv}:-127.0.0.1}
case $host in *:*) host="[$host]" ;; esac
key() { ${key}; }
token() {
  case $1 in
    *'"completion_tokens":'*|*'"completion_tokens": '*)
      case $1 in *'"completion_tokens":'[1-9]*|*'"completion_tokens": '[1-9]*) return 0 ;; esac
      return 1 ;;
  esac
  case $1 in *'"text":"'[!\\"]*|*'"text": "'[!\\"]*) return 0 ;; esac
  return 1
}
end=$(( $(date +%s) + bound )) left=$bound
counted() {
  [ -n "$mpath" ] || return 0
  key | curl -sS --noproxy '*' --max-time "$left" -H @- "http://$host:$port$mpath" 2>/dev/null | head -c "$mlimit" | awk -v names="$names" '
    BEGIN { n = split(names, want, ",") }
    { sub(/^[ \\t]+/, ""); sub(/[ \\t\\r]+$/, "")
      for (i = 1; i <= n; i++) if (index($0, want[i]) == 1) {
        rest = substr($0, length(want[i]) + 1)
        if (rest ~ /^([{][^}]*[}])? [0-9.eE+-]+$/) { sub(/^.* /, "", rest); sum[i] += rest; got[i] = 1 }
      } }
    END { for (i = 1; i <= n; i++) if (got[i]) { printf "%.17g\\n", sum[i]; exit } }'
}
keep() { [ -z "$1" ] || { printf '%s\\n' "$1" > "$state"; } 2>/dev/null; }
before=$(cat "$state" 2>/dev/null)
case $before in ''|*[!0-9.eE+-]*) before= ;; esac
seen=$(counted)
keep "$seen"
if [ -n "$seen" ] && [ -n "$before" ] && awk -v a="$seen" -v b="$before" 'BEGIN { exit !(a + 0 > b + 0) }'; then
  echo "${SAYS}the engine generated tokens since the last run: no probe"; exit 0
fi
left=$(( end - $(date +%s) ))
[ "$left" -gt 0 ] || left=1
while :; do
  out=$( { key | curl -sS --noproxy '*' --max-time "$left" -H @- -H 'content-type: application/json' --data-raw "$body" -w ' %{http_code}' "http://$host:$port$path" 2>/dev/null; echo " launcher-rc=$?"; } | head -c $(( limit + 32 )) )
  case $out in
    *" launcher-rc="*) rc=\${out##*" launcher-rc="}; out=\${out%" launcher-rc="*}; code=\${out##* }; answer=\${out% *} ;;
    *) rc=long ;;
  esac
  if [ "$rc" = long ] || [ "\${#answer}" -gt "$limit" ]; then why="its answer passed $limit bytes"
  elif [ "$rc" != 0 ]; then why="no answer (curl exit $rc)"
  else
    case $code in
      4??) echo "${SAYS}refused (HTTP $code): its API answers, its generation is not known"; exit 0 ;;
      200) if token "$answer"; then left=$(( end - $(date +%s) )); [ "$left" -gt 0 ] || left=1; keep "$(counted)"; echo "${SAYS}one token"; exit 0; fi; why="answered with no token" ;;
      *) why="answered HTTP $code" ;;
    esac
  fi
  [ $(( end - $(date +%s) )) -gt "$pause" ] || break
  sleep "$pause"
  left=$(( end - $(date +%s) ))
  [ "$left" -gt 0 ] || break
done
echo "${SAYS}$why (tried for $bound s)"
exit 1`;
}

/** llama.cpp's: `sh -c PROGRAM` with the target's values (never the key) as its arguments. */
export const curlGenerationProbe: GenerationProbe = (t) => [
  "sh",
  "-c",
  curlProgram(envName(t.hostEnv), t.keyEnv === undefined ? undefined : envName(t.keyEnv)),
  "launcher-generation-probe",
  probeBody(t.servedModel),
  String(t.boundSeconds),
  String(PROBE_ANSWER_BYTES),
  String(Math.ceil(PROBE_RETRY_MS / 1000)),
  PROBE_PATH,
  String(t.port),
  t.counter?.path ?? "",
  (t.counter?.names ?? []).join(","),
  STATE_FILE,
  String(METRICS_BYTES),
];
