//! One module per service, each holding everything lockbench knows about it: its nodes,
//! flags and readiness, its leader, its slots, its durability, its work counters, and its
//! claim, clean-up and description on an external target. Each implements `kind.rs`'s
//! `ServiceKind` and has one line in `registry.rs`; they import the rooms of `cluster/`
//! below them (model, backends, counters), never `registry.rs` or `work.rs`.

pub mod etcd;
pub mod mariadb;
pub mod postgres;
pub mod redis;
pub mod redis_cluster;
pub mod sentinel;
pub mod zookeeper;
