//! The endpoints file of `lockbench serve` (read by `run --endpoints` and by workers): the
//! endpoints, with the passwords they never serialise carried beside them.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::credentials;
use super::error::ClusterError;
use super::model::{Auth, Endpoints, NodeInfo};

/// How long `--endpoints` waits for each of its servers to answer a TCP connect.
pub const ANSWER_BOUND: std::time::Duration = std::time::Duration::from_millis(1500);

/// Servers started by `lockbench serve`, as written to its endpoints file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndpointsFile {
    /// Addresses and users.
    pub endpoints: Endpoints,
    /// The MariaDB password (the endpoints themselves never serialise passwords).
    pub mysql_password: Option<String>,
    /// The Redis password, if the servers need one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_password: Option<String>,
    /// The sentinels' password, if they need one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentinel_password: Option<String>,
    /// The etcd password, if the cluster needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub etcd_password: Option<String>,
    /// The ZooKeeper password, if the ensemble needs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zookeeper_password: Option<String>,
    /// The PostgreSQL password, if a PostgreSQL runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postgres_password: Option<String>,
    /// The nodes serving them.
    pub nodes: Vec<NodeInfo>,
}

impl EndpointsFile {
    /// Writes it to `path`, mode 0600: it holds the passwords.
    pub(super) fn write(&self, path: &Path) -> Result<(), ClusterError> {
        let text = serde_json::to_string_pretty(self).expect("endpoints serialise");
        use std::os::unix::fs::OpenOptionsExt;
        let io = |e| ClusterError::io(format!("write {}", path.display()), e);
        // Written beside it, then renamed: whoever waits for the file to appear (a test, a
        // script, `run --endpoints`) never reads it half-written.
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io)?;
        std::io::Write::write_all(&mut f, text.as_bytes()).map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)
    }

    /// The file for `endpoints`, every password beside them.
    pub fn new(endpoints: Endpoints, nodes: Vec<NodeInfo>) -> Self {
        let pw = |a: &Option<Auth>| a.as_ref().map(|a| a.password.clone());
        Self {
            mysql_password: endpoints.mysql.as_ref().map(|m| m.password.clone()),
            redis_password: pw(&endpoints.redis_auth),
            sentinel_password: pw(&endpoints.sentinel_auth),
            etcd_password: pw(&endpoints.etcd_auth),
            zookeeper_password: pw(&endpoints.zookeeper_auth),
            postgres_password: endpoints.postgres.as_ref().map(|p| p.password.clone()),
            endpoints,
            nodes,
        }
    }

    /// Reads an endpoints file written by `OwnedCluster::write_endpoints`.
    pub fn read(path: &Path) -> Result<Self, ClusterError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ClusterError::io(format!("read {}", path.display()), e))?;
        let mut file: Self = serde_json::from_str(&text).map_err(|e| ClusterError::Setup {
            node: path.display().to_string(),
            what: "parse endpoints file".into(),
            detail: format!("{e}; expected the endpoints.json written by `lockbench serve`"),
        })?;
        file.restore_passwords();
        Ok(file)
    }

    /// Fails unless every node of the file answers a TCP connect within [`ANSWER_BOUND`],
    /// naming the first that does not: a stale file (its `serve` ended) otherwise cost a
    /// client's 30 s pool timeout and ended in "pool timed out".
    pub async fn check_answering(&self, path: &Path) -> Result<(), ClusterError> {
        let probes = self.nodes.iter().map(|n| async move {
            let connect = tokio::net::TcpStream::connect(n.addr);
            let answered = matches!(tokio::time::timeout(ANSWER_BOUND, connect).await, Ok(Ok(_)));
            (n, answered)
        });
        let results = futures::future::join_all(probes).await;
        match results.into_iter().find(|(_, answered)| !answered) {
            None => Ok(()),
            Some((n, _)) => Err(ClusterError::Setup {
                node: n.name.clone(),
                what: format!("{} (from {})", n.addr, path.display()),
                detail: format!(
                    "nothing answers there within {ANSWER_BOUND:?}; has the `lockbench serve` \
                     that wrote the file ended? Start it again, or run without --endpoints"
                ),
            }),
        }
    }

    /// Removes the passwords carried beside the endpoints (for a link that must not carry
    /// them: the worker reads them with [`Self::passwords_from_env`]).
    pub fn without_passwords(mut self) -> Self {
        for pw in self.passwords_mut() {
            *pw = None;
        }
        self
    }

    /// The passwords as `(variable, password)`: a worker's environment
    /// ([`credentials::PASSWORD_ENV`] names the variables).
    pub fn password_env(&self) -> Vec<(&'static str, String)> {
        let all = [
            &self.mysql_password,
            &self.redis_password,
            &self.sentinel_password,
            &self.etcd_password,
            &self.zookeeper_password,
            &self.postgres_password,
        ];
        credentials::PASSWORD_ENV
            .iter()
            .zip(all)
            .filter_map(|((_, var), p)| Some((*var, p.clone()?)))
            .collect()
    }

    /// Reads the passwords from this process's environment
    /// ([`credentials::PASSWORD_ENV`]); unset variables leave no password.
    pub fn passwords_from_env(&mut self) {
        let vars = credentials::PASSWORD_ENV.map(|(_, v)| std::env::var(v).ok());
        for (pw, var) in self.passwords_mut().into_iter().zip(vars) {
            *pw = var;
        }
    }

    /// In the order of [`credentials::PASSWORD_ENV`].
    fn passwords_mut(&mut self) -> [&mut Option<String>; 6] {
        [
            &mut self.mysql_password,
            &mut self.redis_password,
            &mut self.sentinel_password,
            &mut self.etcd_password,
            &mut self.zookeeper_password,
            &mut self.postgres_password,
        ]
    }

    /// Puts the passwords carried beside the endpoints back into them (after deserialising:
    /// the endpoints never serialise a password).
    pub fn restore_passwords(&mut self) {
        let ep = &mut self.endpoints;
        if let (Some(m), Some(pw)) = (ep.mysql.as_mut(), &self.mysql_password) {
            m.password = pw.clone();
        }
        if let (Some(p), Some(pw)) = (ep.postgres.as_mut(), &self.postgres_password) {
            p.password = pw.clone();
        }
        for (auth, pw) in [
            (&mut ep.redis_auth, &self.redis_password),
            (&mut ep.sentinel_auth, &self.sentinel_password),
            (&mut ep.etcd_auth, &self.etcd_password),
            (&mut ep.zookeeper_auth, &self.zookeeper_password),
        ] {
            if let (Some(a), Some(pw)) = (auth.as_mut(), pw) {
                a.password = pw.clone();
            }
        }
    }
}
