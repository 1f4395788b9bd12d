'use strict';
// lockbench adapter for Redlock in Node.js, over every endpoints.redis server as an
// independent master (one ioredis client each, one Redlock instance per process):
//   node adapter.js v4   npm `redlock` 4.2.0              lock(key, ttl)    / unlock()
//   node adapter.js v5   `@sesamecare-oss/redlock` 1.4.0  acquire([key], ttl) / release()
// (the maintained fork of redlock v5). Plain acquire/release as an application calling
// lock/unlock does: v5's `using` (auto-extension) and either version's extend are not used,
// so nothing renews a held lock and `lost` is never sent (neither library reports a loss).
//
// Defaults kept (both versions, read in their sources): driftFactor 0.01, retryDelay 200 ms,
// retryJitter 100 ms. The one mapped setting is retryCount (default 10):
//   retryCount = floor(acquire_timeout_ms / retryDelay)
// so the retry waits (retryDelay +- retryJitter each) add up to about acquire_timeout_ms.
//
// was_held: both releases delete-if-ours on every master and fail when fewer than a quorum
// deleted (v4 LockError, v5 ExecutionError). v5's error holds each master's vote: a quorum
// saying "not ours" is was_held = false (expired, or another holder has it); masters that
// failed to answer instead make it an indefinite timeout / connection error. v4's error says
// neither, so it is was_held = false unless fewer than a quorum of masters are connected
// (then a `connection` error); a hung but connected majority also reads as was_held = false.
// A failed acquire is `busy` the same way: v5 when other holders alone denied the quorum,
// v4 whenever a quorum of masters is connected.
// v5's release retries like acquire (retryCount times, 200 ms apart) before failing; it is
// called with retryCount 0 so a release is one round as in v4 and answers within
// call_timeout_ms (retries cannot make a lost lock ours again).
// No fence (the value is 16 random bytes).

const path = require('node:path');
const { serve, ProtocolError, rateLimitedLog, installedVersion, requireLib } = require(path.join(__dirname, '..', 'node', 'protocol.js'));
const { connect, whenReady, classify, quitAll } = require(path.join(__dirname, '..', 'node', 'redis.js'));

const flavour = process.argv[2] || 'v4';

// The two APIs behind one shape: make(clients, settings) -> {lock(key, ttl), unlock(lock), isLockError(e)}
const flavours = {
  v4: {
    pkg: 'redlock',
    make(clients, settings) {
      const Redlock = requireLib('redlock');
      const rl = new Redlock(clients, settings);
      const logErr = rateLimitedLog('redlock clientError');
      rl.on('clientError', (e) => logErr(e.message)); // a master failing a vote
      return {
        retryDelay: rl.retryDelay,
        lock: (key, ttl) => rl.lock(key, ttl),
        unlock: (lock) => rl.unlock(lock),
        isLockError: (e) => e instanceof Redlock.LockError,
        votes: async () => null, // v4's LockError does not say why each master refused
      };
    },
  },
  v5: {
    pkg: '@sesamecare-oss/redlock',
    make(clients, settings) {
      const { Redlock, ExecutionError, ResourceLockedError } = requireLib('@sesamecare-oss/redlock');
      const rl = new Redlock(clients, settings);
      const logErr = rateLimitedLog('redlock error');
      rl.on('error', (e) => { if (!(e instanceof ResourceLockedError)) logErr(e.message); });
      return {
        retryDelay: rl.settings.retryDelay,
        lock: (key, ttl) => rl.acquire([key], ttl),
        unlock: (lock) => rl.release(lock, { retryCount: 0 }),
        isLockError: (e) => e instanceof ExecutionError,
        // v5's error carries each master's vote in its last round: how many said "held by
        // another / not ours" (ResourceLockedError), and one other error (timeout,
        // connection) with its client, if any.
        async votes(e) {
          const last = e.attempts && e.attempts[e.attempts.length - 1];
          if (!last) return null;
          const stats = await last;
          let locked = 0, other = null;
          for (const [client, err] of stats.votesAgainst) {
            if (err instanceof ResourceLockedError) locked++;
            else other = { err, client };
          }
          return { locked, other };
        },
      };
    },
  },
};

const impl = flavours[flavour];
if (!impl) {
  process.stderr.write(`usage: adapter.js v4|v5 (got ${flavour})\n`);
  process.exit(2);
}

let clients = [];
let redlock = null;
let ttl = 0;

const quorum = () => Math.floor(clients.length / 2) + 1;
const connected = () => clients.filter((c) => c.status === 'ready').length;
const fewMasters = () =>
  new ProtocolError('connection', `only ${connected()} of ${clients.length} Redis masters connected (quorum ${quorum()})`, false);

// A master's own error (v5 reports which) as the request's error: never definite, since
// the other masters' votes may have taken or kept the lock.
const failed = ({ err, client }) => {
  const c = classify(err, client);
  return new ProtocolError(c.code, `no quorum: ${err.message}`, false);
};

serve({
  async init(req) {
    const addrs = (req.endpoints && req.endpoints.redis) || [];
    if (addrs.length === 0) throw new ProtocolError('connection', 'no endpoints.redis given', true);
    clients = addrs.map((a) => connect(a, req.call_timeout_ms));
    try {
      // Redlock tolerates a minority of masters down, so a quorum is enough to start.
      await whenReady(clients, addrs, 10000, quorum());
    } catch (e) {
      clients.forEach((c) => c.disconnect());
      throw e;
    }
    const retryDelay = impl.make(clients, {}).retryDelay; // the library's default
    redlock = impl.make(clients, { retryCount: Math.floor(req.acquire_timeout_ms / retryDelay) });
    ttl = req.ttl_ms;
    return { library: impl.pkg, version: installedVersion(impl.pkg), fencing: false, renews: false };
  },

  async acquire(req) {
    let lock;
    try {
      lock = await redlock.lock(req.key, ttl);
    } catch (e) {
      if (!redlock.isLockError(e)) throw e;
      const v = await redlock.votes(e);
      // busy when other holders alone kept a quorum from us; else the masters that failed
      // (timeout, connection) decided it, and a lock may be left on some of them.
      if (v && v.other && v.locked < clients.length - quorum() + 1) throw failed(v.other);
      if (!v && connected() < quorum()) throw fewMasters();
      throw new ProtocolError('busy', `no quorum for ${req.key} within its retries: ${e.message}`, true);
    }
    return {
      async release() {
        try {
          await redlock.unlock(lock);
          return true;
        } catch (e) {
          if (!redlock.isLockError(e)) throw e;
          const v = await redlock.votes(e);
          // not held when a quorum of masters said the key is not ours; when some failed to
          // answer instead, whether it was still held is unknown.
          if (v && v.locked < quorum() && v.other) throw failed(v.other);
          if (!v && connected() < quorum()) throw fewMasters();
          return false;
        }
      },
    };
  },

  classify,

  async shutdown() {
    await quitAll(clients);
  },
});
