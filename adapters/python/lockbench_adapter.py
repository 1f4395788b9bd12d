"""The lockbench adapter protocol, version 1 (adapters/PROTOCOL.md), shared by the Python adapters.

An adapter subclasses `Library` (connect / acquire / release / close through its real lock
library) and calls `main(MyLibrary)`. This module owns everything else: reading JSON lines from
stdin on an asyncio loop, one task per request so that many acquires wait at once, the lease
table, the reply / error / `lost` lines on stdout, the time bounds lockbench holds each request
to, and exiting on `shutdown` or stdin EOF.
"""

import asyncio
import importlib.metadata
import json
import logging
import os
import signal
import sys
import threading
import time

PROTOCOL = 1

log = logging.getLogger("lockbench.adapter")


def now_ns():
    """CLOCK_MONOTONIC in ns: the clock lockbench places every time on."""
    return time.monotonic_ns()


class Failure(Exception):
    """A request that failed, answered as an `error` line (codes as in PROTOCOL.md)."""

    def __init__(self, code, text, definite):
        super().__init__(text)
        self.code, self.text, self.definite = code, text, definite


def refused(exc):
    """Whether `exc` (or what caused it) is a refused connection: nothing reached the server."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ConnectionRefusedError):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class Config:
    """The `init` request's settings, in the units the libraries take (seconds)."""

    def __init__(self, msg):
        self.endpoints = {k: list(v or []) for k, v in (msg.get("endpoints") or {}).items()}
        self.ttl_ms = int(msg.get("ttl_ms", 2000))
        self.acquire_timeout_ms = int(msg.get("acquire_timeout_ms", 1000))
        self.call_timeout_ms = int(msg.get("call_timeout_ms", 500))
        self.clients = max(1, int(msg.get("clients", 1)))
        self.ttl_s = self.ttl_ms / 1000
        self.acquire_timeout_s = self.acquire_timeout_ms / 1000
        self.call_timeout_s = self.call_timeout_ms / 1000

    def hosts(self, service):
        """`service`'s endpoints as (host, port) pairs; a `connection` failure if there are none."""
        eps = self.endpoints.get(service) or []
        if not eps:
            raise Failure("connection", f"init gave no {service} endpoints", True)
        out = []
        for ep in eps:
            host, _, port = ep.rpartition(":")
            out.append((host.strip("[]"), int(port)))
        return out


class Grant:
    """A taken lock: the library's handle, its fence (or None), when acquire returned, and
    `lost` (a reason) when the library already said it is gone by the time this is answered."""

    def __init__(self, handle, fence=None, granted_ns=None, lost=None):
        self.handle = handle
        self.fence = fence
        self.granted_ns = now_ns() if granted_ns is None else granted_ns
        self.lost = lost


class Library:
    """One lock library behind the protocol. Methods run on the asyncio loop."""

    name = ""  # the library's own name, shown in reports
    dist = ""  # its installed distribution, whose version init_ok reports

    def __init__(self, runtime):
        self.runtime = runtime
        self.cfg = None

    async def connect(self, cfg):
        """Connects; returns (fencing, renews)."""
        raise NotImplementedError

    async def acquire(self, client, key):
        """Returns a Grant, or None when the lock stayed busy for the whole acquire timeout."""
        raise NotImplementedError

    async def release(self, handle):
        """Returns whether the library found the lock still ours."""
        raise NotImplementedError

    async def close(self):
        pass

    def classify(self, exc):
        """Maps a library exception to a Failure."""
        return Failure("crash", f"{type(exc).__name__}: {exc}", False)


class Lease:
    __slots__ = ("id", "handle", "lost")

    def __init__(self, lease_id, handle):
        self.id, self.handle, self.lost = lease_id, handle, False


