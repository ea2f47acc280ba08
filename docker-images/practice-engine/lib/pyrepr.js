'use strict';
// practice-engine (a stand-in for vLLM, not vLLM): Python's repr() of a JS value, for the lines
// vLLM prints with %r or a dict's str() (the "non-default args" line, argparse's errors).

/** Python-ish repr of a JS value. */
function pyRepr(v) {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isFinite(v) ? String(v) : 'nan';
  if (typeof v === 'string') {
    const q = v.includes("'") && !v.includes('"') ? '"' : "'";
    let s = v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
    if (q === "'") s = s.replace(/'/g, "\\'");
    return q + s + q;
  }
  if (Array.isArray(v)) return '[' + v.map(pyRepr).join(', ') + ']';
  if (typeof v === 'object') {
    return '{' + Object.entries(v).map(([k, x]) => `${pyRepr(k)}: ${pyRepr(x)}`).join(', ') + '}';
  }
  return String(v);
}

module.exports = { pyRepr };
