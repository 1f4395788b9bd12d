#!/usr/bin/env python3
"""A complete lockbench adapter in one file, standard library only: the example of writing your
own in docs/libraries.md ("Your own adapter"). Its "library" is a plain Redis lock (SET key token NX PX ttl, polling every
50 ms; release by compare-and-delete in Lua) spoken over a raw socket, so it runs anywhere
Python 3.8+ does. Replace the two methods of `RedisLock` with calls into your library.

    lockbench adapter-check --servers redis -- python3 adapters/example/adapter.py
"""
import asyncio
import itertools
import json
import sys
import time

UNLOCK = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
          "return redis.call('del', KEYS[1]) else return 0 end")


class Redis:
    """One RESP connection per call in flight would be wasteful; a small pool is enough."""

    def __init__(self, host, port):
        self.host, self.port, self.idle = host, port, []

    async def call(self, *args):
        conn = self.idle.pop() if self.idle else await asyncio.open_connection(self.host, self.port)
        reader, writer = conn
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        writer.write(out)
        await writer.drain()
        line = await reader.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"$":
            n = int(rest)
            value = None if n < 0 else (await reader.readexactly(n + 2))[:-2].decode()
        elif kind == b":":
            value = int(rest)
        elif kind == b"+":
            value = rest.decode()
        else:
            writer.close()
            raise RuntimeError(rest.decode())
        self.idle.append(conn)
        return value


class RedisLock:
    def __init__(self, redis, ttl_ms):
        self.redis, self.ttl_ms = redis, ttl_ms

    async def acquire(self, key, token, timeout_s):
        deadline = time.monotonic() + timeout_s
        while True:
            if await self.redis.call("SET", key, token, "NX", "PX", self.ttl_ms) == "OK":
                return True
            if time.monotonic() + 0.05 > deadline:
                return False
            await asyncio.sleep(0.05)

    async def release(self, key, token):
        return await self.redis.call("EVAL", UNLOCK, 1, key, token) == 1


class Adapter:
    def __init__(self):
        self.lock, self.leases, self.ids = None, {}, itertools.count(1)

    def send(self, msg):
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    async def handle(self, req):
        kind, reply = req["type"], {"in_reply_to": req["msg_id"]}
        try:
            if kind == "init":
                host, port = req["endpoints"]["redis"][0].rsplit(":", 1)
                self.lock = RedisLock(Redis(host, int(port)), req["ttl_ms"])
                self.timeout_s = req["acquire_timeout_ms"] / 1000
                reply.update(type="init_ok", protocol=1, library="example-redis-lock",
                             version="1.0", fencing=False, renews=False)
            elif kind == "acquire":
                lease = "l%d" % next(self.ids)
                if await self.lock.acquire(req["key"], lease, self.timeout_s):
                    self.leases[lease] = req["key"]
                    reply.update(type="acquire_ok", lease=lease, granted_ns=time.monotonic_ns())
                else:
                    reply.update(type="error", code="busy", text="lock held", definite=True)
            elif kind == "release":
                key = self.leases.pop(req["lease"], None)
                held = key is not None and await self.lock.release(key, req["lease"])
                reply.update(type="release_ok", was_held=held)
            elif kind == "shutdown":
                reply.update(type="shutdown_ok")
            else:
                reply.update(type="error", code="not_supported", text=kind, definite=True)
        except Exception as e:  # a failed call may still have happened on the server
            reply.update(type="error", code="crash", text=repr(e), definite=False)
        self.send(reply)
        return kind != "shutdown"

    async def main(self):
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        tasks = set()
        while line := await reader.readline():  # end of stdin: exit
            req = json.loads(line)
            if req["type"] == "shutdown":
                await asyncio.gather(*tasks)
                await self.handle(req)
                return
            task = asyncio.ensure_future(self.handle(req))  # many requests in flight
            tasks.add(task)
            task.add_done_callback(tasks.discard)


if __name__ == "__main__":
    asyncio.run(Adapter().main())
