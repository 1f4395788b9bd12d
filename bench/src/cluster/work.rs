//! The work a service's servers did, read through the registry: which services a strategy's
//! lock and store live on, and the entry points the run calls. The shared types and the
//! parsers of the counters' text formats are in `counters.rs`, below the services.

use std::time::Duration;

pub use super::counters::{BYTES_IN, BYTES_OUT, CPU_US, FSYNCS, Meter, Reading, TOTAL};
use super::model::{Endpoints, Needs, Service};
use super::registry;

/// Bound of one reading of every node of a service.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// The services whose servers hold a strategy's lock when it `needs` these (the store,
/// MariaDB, apart: see [`store_service`]); empty for a strategy whose lock lives in the store.
pub fn lock_services(needs: Needs) -> Vec<Service> {
    registry::ALL
        .into_iter()
        .filter(|k| k.service() != Service::Mariadb && k.wanted(needs))
        .map(|k| k.service())
        .collect()
}

/// The store's service, when the strategy needs one.
pub fn store_service(needs: Needs) -> Option<Service> {
    needs.mariadb.then_some(Service::Mariadb)
}

/// What `service`'s counters count; `None` when lockbench reads none of it.
pub fn meter(service: Service) -> Option<Meter> {
    registry::kind(service).work_meter()
}

/// `service`'s counters now, on its servers in `ep`, bounded by [`READ_TIMEOUT`]; the error
/// says why they could not be read (a login without the right, a server that does not answer).
pub async fn read(service: Service, ep: &Endpoints) -> Result<Reading, String> {
    tokio::time::timeout(READ_TIMEOUT, registry::kind(service).work(ep))
        .await
        .map_err(|_| format!("{service}: counters not read within {READ_TIMEOUT:?}"))?
        .map_err(|e| format!("{service}: {e}"))
}
