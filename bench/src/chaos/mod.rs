//! Chaos: what breaks, when, and how it is healed.
//!
//! Today this holds [`failpoint`]s — named places in the client code where a fault can be
//! injected at an exact moment (etcd's gofail idea), such as "the client dies between SETNX and
//! EXPIRE". Scheduled faults against servers and clients (kill, pause, partition, clock) arrive
//! with the chaos milestone and will live here too.

pub mod failpoint;

pub use failpoint::failpoint;
