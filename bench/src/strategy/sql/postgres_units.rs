//! `pg-skip-locked`: one row per unit of stock, `<prefix>_units(sku, unit, order_id)`. A buyer
//! takes any free unit with `… WHERE sku = $1 AND order_id IS NULL LIMIT 1 FOR UPDATE SKIP
//! LOCKED`, holds it for the business time, inserts its order and marks the unit sold with the
//! order's id, in one transaction.
//!
//! Why, against the stock-counter designs: with a counter every buyer of a SKU queues on one
//! hot row (`pg-for-update` holds it across the business time, `pg-atomic` for the update and
//! commit), so a SKU sells one unit at a time. Here buyers of one SKU lock different rows and
//! never wait on each other: `SKIP LOCKED` passes over units others hold, so a SKU sells as many
//! units at once as it has buyers (up to its stock). The costs: a row per unit (stock rows,
//! seeded before the sale: millions for a large catalogue), a partial index over the free units
//! so a take does not scan the sold ones, and "no row" is read as sold out even when the last
//! units are only held by buyers whose transactions may still roll back (a buyer then misses
//! a unit that becomes free again a moment later: availability, never safety).
//!
//! The audit keeps the counters' meaning: a SKU's final stock is its free units, its sales are
//! its orders; so more orders than units is oversell, and an order whose unit is not marked (a
//! unit sold twice, its mark overwritten; an order without a unit) is a lost update.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::PgConnection;
use sqlx::{Connection, SqlSafeStr, SqlStr};

use super::postgres::{PgStore, SharedPgStore, classify, sku};
use super::postgres_strategies::NONE;
use super::store::{Arg, Dialect, write_failure};
use super::strategies::token;
use crate::check::SkuAudit;
use crate::record::Outcome;
use crate::record::trips::one;
use crate::strategy::entry::{Kind, StrategyInfo};
use crate::strategy::{Attempt, Purchase, Store, Strategy, StrategyError, calls, within};
use crate::workload::Workload;

/// `pg-skip-locked`.
pub const SKIP_LOCKED: StrategyInfo = StrategyInfo {
    id: "pg-skip-locked",
    kind: Kind::LockFree,
    about: "one row per unit; take a free one with FOR UPDATE SKIP LOCKED, mark it sold with the \
            order in one transaction (the job-queue idiom of Oban, pg-boss, Solid Queue)",
    build: |s| {
        Box::pin(async move {
            let units = Arc::new(Units::new(s.postgres().await?, s.w));
            Ok(s.on_store(SkipLocked(units.clone()), units))
        })
    },
    ..NONE
};

/// The unit rows beside the PostgreSQL store's orders.
pub struct Units {
    pg: SharedPgStore,
    hold: Duration,
    take: SqlStr,
    mark: SqlStr,
}

impl Units {
    fn new(pg: SharedPgStore, w: &Workload) -> Self {
        let units = &pg.sql.units;
        let s = |text: String| sqlx::AssertSqlSafe(text).into_sql_str();
        Self {
            take: s(format!(
                "SELECT unit FROM {units} WHERE sku = $1 AND order_id IS NULL \
                 LIMIT 1 FOR UPDATE SKIP LOCKED"
            )),
            mark: s(format!(
                "UPDATE {units} SET order_id = $1 WHERE sku = $2 AND unit = $3"
            )),
            hold: w.critical_section.hold,
            pg,
        }
    }

    /// Takes a free unit, holds, writes the order and marks the unit, in the caller's
    /// transaction; `SoldOut` when no unit is free (or every free one is held by others).
    async fn sell(&self, tx: &mut PgConnection, p: &Purchase<'_>) -> Result<Outcome, Outcome> {
        let s: &PgStore = &self.pg;
        let unit = within(s.timeout, self.take(tx, p), classify)
            .await
            .map_err(Outcome::Failed)?;
        let Some(unit) = unit else {
            return Ok(Outcome::SoldOut);
        };
        crate::chaos::holder::reached(crate::chaos::holder::Point::AfterRead);
        tokio::time::sleep(self.hold).await;
        let order = s
            .insert_order(tx, p, &token(p))
            .await
            .map_err(write_failure)?
            .expect("PostgreSQL's insert returns the order's id");
        within(s.timeout, self.mark(tx, p, order, unit), classify)
            .await
            .map_err(write_failure)?;
        Ok(Outcome::Sold)
    }

    /// A free unit of `p`'s SKU, locked; a simple query behind a transaction pooler
    /// ([`super::postgres::PgSession`]).
    async fn take(
        &self,
        tx: &mut PgConnection,
        p: &Purchase<'_>,
    ) -> Result<Option<i32>, sqlx::Error> {
        crate::record::trips::trip(); // one statement, whichever form
        let args = [Arg::Sku(p.sku)];
        let Some(text) = self.pg.dialect().inlined(self.take.as_str(), &args) else {
            let take = sqlx::query_scalar::<_, i32>(self.take.clone()).bind(sku(p));
            return take.fetch_optional(tx).await;
        };
        let row = sqlx::raw_sql(sqlx::AssertSqlSafe(text))
            .fetch_optional(tx)
            .await?;
        row.map(|r| sqlx::Row::try_get::<i32, _>(&r, 0)).transpose()
    }

