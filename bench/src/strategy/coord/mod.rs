//! The coordination services: ZooKeeper's and etcd's locks.

pub(super) mod etcd;
pub(super) mod zookeeper;
