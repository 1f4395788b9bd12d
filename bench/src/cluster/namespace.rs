//! The names lockbench owns on a set of servers. Every key, table and node a run creates starts
//! with one [`Prefix`], so a run on shared servers (an external target) can tell its own data
//! from everyone else's, refuse to touch the rest, and remove exactly what it created.

use serde::{Deserialize, Serialize};

/// The prefix of every name a run creates: Redis keys `<p>:…`, MariaDB tables `<p>_…`, the
/// ZooKeeper subtree `/<p>`, etcd keys `<p>:…`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Prefix(String);

/// The prefix of servers lockbench started itself.
pub const DEFAULT_PREFIX: &str = "lockbench";

/// What a valid prefix looks like (it goes into SQL identifiers and ZooKeeper paths unquoted).
pub const PREFIX_FORM: &str =
    "1 to 32 characters: a lower-case letter, then lower-case letters, digits or `_`";

impl Prefix {
    /// Validates `s` ([`PREFIX_FORM`]).
    pub fn new(s: &str) -> Result<Self, String> {
        let mut chars = s.chars();
        let ok = s.len() <= 32
            && chars.next().is_some_and(|c| c.is_ascii_lowercase())
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if ok {
            Ok(Self(s.to_string()))
        } else {
            Err(format!("{s:?}: expected {PREFIX_FORM}"))
        }
    }

    /// The prefix itself.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A Redis or etcd key: `<p>:<what>:<sku>`.
    pub fn key(&self, what: &str, sku: impl std::fmt::Display) -> String {
        format!("{}:{what}:{sku}", self.0)
    }

    /// The lock key of a SKU, the same for every lock service.
    pub fn lock_key(&self, sku: u32) -> String {
        self.key("lock", sku)
    }

    /// Start of every Redis and etcd key of the run (`<p>:`).
    pub fn key_start(&self) -> String {
        format!("{}:", self.0)
    }

    /// Redis / etcd key marking the prefix as lockbench's.
    pub fn owner_key(&self) -> String {
        format!("{}:owner", self.0)
    }

    /// A MariaDB table: `<p>_<name>`.
    pub fn table(&self, name: &str) -> String {
        format!("{}_{name}", self.0)
    }

    /// The ZooKeeper subtree of the run.
    pub fn zk_root(&self) -> String {
        format!("/{}", self.0)
    }
}

impl Default for Prefix {
    fn default() -> Self {
        Self(DEFAULT_PREFIX.to_string())
    }
}

impl TryFrom<String> for Prefix {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Self::new(&s)
    }
}

impl From<Prefix> for String {
    fn from(p: Prefix) -> String {
        p.0
    }
}

impl std::fmt::Display for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_safe_identifiers() {
        for ok in ["lockbench", "lb_staging2", "a"] {
            assert_eq!(Prefix::new(ok).unwrap().as_str(), ok);
        }
        for bad in [
            "",
            "Lockbench",
            "1lb",
            "lb-x",
            "lb:x",
            "lb x",
            "a/b",
            &"a".repeat(33),
        ] {
            assert!(Prefix::new(bad).unwrap_err().contains("expected"), "{bad}");
        }
        let p = Prefix::new("lb").unwrap();
        assert_eq!(p.lock_key(3), "lb:lock:3");
        assert_eq!(p.table("stock"), "lb_stock");
        assert_eq!(p.zk_root(), "/lb");
        assert_eq!(p.owner_key(), "lb:owner");
    }
}
