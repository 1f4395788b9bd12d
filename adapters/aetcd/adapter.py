"""lockbench adapter for aetcd's Lock (aetcd.locks.Lock, asyncio etcd v3 client over gRPC).

What aetcd 1.0.0's Lock does (read from its source): every try grants a NEW lease of `ttl`
seconds, then a transaction "if the key was never created (create_revision == 0), put it with our
uuid on that lease, else read it". On failure it watches the key for its DELETE (from the holder's
revision + 1) for the time left, then tries again. release is a transaction "if the value is our
uuid, delete the key"; it returns whether it deleted. It does not revoke the lease (it, and the
leases of failed tries, simply expire), and nothing keeps a lease alive: Lock.refresh() exists but
only an application calling it renews. So: renews false, and the library never reports a loss
(no `lost` from this adapter); a lapse shows up as release's was_held false. Watches are created
one at a time on the client's single watch stream, and every waiter wakes on a DELETE and tries
again (a lease grant and a transaction each), so under heavy contention one acquire can overrun
its timeout by those calls; past lockbench's bound (acquire + call timeout) the answer is
`timeout`, indefinite.

How it is used here, as an application would:
- one aetcd.Client (one gRPC channel) per process; a new Lock per acquisition, named by the key
  as it is (lockbench's keys carry its prefix);
- aetcd's Client takes one host:port. With several IPv4 endpoints the host is given as gRPC's
  `ipv4:` address list (the channel's pick_first policy moves to the next member when one fails),
  as a DNS name with several addresses would be; otherwise the first endpoint alone;
- mapped: ttl_ms -> the Lock's ttl in whole seconds, rounded up (etcd leases are whole seconds;
  the server raises a TTL below its minimum, 2 s with default raft timings); acquire_timeout_ms ->
  acquire(timeout=...); call_timeout_ms -> the client's `timeout` (the deadline of every RPC and of
  a watch's creation). Nothing else is changed.
- fence: the Lock's `revision` after a successful acquire, the revision of its put, which is the
  key's create_revision: etcd's revision grows with every write, so every new holder's is larger.
"""

import math
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))
import lockbench_adapter as lb  # noqa: E402

try:
    import aetcd
    from aetcd import exceptions as ae
except ImportError as e:
    print(f"aetcd adapter: {e}: Python dependencies not installed: "
          "run scripts/install-deps.sh --adapters", file=sys.stderr)
    sys.exit(3)


def channel_target(hosts):
    """(host, port) for aetcd.Client: a gRPC ipv4: list when every endpoint is an IPv4 address."""
    ipv4 = all(h.count(".") == 3 and h.replace(".", "").isdigit() for h, _ in hosts)
    if len(hosts) == 1 or not ipv4:
        if len(hosts) > 1:
            lb.log.warning("etcd endpoints are not all IPv4 addresses: using %s:%d only",
                           *hosts[0])
        return hosts[0]
    # aetcd joins f"{host}:{port}", so the last port goes in `port`.
    listed = ",".join(f"{h}:{p}" for h, p in hosts[:-1])
    return f"ipv4:{listed},{hosts[-1][0]}", hosts[-1][1]


class Aetcd(lb.Library):
    name = "aetcd"
    dist = "aetcd"

    async def connect(self, cfg):
        host, port = channel_target(cfg.hosts("etcd"))
        self.ttl = max(1, math.ceil(cfg.ttl_ms / 1000))
        self.client = aetcd.Client(host=host, port=port, timeout=cfg.call_timeout_s)
        await self.client.connect()
        await self.client.status()  # connect() only builds the channel; this reaches a member
        self.told_ttl = False
        return True, False

    async def acquire(self, client, key):
        lock = self.client.lock(key.encode(), ttl=self.ttl)
        if not await lock.acquire(timeout=self.cfg.acquire_timeout_s):
            return None
        granted = lb.now_ns()
        if not self.told_ttl:
            self.told_ttl = True
            if lock.lease.ttl != self.ttl:
                lb.log.warning("etcd granted a %d s lease for a %d s ttl", lock.lease.ttl,
                               self.ttl)
        return lb.Grant(lock, fence=lock.revision, granted_ns=granted)

    async def release(self, lock):
        return await lock.release()

    async def close(self):
        if hasattr(self, "client"):
            await self.client.close()

    def classify(self, exc):
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, (ae.ConnectionTimeoutError, ae.WatchTimeoutError)):
            return lb.Failure("timeout", text, False)
        if isinstance(exc, ae.ConnectionFailedError):
            return lb.Failure("connection", text, lb.refused(exc))
        if isinstance(exc, (ae.InternalError, ae.InvalidArgumentError,
                            ae.PreconditionFailedError, ae.UnauthenticatedError)):
            return lb.Failure("server", text, True)  # the server answered: nothing happened
        if isinstance(exc, ae.ClientError):
            return lb.Failure("server", text, False)
        return super().classify(exc)


if __name__ == "__main__":
    lb.main(Aetcd)