class Runtime:
    def __init__(self, library_class):
        self.loop = asyncio.get_running_loop()
        # Replies go to a private copy of fd 1; fd 1 itself now points at stderr, so a stray
        # print() or a library's banner cannot corrupt the JSON stream.
        self.out_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.write_lock = threading.Lock()  # whole lines, whichever thread sends
        self.lib = library_class(self)
        self.cfg = None
        self.ready = self.loop.create_future()
        self.leases = {}
        self.next_lease = 0
        self.closing = False
        self.tasks = set()

    # ---- output ----

    def send(self, obj):
        data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        with self.write_lock:
            try:
                while data:
                    data = data[os.write(self.out_fd, data):]
            except BrokenPipeError:
                log.error("stdout closed: nobody reads the replies any more, leaving")
                os._exit(1)

    def reply(self, msg, body):
        body["in_reply_to"] = msg["msg_id"]
        self.send(body)

    def error(self, msg, f):
        self.reply(msg, {"type": "error", "code": f.code, "text": f.text, "definite": f.definite})

    def lose(self, lease, reason, at_ns=None):
        """Tells lockbench the library said `lease` is gone (once per lease)."""
        if lease.lost or self.closing:
            return
        lease.lost = True
        self.send({"type": "lost", "lease": lease.id, "reason": reason,
                   "at_ns": now_ns() if at_ns is None else at_ns})

    def lose_all(self, reason, at_ns=None):
        """Every lease held now is gone (a session ended). Call on the loop."""
        for lease in list(self.leases.values()):
            self.lose(lease, reason, at_ns)

    # ---- input ----

    async def serve(self):
        async for line in self.lines():
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
                if not isinstance(msg, dict) or not isinstance(msg.get("msg_id"), int):
                    raise ValueError("not an object with an integer msg_id")
            except ValueError as e:
                log.error("ignoring bad request line %r: %s", line[:200], e)
                continue
            task = self.loop.create_task(self.handle(msg))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
        # stdin EOF: leave whether or not shutdown came (within PROTOCOL.md's 5 s), after giving
        # requests still in flight a moment to answer.
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=1.5)
        await self.finish(None)

    async def lines(self):
        """stdin's lines: an asyncio pipe reader, or a reader thread where stdin cannot be
        polled (a regular file)."""
        reader = asyncio.StreamReader(limit=1 << 24)
        try:
            await self.loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", 0, closefd=False))
        except (OSError, ValueError):
            def pump():
                for line in sys.stdin.buffer:
                    self.loop.call_soon_threadsafe(reader.feed_data, line)
                self.loop.call_soon_threadsafe(reader.feed_eof)
            threading.Thread(target=pump, name="stdin", daemon=True).start()
        while True:
            line = await reader.readline()
            if not line:
                return
            yield line

    async def handle(self, msg):
        kind = msg.get("type")
        try:
            if kind == "init":
                await self.on_init(msg)
            elif kind == "acquire":
                await self.on_acquire(msg)
            elif kind == "release":
                await self.on_release(msg)
            elif kind == "shutdown":
                await self.finish(msg)
            else:
                raise Failure("not_supported", f"unknown request type {kind!r}", True)
        except Failure as f:
            self.error(msg, f)
        except Exception as e:  # a library exception not mapped by the adapter itself
            f = self.lib.classify(e)
            log.debug("%s %s failed", kind, msg.get("msg_id"), exc_info=True)
            self.error(msg, f)

    async def on_init(self, msg):
        if self.cfg is not None or self.ready.done():
            raise Failure("crash", "init sent twice", True)
        try:
            await self.init(msg)
        finally:
            if not self.ready.done():  # failed: later requests answer `connection`
                self.ready.set_result(False)

    async def init(self, msg):
        if msg.get("protocol") != PROTOCOL:
            raise Failure("not_supported", f"protocol {msg.get('protocol')!r}: this adapter "
                          f"speaks {PROTOCOL}", True)
        try:
            cfg = Config(msg)
        except (TypeError, ValueError, AttributeError) as e:
            raise Failure("crash", f"bad init: {e}", True)
        self.cfg = self.lib.cfg = cfg
        # Bounds lockbench holds replies to (PROTOCOL.md), less a margin for the reply's trip.
        margin = min(0.05, cfg.call_timeout_s / 10)
        self.acquire_bound = cfg.acquire_timeout_s + cfg.call_timeout_s - margin
        self.release_bound = cfg.call_timeout_s - margin
        try:
            self.fencing, renews = await asyncio.wait_for(self.lib.connect(cfg), 25)
        except asyncio.TimeoutError:
            raise Failure("timeout", "could not connect within 25 s", True)
        self.ready.set_result(True)
        self.reply(msg, {"type": "init_ok", "protocol": PROTOCOL, "library": self.lib.name,
                         "version": importlib.metadata.version(self.lib.dist),
                         "fencing": self.fencing, "renews": renews})

    async def initialised(self):
        if not await asyncio.shield(self.ready):
            raise Failure("connection", "init failed", True)

    async def on_acquire(self, msg):
        await self.initialised()
        try:
            client, key = int(msg["client"]), str(msg["key"])
        except (KeyError, TypeError, ValueError):
            raise Failure("crash", "acquire needs an integer client and a key", True)
        try:
            grant = await asyncio.wait_for(self.lib.acquire(client, key), self.acquire_bound)
        except asyncio.TimeoutError:
            raise Failure("timeout", f"acquire did not return within {self.acquire_bound:.3f} s "
                          "(the lock may have been taken; it expires)", False)
        if grant is None:
            raise Failure("busy", f"not acquired within {self.cfg.acquire_timeout_ms} ms", True)
        self.next_lease += 1
        lease = Lease(f"l-{self.next_lease}", grant.handle)
        self.leases[lease.id] = lease
        body = {"type": "acquire_ok", "lease": lease.id, "granted_ns": grant.granted_ns}
        if self.fencing:
            body["fence"] = grant.fence
        self.reply(msg, body)
        if grant.lost:
            self.lose(lease, grant.lost)

    async def on_release(self, msg):
        await self.initialised()
        # Out of the table at once: a repeated release (in flight or later) is was_held false.
        lease = self.leases.pop(str(msg.get("lease")), None)
        if lease is None:
            self.reply(msg, {"type": "release_ok", "was_held": False})
            return
        try:
            held = await asyncio.wait_for(self.lib.release(lease.handle), self.release_bound)
        except asyncio.TimeoutError:
            self.leases[lease.id] = lease  # a retried release tries again
            raise Failure("timeout", f"release did not return within {self.release_bound:.3f} s",
                          False)
        except BaseException:
            self.leases[lease.id] = lease
            raise
        self.reply(msg, {"type": "release_ok", "was_held": bool(held) and not lease.lost})

    async def finish(self, msg):
        """shutdown (msg) or stdin EOF (None): close the library, answer, exit 0."""
        if self.closing:
            # stdin closed right after shutdown: that shutdown answers and exits.
            await asyncio.Event().wait()
        self.closing = True
        try:
            await asyncio.wait_for(self.lib.close(), 3)
        except Exception as e:
            log.warning("closing %s: %r", self.lib.name, e)
        if msg is not None:
            self.reply(msg, {"type": "shutdown_ok"})
        sys.stderr.flush()
        # os._exit: library threads blocked in a wait (kazoo) must not hold the process open.
        os._exit(0)


def main(library_class):
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, os.environ.get("LOCKBENCH_ADAPTER_LOG", "").upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # lockbench runs the adapter in its worker's process group: a Ctrl-C meant for lockbench
    # must not kill the adapter mid-run; it leaves on shutdown or when stdin closes.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    async def run():
        await Runtime(library_class).serve()

    asyncio.run(run())
