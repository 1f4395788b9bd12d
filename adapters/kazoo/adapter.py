"""lockbench adapter for kazoo's Lock recipe (kazoo.recipe.lock.Lock, ZooKeeper).

How the library is used, as an application would:
- one KazooClient (one ZooKeeper session) per process, on the whole ensemble; a new
  client.Lock(path, identifier) per acquisition at /<prefix>/locks/<key>, where <prefix> is the
  key's part before its first ':' (lockbench's run prefix, so the locks sit in the run's ZooKeeper
  subtree: /lockbench/locks/lockbench:lock:0);
- kazoo is threaded and its calls block, so each acquire / release runs in a thread of a pool
  sized for every buyer of this process to wait at once.
- Mapped: ttl_ms -> the client's `timeout`, the ZooKeeper session timeout (the servers clamp it to
  their min / max session timeouts); acquire_timeout_ms -> acquire(blocking=True, timeout=...).
  kazoo applies that timeout to each wait for the predecessor node, starting again when the
  predecessor changes, so one acquire can wait longer; at the deadline this adapter calls the
  recipe's own cancel(), which makes acquire give up and delete its node. The retry delays, the
  command retry policy and the connection handling stay kazoo's defaults (call_timeout_ms has no
  counterpart: kazoo's calls wait for a reconnect; lockbench's bound answers `timeout` meanwhile).
- fence: the sequence number of the lock's own ephemeral sequential node (Lock.node ends with
  10 digits). ZooKeeper numbers a parent's children in creation order and contenders are granted
  in that order, so every new holder's number is larger.
- renews: true (the session is kept alive by kazoo's heartbeats, not per lock).
- lost: kazoo tells the application through its connection state listener. On LOST (the session
  expired or was closed: its ephemeral nodes, hence its locks, are gone) every lease held is
  reported `lost`. SUSPENDED (connection dropped, the session may still live) is only logged:
  kazoo's docs say not to assume locks are valid while suspended, but the lock is not gone and is
  still held if the client reconnects within the session timeout; `lost` reports a loss the
  library confirmed. Should the session expire meanwhile, LOST follows on reconnection.
- release: kazoo's release deletes its node and ignores "no node", so it cannot tell whether the
  lock was still held; was_held is false only when a LOST came between grant and release.
- A failed acquire is `busy` only while the client is connected (kazoo saw the lock held by
  others); otherwise `connection`, indefinite (its node may have been created and left behind).
"""

import asyncio
import concurrent.futures
import os
import pathlib
import sys
import threading

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
import lockbench_adapter as lb  # noqa: E402

try:
    from kazoo.client import KazooClient, KazooState
    from kazoo.exceptions import (CancelledError, ConnectionLoss, KazooException, LockTimeout,
                                  OperationTimeoutError, RequestTimeoutError, SessionExpiredError,
                                  ZookeeperError)
    from kazoo.handlers.threading import KazooTimeoutError
except ImportError as e:
    print(f"kazoo adapter: {e}: Python dependencies not installed: "
          "run scripts/install-deps.sh --adapters", file=sys.stderr)
    sys.exit(3)


class Attempt:
    """One acquisition in a pool thread; if its asker has gone (lockbench's bound passed) by the
    time the lock is taken, the thread releases it at once."""

    def __init__(self, adapter, lock):
        self.adapter, self.lock = adapter, lock
        self.guard = threading.Lock()
        self.abandoned = False
        self.result = None  # (got, granted_ns, session epoch at grant)

    def run(self, timeout):
        try:
            got = self.lock.acquire(blocking=True, timeout=timeout)
        except (LockTimeout, CancelledError):
            got = False
        result = (got, lb.now_ns(), self.adapter.epoch)
        with self.guard:
            self.result = result
            orphan = got and self.abandoned
        if orphan:
            release_quietly(self.lock)
        return result

    def abandon(self):
        with self.guard:
            self.abandoned = True
            orphan = self.result is not None and self.result[0]
        if orphan:
            self.adapter.pool.submit(release_quietly, self.lock)


