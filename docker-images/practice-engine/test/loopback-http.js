'use strict';
const http = require('node:http');

/** One HTTP request to a loopback port, `body` sent as JSON: its status and body text (bounded: 5 s). */
function req(port, method, p, body, headers = {}) {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const q = http.request({ host: '127.0.0.1', port, method, path: p, headers: { ...(data ? { 'content-type': 'application/json' } : {}), ...headers } }, (res) => {
      let s = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (s += c));
      res.on('end', () => resolve({ status: res.statusCode, body: s }));
    });
    q.on('error', reject);
    q.setTimeout(5000, () => q.destroy(new Error('request timed out')));
    q.end(data);
  });
}

/** A chat completion asked of a loopback port: its status and body text. */
const postChat = (port, body) => req(port, 'POST', '/v1/chat/completions', body);

module.exports = { req, postChat };
