//! Integration tests against real servers (MariaDB, Redis, a ZooKeeper ensemble and an etcd
//! cluster, all started by the harness), one module per area; the helpers they share are in
//! `common`.
//!
//! They never skip silently: without the server packages they fail when `CI` is set and print
//! why they skipped otherwise (`common::require`).

mod calibrate;
mod chaos;
mod cli;
mod cluster;
mod common;
mod containers;
mod contend;
mod contention;
mod danger;
mod durability;
mod environment;
mod etcd;
mod libraries;
mod lifecycle;
mod locks;
mod pay;
mod pg_strategies;
mod pooler;
mod postgres;
mod power;
mod reads;
mod reconnect;
mod remote;
mod reproduce;
mod rough_edges;
mod rwlocks;
mod sale;
mod sale_redis;
mod secrets;
mod server_work;
mod sweep;
mod target;
mod ttl;
mod versions;
mod waiting;
