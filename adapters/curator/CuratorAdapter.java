// lockbench adapter for Apache Curator's InterProcessMutex (adapters/PROTOCOL.md, version 1).
//
// Run from ./run against Debian's Curator jars (bookworm's 5.4.0, or trixie's 5.7.1 with
// --curator=5.7, compiled against each; the version loaded is what init_ok reports); JSON is Debian's
// Jackson, which curator-framework already depends on. Logs (slf4j-simple) go to stderr, and
// System.out is pointed at stderr too, so only protocol lines reach stdout.
//
// How Curator is used, as an application would:
// - one CuratorFramework (one ZooKeeper session) per process, shared by all buyers; `client`
//   is only logged;
// - session timeout = ttl_ms (the servers clamp it to 2..20 ticks), connection timeout =
//   call_timeout_ms, retry policy ExponentialBackoffRetry(1000, 3): the policy in Curator's
//   "Getting Started" page (Curator has no built-in default; this is the one apps copy);
// - a new InterProcessMutex per acquisition, acquire(acquire_timeout_ms, MILLISECONDS): that
//   timeout is Curator's own bound on the wait for the predecessor's node, the only setting
//   mapped; Curator's watches, retries and clean-up are left alone;
// - InterProcessMutex belongs to the thread that acquired it (release() from another thread
//   throws IllegalMonitorStateException), so every lease runs on its own pool thread, which
//   acquires, waits for lockbench's release, and releases.
//
// Fence: Curator has none; the adapter derives it from the lock node, whose path the protected
// InterProcessMutex.getLockPath() gives. Its sequence number (…/_c_<uuid>-lock-0000000042)
// grows with every holder only while the key's parent znode lives: Curator makes parents
// CONTAINER nodes, which the server deletes once empty (checked every 60 s by default), and the
// count restarts at 0 (seen here: 0,1,2, then 0 after 130 s idle). So the default fence is the
// node's czxid (the zxid of its create, growing across the whole ensemble), read with one
// checkExists() after the grant, as lockbench's own `zookeeper` strategy does;
// `--fence=seq` uses the sequence number instead (no extra call, resets as above).
//
// `lost`: Curator tells a lock holder nothing itself; its docs tell it to watch connection
// states: after SUSPENDED "you cannot be certain that you still hold the lock unless you
// subsequently receive RECONNECTED"; after LOST it is certainly gone. By default a held lease is
// reported lost on SUSPENDED (what those docs ask of a careful holder, see CURATOR-206: the
// ZooKeeper client suspends after 2/3 of the session timeout without a word from the server,
// about 1/3 before the server expires the session); `--lost-on=lost` reports only on LOST
// (the naive holder: Curator's LOST comes a whole session timeout after SUSPENDED, so for up to
// about one session timeout after the server deleted the node two holders may each think they
// hold the lock). A lease reported lost on SUSPENDED whose session survives is still released
// normally (was_held true).
//
// `was_held`: Curator's release() swallows NoNode (the node went with the session), so it
// cannot tell by itself. The adapter answers false when release() throws a session error or
// IllegalMonitorStateException, when Curator reported LOST during the lease, or when the
// ZooKeeper handle was replaced since the grant (CuratorZookeeperClient.getInstanceIndex(): a
// new handle means the session that owned the node has ended), else true.

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public final class CuratorAdapter {
    static final ObjectMapper JSON = new ObjectMapper();
    static final String ROOT = "/lockbench-locks";
    static PrintStream out;

    // Set by init.
    static CuratorFramework client;
    static long acquireTimeoutMs, callTimeoutMs;
    static boolean lostOnSuspended = true;
    static boolean fenceBySeq = false;

    /** Leases granted and not yet released, by lease id. */
    static final Map<String, Lease> leases = new ConcurrentHashMap<>();
    static final AtomicLong leaseSeq = new AtomicLong();
    /** The last connection state Curator reported (null before the first). */
    static volatile ConnectionState connState;

    static final ExecutorService leaseThreads = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "lease");
        t.setDaemon(true);
        return t;
    });
    static final ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, r -> {
        Thread t = new Thread(r, "deadline");
        t.setDaemon(true);
        return t;
    });

    public static void main(String[] args) throws Exception {
        for (String a : args) {
            if (a.equals("--lost-on=lost")) lostOnSuspended = false;
            else if (a.equals("--lost-on=suspended")) lostOnSuspended = true;
            else if (a.equals("--fence=seq")) fenceBySeq = true;
            else if (a.equals("--fence=czxid")) fenceBySeq = false;
            else {
                System.err.println("curator adapter: unknown argument " + a
                        + " (--lost-on=suspended|lost, --fence=czxid|seq)");
                System.exit(2);
            }
        }
        // Keep the real stdout for protocol lines; anything else printing to System.out lands on stderr.
        out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err);
        timer.setRemoveOnCancelPolicy(true);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode msg;
            try {
                msg = JSON.readTree(line);
            } catch (Exception e) {
                System.err.println("curator adapter: not JSON, ignored: " + line);
                continue;
            }
            if (!msg.isObject() || !msg.has("msg_id")) {
                System.err.println("curator adapter: no msg_id, ignored: " + line);
                continue;
            }
            long id = msg.get("msg_id").asLong();
            String type = msg.path("type").asText("");
            try {
                switch (type) {
                    case "init" -> init(id, msg);
                    case "acquire" -> acquire(id, msg);
                    case "release" -> release(id, msg);
                    case "shutdown" -> {
                        closeClient();
                        send(reply("shutdown_ok", id));
                        out.flush();
                        System.exit(0);
                    }
                    default -> send(error(id, "not_supported", "unknown request type " + type, true));
                }
            } catch (Exception e) {
                e.printStackTrace();
                send(error(id, "crash", String.valueOf(e), false));
            }
        }
        // stdin EOF: leave within the protocol's 5 s whatever the close does.
        System.err.println("curator adapter: stdin closed, exiting");
        closeClient();
        System.exit(0);
    }

    static void closeClient() {
        Thread halt = new Thread(() -> {
            try { Thread.sleep(3000); } catch (InterruptedException e) { return; }
            System.err.println("curator adapter: close took over 3 s, halting");
            Runtime.getRuntime().halt(0);
        });
        halt.setDaemon(true);
        halt.start();
        if (client != null) client.close();
    }

    // ---- init ----

    static void init(long id, JsonNode msg) throws Exception {
        if (client != null) {
            send(error(id, "crash", "init sent twice", true));
            return;
        }
        int protocol = msg.path("protocol").asInt(0);
        int ttlMs = msg.path("ttl_ms").asInt(2000);
        acquireTimeoutMs = msg.path("acquire_timeout_ms").asLong(1000);
        callTimeoutMs = msg.path("call_timeout_ms").asLong(500);
        List<String> zk = new ArrayList<>();
        msg.path("endpoints").path("zookeeper").forEach(n -> zk.add(n.asText()));
        if (zk.isEmpty()) {
            send(error(id, "connection", "no zookeeper endpoints given", true));
            return;
        }
        client = CuratorFrameworkFactory.builder()
                .connectString(String.join(",", zk))
                .sessionTimeoutMs(ttlMs)
                .connectionTimeoutMs((int) callTimeoutMs)
                .retryPolicy(new ExponentialBackoffRetry(1000, 3))
                .build();
        client.getConnectionStateListenable().addListener(CuratorAdapter::stateChanged);
        client.start();
        // lockbench waits 30 s for init_ok.
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            send(error(id, "connection", "no ZooKeeper connection within 20 s to " + zk, true));
            return;
        }
        System.err.printf("curator adapter: Curator %s, ZooKeeper client %s, connected to %s, session timeout asked %d ms, negotiated %d ms, lost on %s, fence %s%n",
                curatorVersion(), org.apache.zookeeper.Version.getFullVersion(),
                zk, ttlMs, client.getZookeeperClient().getZooKeeper().getSessionTimeout(),
                lostOnSuspended ? "SUSPENDED" : "LOST", fenceBySeq ? "sequence number" : "czxid");
        ObjectNode r = reply("init_ok", id);
        r.put("protocol", protocol);
        r.put("library", "curator");
        r.put("version", curatorVersion());
        r.put("fencing", true);
        r.put("renews", true);
        send(r);
    }

    /** The version of the curator-recipes jar actually loaded, from the Maven metadata inside it. */
    static String curatorVersion() {
        try (var s = InterProcessMutex.class.getResourceAsStream(
                "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            if (s != null) {
                Properties p = new Properties();
                p.load(s);
                String v = p.getProperty("version");
                if (v != null) return v;
            }
        } catch (Exception e) {
            System.err.println("curator adapter: reading pom.properties: " + e);
        }
        String v = InterProcessMutex.class.getPackage().getImplementationVersion();
        return v != null ? v : "unknown";
    }

    // ---- acquire / release ----

    /** InterProcessMutex with the node path the current thread holds made visible (for the fence). */
    static final class FencedMutex extends InterProcessMutex {
        FencedMutex(CuratorFramework c, String path) { super(c, path); }
        String heldNodePath() { return getLockPath(); }
    }

    /** A reply that is sent once: by the worker, or by the deadline if that comes first. */
    static final class Pending {
        final long msgId;
        final AtomicBoolean done = new AtomicBoolean();
        volatile ScheduledFuture<?> timeout;
        Pending(long msgId) { this.msgId = msgId; }
        boolean send(ObjectNode r) {
            if (!done.compareAndSet(false, true)) return false;
            CuratorAdapter.send(r);
            ScheduledFuture<?> t = timeout;
            if (t != null) t.cancel(false);
            return true;
        }
        /** Answers `timeout` (indefinite) after ms unless answered before. */
        void deadline(long ms, String what) {
            timeout = timer.schedule(() -> send(error(msgId, "timeout", what + " not done within " + ms + " ms", false)),
                    ms, TimeUnit.MILLISECONDS);
        }
    }

    static final class Lease implements Runnable {
        final String id = "l-" + leaseSeq.incrementAndGet();
        final String key;
        final int buyer;
        final Pending acquireReply;
        final FencedMutex mutex;
        final CompletableFuture<Pending> releaseRequest = new CompletableFuture<>();
        /** acquire_ok has gone out: `lost` may now be sent. */
        volatile boolean announced;
        final AtomicBoolean lostSent = new AtomicBoolean();
        /** Curator reported LOST while this lease was held. */
        volatile boolean sessionLost;
        long instanceAtGrant;

        Lease(String key, int buyer, Pending acquireReply) {
            this.key = key;
            this.buyer = buyer;
            this.acquireReply = acquireReply;
            this.mutex = new FencedMutex(client, ZKPaths.makePath(ROOT, key));
        }

        @Override public void run() {
            boolean got;
            try {
                got = mutex.acquire(acquireTimeoutMs, TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                System.err.println("curator adapter: acquire " + key + " (buyer " + buyer + "): " + e);
                // The lock node may have been made (and even been first) before the failure.
                acquireReply.send(error(acquireReply.msgId, code(e), String.valueOf(e), e instanceof IllegalArgumentException));
                return;
            }
            long granted = System.nanoTime();
            if (!got) {
                acquireReply.send(error(acquireReply.msgId, "busy", "not acquired within " + acquireTimeoutMs + " ms", true));
                return;
            }
            String path = mutex.heldNodePath();
            instanceAtGrant = client.getZookeeperClient().getInstanceIndex();
            long fence;
            try {
                fence = fenceOf(path);
            } catch (Exception e) {
                // No node (the session ended already) or no answer: the lock is not usable.
                System.err.println("curator adapter: reading the fence of " + path + ": " + e);
                releaseQuietly();
                acquireReply.send(error(acquireReply.msgId, code(e), "granted, but the lock node could not be read: " + e, false));
                return;
            }
            leases.put(id, this);
            ObjectNode ok = reply("acquire_ok", acquireReply.msgId);
            ok.put("lease", id);
            ok.put("fence", fence);
            ok.put("granted_ns", granted);
            if (!acquireReply.send(ok)) {
                // lockbench already got `timeout` for this acquire: give the lock straight back.
                leases.remove(id);
                releaseQuietly();
                return;
            }
            announced = true;
            // A state change that came while acquire_ok was being sent skipped this lease.
            ConnectionState s = connState;
            if (client.getZookeeperClient().getInstanceIndex() != instanceAtGrant) {
                reportLost(ConnectionState.LOST);
            } else if (s == ConnectionState.LOST || (lostOnSuspended && s == ConnectionState.SUSPENDED)) {
                reportLost(s);
            }
            Pending rel;
            try {
                rel = releaseRequest.get();
            } catch (Exception e) {
                return;
            }
            boolean wasHeld = true;
            try {
                mutex.release();
            } catch (IllegalMonitorStateException | KeeperException.NoNodeException | KeeperException.SessionExpiredException e) {
                wasHeld = false;
            } catch (Exception e) {
                // e.g. connection loss after the retries: the guaranteed delete goes on in the background.
                System.err.println("curator adapter: release " + key + ": " + e);
                rel.send(error(rel.msgId, code(e), String.valueOf(e), false));
                return;
            }
            if (sessionLost || client.getZookeeperClient().getInstanceIndex() != instanceAtGrant) wasHeld = false;
            ObjectNode r = reply("release_ok", rel.msgId);
            r.put("was_held", wasHeld);
            rel.send(r);
        }

        static long fenceOf(String path) throws Exception {
            if (fenceBySeq) return Long.parseLong(ZKPaths.extractSequentialSuffix(path));
            Stat st = client.checkExists().forPath(path);
            if (st == null) throw new KeeperException.NoNodeException(path);
            return st.getCzxid();
        }

        void releaseQuietly() {
            try {
                mutex.release();
            } catch (Exception e) {
                System.err.println("curator adapter: giving back " + key + " after a timed-out acquire: " + e);
            }
        }

        void reportLost(ConnectionState s) {
            if (s == ConnectionState.LOST) sessionLost = true;
            if (!announced || !lostSent.compareAndSet(false, true)) return;
            ObjectNode m = JSON.createObjectNode();
            m.put("type", "lost");
            m.put("lease", id);
            m.put("reason", s == ConnectionState.LOST
                    ? "Curator connection state LOST (session expired)"
                    : "Curator connection state SUSPENDED (lock not certain until RECONNECTED)");
            m.put("at_ns", System.nanoTime());
            send(m);
        }
    }

    static void acquire(long id, JsonNode msg) {
        if (client == null) {
            send(error(id, "crash", "acquire before init", true));
            return;
        }
        Pending p = new Pending(id);
        Lease l;
        try {
            l = new Lease(msg.path("key").asText(), msg.path("client").asInt(-1), p);
        } catch (IllegalArgumentException e) {  // not a valid znode path
            send(error(id, "crash", String.valueOf(e), true));
            return;
        }
        // lockbench's bound is acquire timeout + call timeout; answer a little before it.
        p.deadline(acquireTimeoutMs + callTimeoutMs * 3 / 4, "acquire");
        leaseThreads.execute(l);
    }

    static void release(long id, JsonNode msg) {
        Lease l = leases.remove(msg.path("lease").asText());
        if (l == null) {  // released before, or its acquire was answered `timeout`
            ObjectNode r = reply("release_ok", id);
            r.put("was_held", false);
            send(r);
            return;
        }
        Pending p = new Pending(id);
        p.deadline(callTimeoutMs * 3 / 4, "release");
        l.releaseRequest.complete(p);
    }

    static void stateChanged(CuratorFramework c, ConnectionState s) {
        connState = s;
        System.err.println("curator adapter: connection state " + s + " (" + leases.size() + " leases held)");
        if (s == ConnectionState.LOST || (lostOnSuspended && s == ConnectionState.SUSPENDED)) {
            for (Lease l : leases.values()) l.reportLost(s);
        }
    }

    // ---- messages ----

    static String code(Throwable e) {
        if (e instanceof KeeperException.OperationTimeoutException) return "timeout";
        if (e instanceof KeeperException.ConnectionLossException
                || e instanceof KeeperException.SessionExpiredException
                || e instanceof KeeperException.SessionMovedException) return "connection";
        if (e instanceof KeeperException) return "server";
        return "crash";
    }

    static ObjectNode reply(String type, long inReplyTo) {
        ObjectNode r = JSON.createObjectNode();
        r.put("type", type);
        r.put("in_reply_to", inReplyTo);
        return r;
    }

    static ObjectNode error(long inReplyTo, String code, String text, boolean definite) {
        ObjectNode r = reply("error", inReplyTo);
        r.put("code", code);
        r.put("text", text);
        r.put("definite", definite);
        return r;
    }

    static void send(ObjectNode m) {
        String s;
        try {
            s = JSON.writeValueAsString(m);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
        synchronized (out) {
            out.print(s);
            out.print('\n');
            out.flush();
        }
    }
}