    /// Marks `unit` sold to `order`.
    async fn mark(
        &self,
        tx: &mut PgConnection,
        p: &Purchase<'_>,
        order: i64,
        unit: i32,
    ) -> Result<u64, sqlx::Error> {
        let args = [Arg::Int(order), Arg::Sku(p.sku), Arg::Int(unit.into())];
        if self
            .pg
            .dialect()
            .inlined(self.mark.as_str(), &args)
            .is_some()
        {
            return self
                .pg
                .dialect()
                .execute(tx, self.mark.clone(), &args)
                .await;
        }
        let mark = (sqlx::query(self.mark.clone()).bind(order))
            .bind(sku(p))
            .bind(unit);
        one(mark.execute(tx)).await.map(|d| d.rows_affected())
    }
}

#[async_trait]
impl Store for Units {
    /// The orders table and `stock` unit rows per SKU, plus the partial index of free units.
    async fn prepare(&self, stock: &[u64]) -> Result<(), StrategyError> {
        let units = &self.pg.sql.units;
        let mut ddl = self.pg.orders_ddl();
        ddl.push(format!(
            "CREATE TABLE {units} (sku INT NOT NULL, unit INT NOT NULL, order_id BIGINT, \
             PRIMARY KEY (sku, unit))"
        ));
        // One statement per run of SKUs with the same stock (one in all for an even stock).
        let mut from = 0;
        for run in stock.chunk_by(|a, b| a == b) {
            let (to, qty) = (from + run.len() - 1, run[0]);
            ddl.push(format!(
                "INSERT INTO {units} (sku, unit) SELECT s, u \
                 FROM generate_series({from}, {to}) s, generate_series(1, {qty}) u"
            ));
            from = to + 1;
        }
        ddl.push(format!(
            "CREATE INDEX ON {units} (sku, unit) WHERE order_id IS NULL"
        ));
        self.pg.admin(&ddl).await
    }

    /// Final stock: the free units; sold: the orders.
    async fn audit(&self, skus: u32) -> Result<Vec<SkuAudit>, StrategyError> {
        let units = &self.pg.sql.units;
        let free = format!(
            "SELECT sku, COUNT(*) FILTER (WHERE order_id IS NULL) FROM {units} GROUP BY sku"
        );
        let free = self.pg.counts(free).await?;
        Ok(crate::strategy::audits(
            skus,
            free,
            self.pg.orders_per_sku().await?,
        ))
    }

    async fn close(&self) {
        self.pg.close().await
    }
}

/// `pg-skip-locked`'s purchase.
pub struct SkipLocked(Arc<Units>);

#[async_trait]
impl Strategy for SkipLocked {
    /// Connection, begin, take, hold, insert, mark, commit.
    fn bound(&self) -> Duration {
        calls(6, self.0.pg.timeout) + self.0.hold
    }

    async fn attempt(&self, p: &Purchase) -> Attempt {
        let s = &self.0.pg;
        let sell = async |con: &mut PgConnection| {
            let mut tx = within(s.timeout, one(con.begin()), classify)
                .await
                .map_err(Outcome::Failed)?;
            match self.0.sell(&mut tx, p).await? {
                Outcome::Sold => within(s.timeout, one(tx.commit()), classify)
                    .await
                    .map(|()| Outcome::Sold)
                    .map_err(write_failure),
                other => within(s.timeout, one(tx.rollback()), classify)
                    .await
                    .map(|()| other)
                    .map_err(Outcome::Failed),
            }
        };
        s.in_transaction(p.client, sell).await.into()
    }
}

#[cfg(test)]
mod tests {
    use crate::check::Safety;
    use crate::strategy::audits;

    /// The per-unit audit read as the counters' one: free units are the stock left, orders
    /// are the sales.
    #[test]
    fn unit_rows_map_onto_oversell_and_lost_updates() {
        // 3 units: 2 sold and marked, 1 free, 2 orders: intact.
        let ok = Safety::judge(&[3; 1], &audits(1, [(0, 1)], [(0, 2)]));
        assert_eq!((ok.oversell, ok.lost_updates), (0, 0));
        assert!(ok.is_intact());
        // A unit sold twice: two orders, its mark overwritten, so one unit marked.
        let twice = Safety::judge(&[3; 1], &audits(1, [(0, 2)], [(0, 2)]));
        assert_eq!((twice.oversell, twice.lost_updates), (0, 1));
        // More orders than units: every unit marked, one order too many.
        let over = Safety::judge(&[3; 1], &audits(1, [(0, 0)], [(0, 4)]));
        assert_eq!((over.oversell, over.lost_updates), (1, 1));
        // A SKU nobody bought: all its units free, no order row at all.
        let idle = Safety::judge(&[3; 2], &audits(2, [(0, 3), (1, 3)], []));
        assert!(idle.is_intact());
    }
}