def release_quietly(lock):
    try:
        lock.release()
    except Exception as e:
        lb.log.warning("releasing an abandoned lock on %s: %r", lock.path, e)


class Handle:
    __slots__ = ("lock", "epoch")

    def __init__(self, lock, epoch):
        self.lock, self.epoch = lock, epoch


class Kazoo(lb.Library):
    name = "kazoo"
    dist = "kazoo"

    async def connect(self, cfg):
        self.loop = asyncio.get_running_loop()
        self.epoch = 0  # LOST events so far; written by kazoo's thread, read anywhere
        self.epoch_lock = threading.Lock()
        hosts = ",".join(f"{h}:{p}" for h, p in cfg.hosts("zookeeper"))
        self.zk = KazooClient(hosts=hosts, timeout=cfg.ttl_s)
        self.zk.add_listener(self.on_state)
        # An acquire and a (cut) release per buyer, plus threads still stuck in a call whose
        # answer lockbench stopped waiting for.
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=4 * cfg.clients + 8, thread_name_prefix="kazoo-call")
        try:
            await self.loop.run_in_executor(self.pool, self.zk.start)  # kazoo's default 15 s
        except KazooTimeoutError:
            raise lb.Failure("connection", f"no ZooKeeper session with {hosts} within 15 s", True)
        self.identifier = f"lockbench-adapter:{os.getpid()}"
        return True, True

    def on_state(self, state):
        """kazoo's connection thread: must not block."""
        if self.runtime.closing:
            return  # stop() ends the session too
        if state == KazooState.LOST:
            with self.epoch_lock:
                self.epoch += 1
            at = lb.now_ns()
            lb.log.warning("ZooKeeper session lost")
            self.loop.call_soon_threadsafe(self.runtime.lose_all, "session lost (kazoo LOST)", at)
        elif state == KazooState.SUSPENDED:
            lb.log.warning("ZooKeeper connection suspended (session may still live)")
        else:
            lb.log.info("ZooKeeper connection %s", state)

    def path(self, key):
        prefix = key.split(":", 1)[0] if ":" in key else "lockbench"
        return f"/{prefix}/locks/{key}"

    async def acquire(self, client, key):
        lock = self.zk.Lock(self.path(key), f"{self.identifier}:{client}")
        attempt = Attempt(self, lock)
        timeout = self.cfg.acquire_timeout_s
        fut = self.loop.run_in_executor(self.pool, attempt.run, timeout)
        try:
            done, _ = await asyncio.wait({fut}, timeout=timeout)
            if not done:
                lock.cancel()  # kazoo's timeout restarts per wait: stop it at the deadline
            got, granted_ns, epoch = await asyncio.shield(fut)
        except asyncio.CancelledError:
            attempt.abandon()
            lock.cancel()
            raise
        if not got:
            if self.zk.state != KazooState.CONNECTED:
                raise lb.Failure("connection", f"not acquired; ZooKeeper {self.zk.state}", False)
            return None
        lost = "session lost (kazoo LOST)" if epoch != self.epoch else None
        fence = int(lock.node[-10:])
        return lb.Grant(Handle(lock, epoch), fence=fence, granted_ns=granted_ns, lost=lost)

    async def release(self, handle):
        held = await self.loop.run_in_executor(self.pool, handle.lock.release)
        return bool(held) and handle.epoch == self.epoch

    async def close(self):
        if hasattr(self, "zk"):
            await asyncio.get_running_loop().run_in_executor(None, self.zk.stop)
            self.zk.close()

    def classify(self, exc):
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (OperationTimeoutError, RequestTimeoutError, KazooTimeoutError)):
            return lb.Failure("timeout", text, False)
        if isinstance(exc, (ConnectionLoss, SessionExpiredError)):
            return lb.Failure("connection", text, False)
        if isinstance(exc, ZookeeperError):
            return lb.Failure("server", text, False)
        if isinstance(exc, KazooException):
            return lb.Failure("crash", text, False)
        return super().classify(exc)


if __name__ == "__main__":
    lb.main(Kazoo)
