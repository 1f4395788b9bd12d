'use strict';
// lockbench adapter for advisory-lock (npm, olalonde/advisory-lock): PostgreSQL session
// advisory locks on node-postgres (pg).
//
// What advisory-lock 2.0.0 does (read in its src/index.ts): advisoryLock(connectionString)
// returns createMutex(name); the name becomes two int32 keys (the first 8 bytes of its
// SHA-256). mutex.lock() opens a NEW pg.Client on the connection string for every
// acquisition, runs `SELECT pg_advisory_lock(k1, k2)` (PostgreSQL queues the waiter: no
// polling, no retry) and resolves with unlock(), which runs `SELECT pg_advisory_unlock(k1, k2)`
// and ends that client. The lock is the session's: held as long as that connection lives, no
// lease, no renewal. lock() has no timeout of its own and waits forever; tryLock() does not
// wait at all.
//
// How it is used here, as an application would: one advisoryLock(connectionString) per
// process, one createMutex(key) per acquisition (the key as it is: lockbench's keys carry its
// prefix), mutex.lock() to wait, the unlock function it returned to release.
// Mapped, through the connection string (the only input the library takes):
// - acquire_timeout_ms -> `lock_timeout` (node-postgres sends it as a startup parameter), so
//   the server gives up the waiting pg_advisory_lock with SQLSTATE 55P03 (lock_not_available):
//   `busy`, definite (no lock was taken; the library ends that client). The connection and
//   SCRAM login before it are not bounded by it.
// - the endpoint, user and database from init; the password from the environment, PGPASSWORD,
//   which node-postgres reads itself when the connection string has none (lockbench sets it,
//   so it is never in a line).
// - ttl_ms and call_timeout_ms: not used (no lease; the library gives node-postgres no
//   connect or query timeout, and the connection string cannot set connectionTimeoutMillis).
//   lockbench's bound (acquire + call timeout) answers `timeout` past that, and protocol.js
//   releases a lock granted later.
// fencing: false (no token). renews: false (nothing expires to renew). was_held: always true:
// unlock() throws away pg_advisory_unlock's boolean, so the release cannot tell. lost: never
// sent: the library does not watch its connections. It attaches no 'error' listener to its
// pg.Client either, so a holder's connection cut by the server (restart, termination) is an
// unhandled 'error' event, which ends the Node process: this adapter then exits, as an
// application using the library would, and lockbench names the adapter.

const path = require('node:path');
const crypto = require('node:crypto');
const { serve, ProtocolError, installedVersion, requireLib } = require(path.join(__dirname, '..', 'node', 'protocol.js'));
const advisoryLock = requireLib('advisory-lock').default;

let createMutex = null;
let acquireTimeoutMs = 0;

// The connection string for `addr` ("127.0.0.1:5432" or "[::1]:5432"), without the password.
function connectionString(addr, login, lockTimeoutMs) {
  const user = encodeURIComponent(login.user);
  const db = encodeURIComponent(login.database);
  return `postgresql://${user}@${addr}/${db}?lock_timeout=${lockTimeoutMs}`;
}

// PostgreSQL SQLSTATEs and socket errors -> PROTOCOL.md codes. `definite` only where no lock
// can be held: refused before the session existed, or an answer from the server itself.
function classify(e) {
  const code = e && e.code;
  if (code === '55P03') return { code: 'busy', definite: true }; // lock_timeout
  if (code === 'ECONNREFUSED' || code === 'ENOTFOUND' || code === 'EHOSTUNREACH') {
    return { code: 'connection', definite: true };
  }
  if (code === '53300' || code === '28P01' || code === '28000' || code === '3D000') {
    // too_many_connections, invalid_password, invalid_authorization, no such database: the
    // login was refused.
    return { code: 'server', definite: true };
  }
  if (typeof code === 'string' && /^(57P0|08)/.test(code)) return { code: 'connection', definite: false };
  if (/Connection terminated|ECONNRESET|EPIPE|ETIMEDOUT/i.test((e && e.message) || '')) {
    return { code: 'connection', definite: false };
  }
  if (typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code)) return { code: 'server', definite: false };
  return { code: 'crash', definite: false };
}

serve({
  async init(req) {
    const addrs = (req.endpoints && req.endpoints.postgres) || [];
    const login = req.endpoints && req.endpoints.postgres_login;
    if (addrs.length === 0 || !login) {
      throw new ProtocolError('connection', 'init gave no endpoints.postgres (and postgres_login)', true);
    }
    acquireTimeoutMs = req.acquire_timeout_ms;
    // lock_timeout = 0 disables the timeout in PostgreSQL: an acquire timeout of 0 waits 1 ms.
    createMutex = advisoryLock(connectionString(addrs[0], login, Math.max(1, acquireTimeoutMs)));
    // The library connects per lock: reach the server once now, through the library, so a
    // wrong address or login fails init rather than the first acquire.
    const probe = createMutex(`lockbench:adapter-init:${process.pid}:${crypto.randomUUID()}`);
    const unlock = await probe.tryLock();
    if (!unlock) throw new ProtocolError('server', 'a fresh probe lock was busy', true);
    await unlock();
    return { library: 'advisory-lock', version: installedVersion('advisory-lock'), fencing: false, renews: false };
  },

  async acquire(req) {
    const mutex = createMutex(req.key);
    let unlock;
    try {
      unlock = await mutex.lock();
    } catch (e) {
      if (e && e.code === '55P03') {
        throw new ProtocolError('busy', `not acquired within ${acquireTimeoutMs} ms (lock_timeout)`, true);
      }
      throw e;
    }
    return {
      async release() {
        await unlock();
        return true; // unlock() cannot tell (see the top)
      },
    };
  },

  classify,

  async shutdown() {
    // Nothing is shared: every lock's client is ended by its unlock.
  },
});
