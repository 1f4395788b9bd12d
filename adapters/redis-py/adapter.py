"""lockbench adapter for redis-py's asyncio Lock (redis.asyncio.lock.Lock).

How the library is used, as an application would:
- one redis.asyncio.Redis client (one connection pool) per process, on the first `redis`
  endpoint: the Lock is a single-server lock (SET NX PX to take, a Lua compare-and-delete to
  release);
- a new Lock object per acquisition: client.lock(key, timeout=ttl, blocking_timeout=acquire
  timeout). The key is used as the Redis key as it is (lockbench's keys carry its prefix).
- Mapped: ttl_ms -> the Lock's `timeout` (the key's PX); acquire_timeout_ms -> `blocking_timeout`
  (the library stops retrying SET NX once its next try would start past it, so it may give up up
  to one sleep early); call_timeout_ms -> the client's socket (connect) timeout. The retry sleep
  stays the library's default 0.1 s, and so does the client's own retry on connection errors.
- No fence (the Lock has no token that grows) and no renewal (the lock expires after ttl unless
  the application calls extend(); nothing does by itself): fencing false, renews false, and the
  library never reports a loss on its own, so this adapter sends no `lost`.
- release: was_held is false when the library raises LockNotOwnedError (the key expired or holds
  another token).
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
import lockbench_adapter as lb  # noqa: E402

try:
    import redis.asyncio
    from redis.exceptions import (ConnectionError, LockError, RedisError, ResponseError,
                                  TimeoutError)
except ImportError as e:
    print(f"redis-py adapter: {e}: Python dependencies not installed: "
          "run scripts/install-deps.sh --adapters", file=sys.stderr)
    sys.exit(3)


class RedisPy(lb.Library):
    name = "redis-py"
    dist = "redis"

    async def connect(self, cfg):
        hosts = cfg.hosts("redis")
        if len(hosts) > 1:
            lb.log.warning("redis-py's Lock is a single-server lock: using %s:%d of %d "
                           "endpoints", *hosts[0], len(hosts))
        host, port = hosts[0]
        self.client = redis.asyncio.Redis(
            host=host, port=port,
            socket_timeout=cfg.call_timeout_s, socket_connect_timeout=cfg.call_timeout_s,
            # Each command in flight holds a pooled connection; the default cap (100) could
            # refuse one when many buyers share this process (an acquire and a cut release each).
            max_connections=max(100, 2 * cfg.clients + 4))
        await self.client.ping()
        return False, False

    async def acquire(self, client, key):
        lock = self.client.lock(key, timeout=self.cfg.ttl_s,
                                blocking_timeout=self.cfg.acquire_timeout_s)
        if not await lock.acquire():
            return None
        return lb.Grant(lock)

    async def release(self, lock):
        try:
            await lock.release()
        except LockError:  # LockNotOwnedError: expired, or another token holds the key
            return False
        return True

    async def close(self):
        if hasattr(self, "client"):
            await self.client.aclose()

    def classify(self, exc):
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, TimeoutError):
            return lb.Failure("timeout", text, False)
        if isinstance(exc, ConnectionError):
            return lb.Failure("connection", text, lb.refused(exc))
        if isinstance(exc, ResponseError):
            return lb.Failure("server", text, True)
        if isinstance(exc, RedisError):
            return lb.Failure("crash", text, False)
        return super().classify(exc)


if __name__ == "__main__":
    lb.main(RedisPy)
