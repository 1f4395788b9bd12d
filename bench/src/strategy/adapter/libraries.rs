//! The lock libraries lockbench runs through adapters: one row per library (its pinned
//! version, installed by scripts/install-deps.sh --adapters), one strategy per row plus a
//! `-fenced` one for libraries whose grants carry a fencing token.

use std::path::Path;

use crate::strategy::entry::needs::{
    MARIADB_ETCD, MARIADB_POSTGRES, MARIADB_REDIS, MARIADB_REDLOCK, MARIADB_ZOOKEEPER,
};
use crate::strategy::entry::{Kind, StrategyInfo};

/// A lock library behind an adapter.
#[derive(Debug, Clone, Copy)]
pub struct Library {
    /// `lib:<name>` on the command line.
    pub name: &'static str,
    /// The package and where it comes from.
    pub package: &'static str,
    /// The version installed (pinned).
    pub version: &'static str,
    /// The adapter's command: a path under adapters/, then its arguments.
    pub run: &'static [&'static str],
    /// A file that exists once the library is installed: under adapters/, or absolute.
    pub installed_marker: &'static str,
}

impl Library {
    /// Whether its adapter and the library are installed (adapters under `dir`).
    pub fn installed(&self, dir: &Path) -> bool {
        dir.join(self.run[0]).exists() && dir.join(self.installed_marker).exists()
    }

    /// The adapter's command line, with its launcher under `dir`.
    pub fn argv(&self, dir: &Path) -> Vec<String> {
        let (launcher, args) = self.run.split_first().expect("a launcher");
        std::iter::once(dir.join(launcher).to_string_lossy().into_owned())
            .chain(args.iter().map(|a| a.to_string()))
            .collect()
    }
}

/// Every library, in listing order.
pub const LIBRARIES: &[Library] = &[
    Library {
        name: "redis-py",
        package: "redis (PyPI)",
        version: "8.1.0",
        run: &["redis-py/run"],
        installed_marker: "python/.venv/lockbench-requirements.txt",
    },
    Library {
        name: "redis-semaphore",
        package: "redis-semaphore (npm), on ioredis",
        version: "5.8.0",
        run: &["redis-semaphore/run"],
        installed_marker: "node/node_modules/.package-lock.json",
    },
    Library {
        name: "node-redlock",
        package: "redlock (npm)",
        version: "4.2.0",
        run: &["node-redlock/run"],
        installed_marker: "node/node_modules/.package-lock.json",
    },
    Library {
        name: "node-redlock-v5",
        package: "@sesamecare-oss/redlock (npm), the maintained redlock v5",
        version: "1.4.0",
        run: &["node-redlock-v5/run"],
        installed_marker: "node/node_modules/.package-lock.json",
    },
    Library {
        name: "curator",
        package: "Apache Curator recipes (Debian libcurator-recipes-java)",
        version: "5.4.0",
        run: &["curator/run"],
        installed_marker: "curator/.classes/CuratorAdapter.class",
    },
    Library {
        name: "curator-5.7",
        package: "Apache Curator recipes (Debian trixie libcurator-recipes-java, private prefix)",
        version: "5.7.1",
        run: &["curator/run", "--curator=5.7"],
        installed_marker: "curator/.classes-5.7/CuratorAdapter.class",
    },
    Library {
        name: "kazoo",
        package: "kazoo (PyPI)",
        version: "2.11.0",
        run: &["kazoo/run"],
        installed_marker: "python/.venv/lockbench-requirements.txt",
    },
    Library {
        name: "aetcd",
        package: "aetcd (PyPI)",
        version: "1.0.0",
        run: &["aetcd/run"],
        installed_marker: "python/.venv/lockbench-requirements.txt",
    },
    Library {
        name: "advisory-lock",
        package: "advisory-lock (npm), on pg",
        version: "2.0.0",
        run: &["advisory-lock/run"],
        installed_marker: "node/node_modules/.package-lock.json",
    },
    Library {
        name: "example",
        package: "adapters/example/adapter.py, Python standard library only",
        version: "1.0",
        run: &["example/adapter.py"],
        installed_marker: "example/adapter.py",
    },
];

/// The library behind strategy `id` (`lib:<name>` or `lib:<name>-fenced`).
pub fn library_of(id: &str) -> Option<&'static Library> {
    let name = id.strip_prefix("lib:")?;
    let name = name.strip_suffix("-fenced").unwrap_or(name);
    LIBRARIES.iter().find(|l| l.name == name)
}

/// The fields every library strategy shares.
const LIB: StrategyInfo = StrategyInfo {
    id: "lib:",
    kind: Kind::Lock,
    locks: true,
    fenced: false,
    fence_token: None,
    needs: MARIADB_REDIS,
    // The library waits its own way; lockbench's `lock.wait` keys do not apply.
    wait: None,
    about: "",
    build: |s| Box::pin(super::build(s)),
};

