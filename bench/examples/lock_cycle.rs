//! Where does the 1-client lock cycle's time go? Runs the uncontended redis-setnx cycle
//! (SET NX PX, then the compare-and-delete unlock script) against one Redis with nothing else
//! around it, through each connection the redis crate offers, alternating rounds, and prints
//! cycles per second. scripts/bench-overhead.sh prints it beside redis-benchmark and lockbench.
//!
//! Usage: lock_cycle <redis port> [seconds per variant = 3] [rounds = 3]

use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};

const UNLOCK: &str = include_str!("../src/strategy/lua/unlock.lua");

/// Cycles per second of the lock cycle on `con` (an async connection), back to back for `secs`.
async fn rate<C>(secs: Duration, con: C, unlock: &redis::Script) -> f64
where
    C: redis::aio::ConnectionLike + Clone + Send + Sync,
{
    let started = Instant::now();
    let mut n = 0u64;
    while started.elapsed() < secs {
        let (mut con, key) = (con.clone(), format!("lockbench:cycle:{n}"));
        let _: Option<String> = set(&key).query_async(&mut con).await.unwrap();
        let _: i64 = unlock
            .key(&key)
            .arg("token")
            .invoke_async(&mut con)
            .await
            .unwrap();
        n += 1;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

fn set(key: &str) -> redis::Cmd {
    redis::cmd("SET")
        .arg(key)
        .arg("token")
        .arg("NX")
        .arg("PX")
        .arg(5000)
        .to_owned()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let port: u16 = args
        .next()
        .and_then(|p| p.parse().ok())
        .expect("usage: lock_cycle <redis port> [seconds] [rounds]");
    let secs = Duration::from_secs(args.next().and_then(|s| s.parse().ok()).unwrap_or(3));
    let rounds: u32 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3);
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
    let unlock = redis::Script::new(UNLOCK);
    // The runtime lockbench uses: one thread.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut results: Vec<(&str, Vec<f64>)> = vec![
        ("connection manager (crate's 500 ms response timer)", vec![]),
        ("connection manager (no response timer)", vec![]),
        ("multiplexed connection", vec![]),
        ("blocking connection (no runtime)", vec![]),
    ];
    let untimed = ConnectionManagerConfig::new().set_response_timeout(None);
    for _ in 0..rounds {
        let manager: ConnectionManager = rt.block_on(client.get_connection_manager()).unwrap();
        results[0].1.push(rt.block_on(rate(secs, manager, &unlock)));
        let manager: ConnectionManager = rt
            .block_on(client.get_connection_manager_with_config(untimed.clone()))
            .unwrap();
        results[1].1.push(rt.block_on(rate(secs, manager, &unlock)));
        let mux: MultiplexedConnection = rt
            .block_on(client.get_multiplexed_async_connection())
            .unwrap();
        results[2].1.push(rt.block_on(rate(secs, mux, &unlock)));
        let mut con = client.get_connection().unwrap();
        let started = Instant::now();
        let mut n = 0u64;
        while started.elapsed() < secs {
            let key = format!("lockbench:cycle:{n}");
            let _: Option<String> = set(&key).query(&mut con).unwrap();
            let _: i64 = unlock.key(&key).arg("token").invoke(&mut con).unwrap();
            n += 1;
        }
        results[3]
            .1
            .push(n as f64 / started.elapsed().as_secs_f64());
    }
    for (name, mut rates) in results {
        rates.sort_by(f64::total_cmp);
        println!("{name}\t{:.1}", rates[rates.len() / 2]);
    }
}
