'use strict';
const net = require('node:net');

/** A loopback port nothing listens on now, for a practice engine a test starts. */
function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

module.exports = { freePort };