/// The library strategies, for the registry.
pub const STRATEGIES: &[StrategyInfo] = &[
    StrategyInfo {
        id: "lib:redis-py",
        about: "redis-py 8.1.0 Lock: SET NX PX + token, polls every 0.1 s, no renewal",
        ..LIB
    },
    StrategyInfo {
        id: "lib:redis-semaphore",
        about: "redis-semaphore 5.8.0 Mutex (Node): SET NX PX, polls, refreshes at 0.8 x ttl, \
                onLockLost",
        ..LIB
    },
    StrategyInfo {
        id: "lib:node-redlock",
        needs: MARIADB_REDLOCK,
        about: "redlock 4.2.0 (Node): Redlock over independent masters, retries 200 ms ± 200 ms",
        ..LIB
    },
    StrategyInfo {
        id: "lib:node-redlock-v5",
        needs: MARIADB_REDLOCK,
        about: "@sesamecare-oss/redlock 1.4.0 (Node, redlock v5): Redlock, acquire/release",
        ..LIB
    },
    StrategyInfo {
        id: "lib:curator",
        needs: MARIADB_ZOOKEEPER,
        fence_token: Some("the lock node's czxid"),
        about: "Apache Curator 5.4.0 InterProcessMutex (Java): ephemeral sequential node, \
                watches its predecessor",
        ..LIB
    },
    StrategyInfo {
        id: "lib:curator-5.7",
        needs: MARIADB_ZOOKEEPER,
        fence_token: Some("the lock node's czxid"),
        about: "Apache Curator 5.7.1 InterProcessMutex (Java, ZooKeeper 3.9 client): the same \
                adapter on Debian trixie's jars",
        ..LIB
    },
    StrategyInfo {
        id: "lib:kazoo",
        needs: MARIADB_ZOOKEEPER,
        fence_token: Some("the lock node's sequence number"),
        about: "kazoo 2.11.0 Lock (Python): ephemeral sequential node, watches its predecessor",
        ..LIB
    },
    StrategyInfo {
        id: "lib:aetcd",
        needs: MARIADB_ETCD,
        fence_token: Some("the lock key's revision"),
        about: "aetcd 1.0.0 lock (Python asyncio): a lease per lock + txn on the key",
        ..LIB
    },
    StrategyInfo {
        id: "lib:advisory-lock",
        needs: MARIADB_POSTGRES,
        about: "advisory-lock 2.0.0 (Node, PostgreSQL): a connection per lock, pg_advisory_lock \
                queued by the server, lock_timeout = acquire timeout",
        ..LIB
    },
    StrategyInfo {
        id: "lib:example",
        about: "the example adapter of docs/libraries.md (1.0): SET NX PX over a raw socket, polls every \
                50 ms; a template for your own",
        ..LIB
    },
    StrategyInfo {
        id: "lib:curator-fenced",
        needs: MARIADB_ZOOKEEPER,
        fenced: true,
        fence_token: Some("the lock node's czxid"),
        about: "Curator InterProcessMutex, its node's czxid as fencing token (the sequence \
                restarts when ZooKeeper reaps the empty container node)",
        ..LIB
    },
    StrategyInfo {
        id: "lib:curator-5.7-fenced",
        needs: MARIADB_ZOOKEEPER,
        fenced: true,
        fence_token: Some("the lock node's czxid"),
        about: "Curator 5.7 InterProcessMutex, its node's czxid as fencing token",
        ..LIB
    },
    StrategyInfo {
        id: "lib:kazoo-fenced",
        needs: MARIADB_ZOOKEEPER,
        fenced: true,
        fence_token: Some("the lock node's sequence number"),
        about: "kazoo Lock, its node's sequence number as fencing token",
        ..LIB
    },
    StrategyInfo {
        id: "lib:aetcd-fenced",
        needs: MARIADB_ETCD,
        fenced: true,
        fence_token: Some("the lock key's revision"),
        about: "aetcd lock, its key's revision as fencing token",
        ..LIB
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_library_has_a_strategy_and_every_strategy_a_library() {
        for l in LIBRARIES {
            let id = format!("lib:{}", l.name);
            assert!(STRATEGIES.iter().any(|s| s.id == id), "{id}");
        }
        for s in STRATEGIES {
            let lib = library_of(s.id).unwrap_or_else(|| panic!("{}", s.id));
            assert!(s.fenced || s.about.contains(lib.version), "{}", s.about);
            assert_eq!(s.fenced, s.id.ends_with("-fenced"), "{}", s.id);
            if s.fenced {
                let plain = s.id.trim_end_matches("-fenced");
                let p = STRATEGIES.iter().find(|p| p.id == plain).unwrap();
                assert_eq!(p.fence_token, s.fence_token, "{}", s.id);
            }
        }
        assert!(library_of("redis-setnx").is_none());
        assert_eq!(library_of("lib:kazoo-fenced").unwrap().name, "kazoo");
    }
}
