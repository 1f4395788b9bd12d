'use strict';
// The lockbench adapter protocol, version 1 (adapters/PROTOCOL.md), for Node.js adapters.
// JSON lines on stdin/stdout, many requests in flight at once, logs on stderr only.
//
// An adapter supplies:
//   init(req)             -> {library, version, fencing, renews}   (connect first)
//   acquire(req, onLost)  -> {release(): Promise<boolean was_held>, fence?}
//                            throw ProtocolError('busy', ...) when not acquired in time;
//                            call onLost(reason) when the library reports the lock gone
//   shutdown()            -> close the connections
//   classify(err)         -> {code, definite} for a library / client error (optional)

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');

const PROTOCOL = 1;

// CLOCK_MONOTONIC ns, as a BigInt (a Number loses precision after ~104 days of uptime).
const nowNs = () => process.hrtime.bigint();

class ProtocolError extends Error {
  constructor(code, text, definite) {
    super(text);
    this.code = code;
    this.definite = definite;
  }
}

function log(...args) {
  process.stderr.write(`${new Date().toISOString()} ${args.join(' ')}\n`);
}

// Logs at most `perSec` lines a second for one topic, then a count of the ones dropped, so a
// dead server's reconnect storm does not drown stderr.
function rateLimitedLog(topic, perSec = 5) {
  let windowStart = 0, shown = 0, dropped = 0;
  return (...args) => {
    const t = Date.now();
    if (t - windowStart >= 1000) {
      if (dropped) log(`${topic}: ${dropped} similar lines dropped`);
      windowStart = t; shown = 0; dropped = 0;
    }
    if (shown++ < perSec) log(`${topic}:`, ...args);
    else dropped++;
  };
}

