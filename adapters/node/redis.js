'use strict';
// ioredis clients and error codes shared by the Redis-based Node.js adapters.

const { requireLib, rateLimitedLog, ProtocolError } = require('./protocol');
const Redis = requireLib('ioredis');

// "127.0.0.1:6379" or "[::1]:6379"
function parseAddr(addr) {
  const i = addr.lastIndexOf(':');
  return { host: addr.slice(0, i).replace(/^\[(.*)\]$/, '$1'), port: Number(addr.slice(i + 1)) };
}

// One long-lived client per server, as an application keeps (no per-acquire connections).
// ioredis defaults stay (reconnect back-off, offline queue, 20 retries per request) except the
// two timeouts, which bound one network call: connectTimeout = call_timeout_ms, and
// commandTimeout = 3/4 of it, so a library call that waits out one hung server (redlock v4
// waits for every server's answer) still answers inside lockbench's bound of call_timeout_ms.
function connect(addr, callTimeoutMs) {
  const client = new Redis({
    ...parseAddr(addr),
    connectTimeout: callTimeoutMs,
    commandTimeout: Math.max(1, Math.floor(callTimeoutMs * 0.75)),
  });
  const logErr = rateLimitedLog(`redis ${addr}`);
  client.on('error', (e) => logErr(e.message)); // reconnects by itself; without a listener ioredis prints to console
  return client;
}

// Resolves once `need` of `clients` are ready (or all, when `need` is omitted), within
// `ms`; otherwise rejects with a `connection` error naming the servers still down.
function whenReady(clients, addrs, ms, need = clients.length) {
  return new Promise((resolve, reject) => {
    const ready = () => clients.filter((c) => c.status === 'ready').length;
    let timer;
    const check = () => {
      if (ready() >= clients.length) done(resolve);
    };
    const done = (f, v) => {
      clearTimeout(timer);
      clients.forEach((c) => c.off('ready', check));
      f(v);
    };
    timer = setTimeout(() => {
      if (ready() >= need) return done(resolve);
      const down = addrs.filter((_a, i) => clients[i].status !== 'ready');
      done(reject, new ProtocolError('connection', `Redis not reachable within ${ms} ms: ${down.join(', ')}`, true));
    }, ms);
    clients.forEach((c) => c.on('ready', check));
    check();
  });
}

// ioredis / Redis errors -> PROTOCOL.md error codes. Only a server's error reply is certain
// not to have taken effect; a timed-out or cut command may have run. A command that timed
// out while its client was disconnected waited in ioredis's offline queue: `connection`.
function classify(e, client) {
  const msg = (e && e.message) || '';
  if (e && e.name === 'ReplyError') return { code: 'server', definite: true };
  if (msg === 'Command timed out') {
    return { code: client && client.status !== 'ready' ? 'connection' : 'timeout', definite: false };
  }
  if ((e && e.name === 'MaxRetriesPerRequestError') ||
      /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|connect/i.test(msg)) {
    return { code: 'connection', definite: false };
  }
  return { code: 'crash', definite: false };
}

async function quitAll(clients) {
  await Promise.all(clients.map((c) => c.quit().catch(() => c.disconnect())));
}

module.exports = { Redis, connect, whenReady, classify, quitAll, parseAddr };
