//! etcd-io/etcd#11456, as Jepsen reported it on etcd 3.4.3: the lock service (v3lock's `Lock`)
//! blocks a waiter until every older waiter's key is gone, and then answered it as the holder
//! without checking that the waiter's own lease still lived. A waiter whose lease expired while
//! it waited was told it held the lock, although its key was gone and the next caller was
//! granted the same lock at once.
//!
//! One round, on a real cluster of the chosen build, with bare `etcd-client` calls (no strategy
//! of lockbench: its `etcd` re-reads the key after a grant, which would hide the server's
//! answer):
//! 1. A holder takes the lock on a lease it keeps alive.
//! 2. A waiter asks for it on a lease of etcd's shortest TTL that nobody renews, and blocks.
//! 3. Once etcd reports the waiter's lease expired, the holder releases.
//! 4. The waiter's `Lock` answers. Granted: its key is read back, and a third client with a live
//!    lease asks for the lock; granted too within a second means two holders at once.
//!    Refused: the server checked the lease (3.5's `mutex: session is expired`).

use std::time::Duration;

use etcd_client::{Client, LockOptions};
use tokio::time::{Instant, timeout};

use crate::cluster::{Endpoints, etcd};

/// The lock's name; every round releases what it took, so rounds share it.
const NAME: &str = "lockbench/repro/etcd-11456";
/// Bound of every call that must answer at once.
pub(super) const CALL: Duration = Duration::from_secs(5);

/// What the waiter's `Lock` answered in one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Granted with its key gone; `third_granted`: a live client got the lock right after.
    GrantedStale { third_granted: bool },
    /// Granted and its key still there (the lease had not expired after all).
    GrantedLive,
    /// Refused with this error.
    Refused(String),
}

/// One round on the cluster at `endpoints`; `Err` is a setup failure (the harness's, never
/// counted for or against the server).
pub async fn round(endpoints: &Endpoints) -> Result<Answer, String> {
    let urls: Vec<String> = endpoints
        .etcd
        .iter()
        .map(|a| format!("http://{a}"))
        .collect();
    let opts = etcd::options(endpoints.etcd_auth.as_ref()).with_connect_timeout(CALL);
    let connect = || Client::connect(urls.clone(), Some(opts.clone()));
    let (mut holder, waiter, mut third) = (
        connect().await.map_err(|e| format!("connect: {e}"))?,
        connect().await.map_err(|e| format!("connect: {e}"))?,
        connect().await.map_err(|e| format!("connect: {e}"))?,
    );
    let live = lease(&mut holder, 10).await?;
    let (mut keeper, _stream) = holder
        .lease_keep_alive(live)
        .await
        .map_err(|e| format!("keep-alive: {e}"))?;
    let held = call(holder.lock(NAME, Some(LockOptions::new().with_lease(live)))).await?;
    let mut w = waiter.clone();
    let doomed = lease(&mut w, 1).await?;
    let asked = tokio::spawn(async move {
        let mut w = waiter;
        let opts = LockOptions::new().with_lease(doomed);
        timeout(Duration::from_secs(30), w.lock(NAME, Some(opts))).await
    });
    expired(&mut holder, doomed, &mut keeper).await?;
    call(holder.unlock(held.key().to_vec())).await?;
    let answer = match asked.await.map_err(|e| format!("waiter task: {e}"))? {
        Err(_) => return Err("the waiter's Lock did not answer within 30 s".into()),
        Ok(Err(e)) => Answer::Refused(e.to_string()),
        Ok(Ok(granted)) => judge(&mut holder, &mut third, granted.key()).await?,
    };
    let _ = holder.lease_revoke(live).await;
    Ok(answer)
}

/// A lease of `ttl` seconds (etcd raises it to its minimum); its id.
async fn lease(c: &mut Client, ttl: i64) -> Result<i64, String> {
    call(c.lease_grant(ttl, None)).await.map(|l| l.id())
}

/// `f` bounded by [`CALL`], its error as text.
pub(super) async fn call<T>(
    f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, String> {
    match timeout(CALL, f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {CALL:?}")),
    }
}

/// Waits until etcd reports lease `id` expired (TTL −1), renewing the holder's meanwhile.
async fn expired(
    c: &mut Client,
    id: i64,
    keeper: &mut etcd_client::LeaseKeeper,
) -> Result<(), String> {
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        let _ = keeper.keep_alive().await;
        if call(c.lease_time_to_live(id, None)).await?.ttl() < 0 {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err("the waiter's lease did not expire within 20 s".into())
}

/// The waiter was granted `key`: is it still there, and does a live third client get the lock?
async fn judge(holder: &mut Client, third: &mut Client, key: &[u8]) -> Result<Answer, String> {
    let found = call(holder.get(key.to_vec(), None)).await?;
    if !found.kvs().is_empty() {
        let _ = holder.unlock(key.to_vec()).await;
        return Ok(Answer::GrantedLive);
    }
    let live = lease(third, 10).await?;
    let opts = LockOptions::new().with_lease(live);
    let third_granted = match timeout(Duration::from_secs(1), third.lock(NAME, Some(opts))).await {
        Ok(Ok(got)) => {
            let _ = third.unlock(got.key().to_vec()).await;
            true
        }
        _ => false,
    };
    let _ = third.lease_revoke(live).await;
    Ok(Answer::GrantedStale { third_granted })
}

/// The verdict of `answers` on one build, and what was measured, with counts.
pub fn judge_rounds(answers: &[Answer]) -> (&'static str, String) {
    let n = answers.len();
    let stale: Vec<bool> = answers
        .iter()
        .filter_map(|a| match a {
            Answer::GrantedStale { third_granted } => Some(*third_granted),
            _ => None,
        })
        .collect();
    let refused: Vec<&str> = answers
        .iter()
        .filter_map(|a| match a {
            Answer::Refused(e) => Some(e.as_str()),
            _ => None,
        })
        .collect();
    let live = n - stale.len() - refused.len();
    let mut said = Vec::new();
    if !stale.is_empty() {
        let third = stale.iter().filter(|t| **t).count();
        said.push(format!(
            "{} of {n} rounds answered the waiter whose lease had expired as the holder, its key \
             gone; a live client was granted the same lock within 1 s in {third} of them",
            stale.len()
        ));
    }
    if let Some(first) = refused.first() {
        said.push(format!(
            "{} of {n} rounds refused the waiter (\"{first}\")",
            refused.len()
        ));
    }
    if live > 0 {
        said.push(format!(
            "{live} of {n} rounds granted the waiter with its key still there (its lease had not \
             expired: no test)"
        ));
    }
    let verdict = if !stale.is_empty() {
        "reproduced"
    } else if refused.len() == n && n > 0 {
        "not reproduced"
    } else {
        "undecided"
    };
    (verdict, said.join("; "))
}