// The version of an installed package, read from its package.json (never hard-coded).
function installedVersion(name) {
  const file = path.join(__dirname, 'node_modules', ...name.split('/'), 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf8')).version;
}

// require() from adapters/node/node_modules, whichever adapter folder the caller lives in;
// a missing install exits 3 with the line the run scripts print too.
function requireLib(name) {
  try {
    return require(require.resolve(name, { paths: [__dirname] }));
  } catch (e) {
    if (e.code !== 'MODULE_NOT_FOUND') throw e;
    process.stderr.write(`Node.js package ${name} not installed: run scripts/install-deps.sh --adapters\n`);
    process.exit(3);
  }
}

// Writes one JSON object as a line. BigInt values (the *_ns times) are written as exact
// integers. Pipes are written synchronously by Node on Linux, so nothing is lost on exit.
function send(obj) {
  const line = JSON.stringify(obj, (_k, v) => (typeof v === 'bigint' ? `\u0000${v}\u0000` : v))
    .replace(/"\\u0000(\d+)\\u0000"/g, '$1');
  process.stdout.write(line + '\n');
}

function serve(adapter) {
  const leases = new Map(); // lease id -> {release}
  let nextLease = 0;
  let cfg = null; // the init request
  let closing = false;

  // Pending library errors nobody awaits (a failed background refresh, a late release) are
  // logged: an application's unhandled rejection must not take the process down mid-run.
  process.on('unhandledRejection', (e) => log('unhandled rejection:', e && e.stack ? e.stack : e));
  // lockbench gone (stdout closed): nobody to answer, leave quietly.
  process.stdout.on('error', (e) => {
    log('stdout:', e.message);
    process.exit(e.code === 'EPIPE' ? 0 : 1);
  });

  const errorOf = (e) => {
    if (e instanceof ProtocolError) return e;
    const c = (adapter.classify && adapter.classify(e)) || { code: 'crash', definite: false };
    return new ProtocolError(c.code, `${e && e.name ? e.name + ': ' : ''}${e && e.message ? e.message : e}`, c.definite);
  };
  const replyError = (req, e) => {
    const pe = errorOf(e);
    send({ type: 'error', in_reply_to: req.msg_id, code: pe.code, text: pe.message, definite: pe.definite });
  };

  // A request the library has not finished when lockbench's bound for it is nearly up is
  // answered `timeout` (indefinite) so the run goes on; the call keeps running, and a lock it
  // still obtains is released at once, since nobody will ever release it otherwise.
  const withDeadline = (ms, work, onLate) =>
    new Promise((resolve, reject) => {
      let late = false;
      const timer = setTimeout(() => {
        late = true;
        reject(new ProtocolError('timeout', `the library did not answer within ${ms} ms`, false));
      }, ms);
      work.then(
        (v) => { clearTimeout(timer); if (late) onLate(v); else resolve(v); },
        (e) => { clearTimeout(timer); if (!late) reject(e); },
      );
    });

  const handlers = {
    async init(req) {
      if (req.protocol !== PROTOCOL) log(`lockbench speaks protocol ${req.protocol}, this adapter ${PROTOCOL}`);
      for (const f of ['ttl_ms', 'acquire_timeout_ms', 'call_timeout_ms']) {
        if (!Number.isInteger(req[f]) || req[f] < 0) throw new ProtocolError('crash', `init needs ${f} (ms), got ${req[f]}`, true);
      }
      const info = await adapter.init(req);
      cfg = req;
      send({ type: 'init_ok', in_reply_to: req.msg_id, protocol: PROTOCOL, ...info });
    },

    async acquire(req) {
      if (!cfg) throw new ProtocolError('crash', 'acquire before init', true);
      const id = `l-${++nextLease}`;
      const state = { acked: false, done: false, lostQueued: null };
      const sendLost = (reason) => send({ type: 'lost', lease: id, reason: String(reason), at_ns: nowNs() });
      const onLost = (reason) => {
        if (state.done) return; // released already: nothing to tell
        if (state.acked) sendLost(reason);
        else state.lostQueued = reason; // told before acquire_ok went out: send it right after
      };
      const bound = cfg.acquire_timeout_ms + Math.floor(cfg.call_timeout_ms * 0.9);
      const held = await withDeadline(bound, adapter.acquire(req, onLost), (h) => {
        log(`lease for ${req.key} granted after its ${bound} ms bound; releasing it`);
        state.done = true;
        h.release().catch((e) => log('release of a late lease failed:', e.message));
      });
      const grantedNs = nowNs();
      leases.set(id, { held, state });
      const reply = { type: 'acquire_ok', in_reply_to: req.msg_id, lease: id, granted_ns: grantedNs };
      if (held.fence !== undefined) reply.fence = held.fence;
      send(reply);
      state.acked = true;
      if (state.lostQueued !== null) sendLost(state.lostQueued);
    },

    async release(req) {
      const lease = leases.get(req.lease);
      if (!lease) {
        // Released already (or never ours): lockbench may repeat a release it cut.
        send({ type: 'release_ok', in_reply_to: req.msg_id, was_held: false });
        return;
      }
      leases.delete(req.lease);
      lease.state.done = true;
      const bound = Math.floor(cfg.call_timeout_ms * 0.9);
      const wasHeld = await withDeadline(bound, lease.held.release(), () => {});
      send({ type: 'release_ok', in_reply_to: req.msg_id, was_held: !!wasHeld });
    },

    async shutdown(req) {
      await finish();
      send({ type: 'shutdown_ok', in_reply_to: req.msg_id });
      process.exit(0);
    },
  };

  // Closes the library's connections, bounded so exit stays prompt (PROTOCOL: within 5 s).
  async function finish() {
    if (closing) return;
    closing = true;
    rl.close();
    const bound = new Promise((r) => setTimeout(r, 2000).unref());
    await Promise.race([Promise.resolve(adapter.shutdown && adapter.shutdown()).catch((e) => log('shutdown:', e.message)), bound]);
  }

  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  rl.on('line', (line) => {
    if (closing || !line.trim()) return;
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      log('not JSON, ignored:', line.slice(0, 200));
      return;
    }
    if (req === null || typeof req !== 'object') return log('not a JSON object, ignored:', line.slice(0, 200));
    const h = Object.prototype.hasOwnProperty.call(handlers, req.type) ? handlers[req.type] : null;
    if (!h) {
      send({ type: 'error', in_reply_to: req.msg_id, code: 'not_supported', text: `unknown request type ${req.type}`, definite: true });
      return;
    }
    // Each request runs on its own; replies go out in completion order.
    h(req).catch((e) => {
      if (closing) return;
      replyError(req, e);
    });
  });
  // stdin EOF: lockbench is gone or done; close and exit whether or not shutdown came.
  rl.on('close', () => {
    if (closing) return;
    finish().then(() => process.exit(0));
  });
}

module.exports = { serve, ProtocolError, nowNs, log, rateLimitedLog, installedVersion, requireLib };
