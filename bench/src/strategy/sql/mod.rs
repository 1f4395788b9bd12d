//! The SQL family: the stores in MariaDB/MySQL and PostgreSQL, the buyers' connections, and
//! the strategies on them.

mod buyers;
pub mod mysql;
pub mod mysql_lock_table;
pub(super) mod mysql_strategies;
pub mod postgres;
pub(super) mod postgres_advisory;
pub(super) mod postgres_strategies;
pub(super) mod postgres_units;
