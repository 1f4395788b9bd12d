//! The SQL family: one store over MariaDB/MySQL and PostgreSQL (`store.rs`, generic over a
//! `Dialect`: `mysql.rs`, `postgres.rs`), the buyers' connections, the strategies written once
//! for both (`strategies.rs`: the `none` controls, the atomic update), and those of one dialect;
//! `pay.rs`: reserve, then pay (`[pay]`), the payments and reapers on the MariaDB store.

mod buyers;
pub mod mysql;
pub mod mysql_lock_table;
pub(super) mod mysql_strategies;
pub mod pay;
pub mod postgres;
pub(super) mod postgres_advisory;
pub(super) mod postgres_strategies;
pub(super) mod postgres_units;
mod store;
mod strategies;

pub use postgres_advisory::holds_a_session_lock;
pub use store::{Arg, Db, Dialect, Guard, Sale, SqlStore, Statements, Written};
