//! The Redis family: one connection layer and the locks and lock-free strategies on Redis,
//! Sentinel, Redis Cluster and Redlock's independent masters. Their Lua scripts stay in
//! `strategy/lua/`, where scripts and examples load them too.

pub(super) mod cluster;
mod conn;
pub(super) mod lua_decr;
pub mod redlock;
pub mod reentrant;
pub(super) mod rwlock;
pub(super) mod setnx;
