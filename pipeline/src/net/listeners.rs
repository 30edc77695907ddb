//! Where each listener of a running collector is bound. An endpoint with
//! port 0 (`127.0.0.1:0`) takes a free port when it binds, so the address
//! is only known afterwards: every listener logs it (`listening`,
//! `listener=receivers::otlp::protocols::grpc address=127.0.0.1:41234`),
//! and the service that started it lists it
//! (`RunningService::listeners`, the binary's `--ready-file`). Choosing a
//! free port beforehand instead (bind, close, hand the number on) races
//! with every other process that does the same.
//!
//! The service makes its [`Listeners`] current for the task that starts
//! its components ([`Listeners::scope`]); [`super::spawn`] records into it,
//! so components need not carry it through their start functions.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// One bound listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    /// The component and protocol it serves, as logs name it
    /// (`receivers::otlp::protocols::http`, `extensions::health_check`,
    /// `service::telemetry::metrics`).
    pub name: String,
    pub address: SocketAddr,
}

/// The listeners of one running collector, in the order they were bound.
#[derive(Clone, Default)]
pub struct Listeners(Arc<Mutex<Vec<(Bound, CancellationToken)>>>);

tokio::task_local! {
    static CURRENT: Listeners;
}

impl Listeners {
    /// Runs `f` (a service starting or reloading components) with listeners
    /// bound in its task recorded here.
    pub async fn scope<F: std::future::Future>(&self, f: F) -> F::Output {
        CURRENT.scope(self.clone(), f).await
    }

    /// The listeners still serving (one whose shutdown has fired, as a
    /// receiver a reload replaced, is left out).
    pub fn list(&self) -> Vec<Bound> {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|(_, stop)| !stop.is_cancelled());
        all.iter().map(|(b, _)| b.clone()).collect()
    }

    /// The address of the listener named `name`.
    pub fn address(&self, name: &str) -> Option<SocketAddr> {
        self.list()
            .into_iter()
            .find(|b| b.name == name)
            .map(|b| b.address)
    }
}

/// Logs the listener `name` bound at `address` and records it in the
/// current service's [`Listeners`] until `shutdown`.
pub(super) fn announce(name: &str, address: SocketAddr, shutdown: &CancellationToken) {
    tracing::info!(listener = name, address = %address, "listening");
    let bound = Bound {
        name: name.to_owned(),
        address,
    };
    let _ = CURRENT.try_with(|l| {
        l.0.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((bound, shutdown.clone()))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_listener_is_listed_until_its_shutdown() {
        let listeners = Listeners::default();
        let stop = CancellationToken::new();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut task = None;
        listeners
            .scope(async {
                task = Some(super::super::spawn(
                    "receivers::test",
                    listener,
                    axum::Router::new(),
                    super::super::ServerSettings::small(),
                    stop.clone(),
                ));
            })
            .await;
        let task = task.unwrap();
        assert_eq!(listeners.address("receivers::test"), Some(addr));
        assert_ne!(addr.port(), 0);
        stop.cancel();
        task.await.unwrap();
        assert_eq!(listeners.list(), vec![]);
    }
}
