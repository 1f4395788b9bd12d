'use strict';
// lockbench adapter for redis-semaphore's Mutex (Node.js) over one ioredis client.
//
// Used as its README shows: one ioredis client per process, a new Mutex per acquisition with
//   lockTimeout    = ttl_ms              (the key's PX)
//   acquireTimeout = acquire_timeout_ms  (the only mapped setting)
// and the library's defaults otherwise (read in lib/misc.js and lib/Lock.js of 5.8.0):
// retryInterval 10 ms between SET NX PX attempts, refreshInterval round(0.8 * lockTimeout)
// for its auto-refresh (a PEXPIRE-if-ours script), unlimited attempts within acquireTimeout.
//
// lost: onLockLost fires when a refresh finds the key no longer ours (expired, or another
// holder's); a refresh that errors (timeout, connection) is not a loss to the library, it just
// tries again at the next interval.
// was_held: Mutex.release() runs a delete-if-ours script but throws its answer away, so the
// release itself cannot tell. The mutex's isAcquired can: it turns false only when a refresh
// found the lock lost (the same moment `lost` is sent), so was_held = isAcquired before the
// release — true unless the library already saw the loss.
// No fence (the value is a random UUID); renews: yes (the refresh timer).

const path = require('node:path');
const { serve, ProtocolError, log, installedVersion, requireLib } = require(path.join(__dirname, '..', 'node', 'protocol.js'));
const { connect, whenReady, classify, quitAll } = require(path.join(__dirname, '..', 'node', 'redis.js'));
const { Mutex, TimeoutError } = requireLib('redis-semaphore');

let client = null;
let opts = null;

serve({
  async init(req) {
    const addrs = (req.endpoints && req.endpoints.redis) || [];
    if (addrs.length === 0) throw new ProtocolError('connection', 'no endpoints.redis given', true);
    if (addrs.length > 1) log(`redis-semaphore's Mutex uses one server; using ${addrs[0]} of ${addrs.length}`);
    client = connect(addrs[0], req.call_timeout_ms);
    try {
      await whenReady([client], [addrs[0]], 10000);
    } catch (e) {
      client.disconnect();
      throw e;
    }
    opts = { lockTimeout: req.ttl_ms, acquireTimeout: req.acquire_timeout_ms };
    return { library: 'redis-semaphore', version: installedVersion('redis-semaphore'), fencing: false, renews: true };
  },

  async acquire(req, onLost) {
    const mutex = new Mutex(client, req.key, { ...opts, onLockLost: (err) => onLost(err.message) });
    try {
      await mutex.acquire();
    } catch (e) {
      if (e instanceof TimeoutError) {
        throw new ProtocolError('busy', `not acquired within ${opts.acquireTimeout} ms`, true);
      }
      throw e;
    }
    return {
      async release() {
        const wasHeld = mutex.isAcquired;
        await mutex.release();
        return wasHeld;
      },
    };
  },

  classify: (e) => classify(e, client),

  async shutdown() {
    if (client) await quitAll([client]);
  },
});
