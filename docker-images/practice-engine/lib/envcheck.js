'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): the environment checks a
// real engine would trip over (NCCL interface, host IP, mounted directories).
// Returns null when fine, else { exc: "RuntimeError: ..." }.

const fs = require('node:fs');
const os = require('node:os');

function interfaceNames() {
  const names = new Set(Object.keys(os.networkInterfaces()));
  // Interfaces without addresses are not in networkInterfaces(); sysfs has them.
  try {
    for (const n of fs.readdirSync('/sys/class/net')) names.add(n);
  } catch {
    /* no sysfs */
  }
  return [...names];
}

function hostAddresses() {
  const out = new Set();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list || []) out.add(a.address.toLowerCase());
  }
  return out;
}

function checkEnvironment(env) {
  const ifname = env.NCCL_SOCKET_IFNAME;
  if (ifname !== undefined && ifname.trim() !== '') {
    const have = interfaceNames();
    const wanted = ifname
      .trim()
      .replace(/^[\^=]/, '')
      .split(',')
      .map((s) => s.trim().replace(/^[\^=]/, ''))
      .filter(Boolean);
    const missing = wanted.filter((n) => !have.includes(n));
    if (missing.length > 0) {
      const which = wanted.length > 1 ? `: ${missing.join(', ')}` : '';
      return {
        exc: `RuntimeError: NCCL_SOCKET_IFNAME=${ifname}: no such interface on this host${which} (have: ${have.join(', ')})`,
      };
    }
  }

  const hostIp = env.VLLM_HOST_IP;
  if (hostIp !== undefined && hostIp.trim() !== '') {
    if (!hostAddresses().has(hostIp.trim().toLowerCase())) {
      return { exc: `ValueError: VLLM_HOST_IP=${hostIp} is not an address of this host` };
    }
  }

  for (const name of Object.keys(env).sort()) {
    if (!/(_HOME|_DIR)$/.test(name)) continue; // covers *_CACHE_DIR too
    const value = env[name];
    if (typeof value !== 'string' || !value.startsWith('/')) continue;
    let st;
    try {
      st = fs.statSync(value);
    } catch {
      return { exc: `FileNotFoundError: [Errno 2] No such file or directory: '${value}' (${name})` };
    }
    if (!st.isDirectory()) {
      return { exc: `NotADirectoryError: [Errno 20] Not a directory: '${value}' (${name})` };
    }
  }
  return null;
}

module.exports = { checkEnvironment, interfaceNames, hostAddresses };
