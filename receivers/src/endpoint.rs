//! `host:port` endpoints as the Collector writes them.

/// Checks `host:port` without resolving the host.
pub fn check(endpoint: &str) -> Result<(), String> {
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        return Err(format!("invalid endpoint {endpoint:?}: expected host:port"));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!("invalid endpoint {endpoint:?}: bad port {port:?}"));
    }
    if host.is_empty() {
        return Err(format!(
            "invalid endpoint {endpoint:?}: missing host (use 0.0.0.0 for every interface)"
        ));
    }
    Ok(())
}

/// Binds a TCP listener, resolving host names such as `localhost`.
pub async fn bind(endpoint: &str, owner: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(endpoint)
        .await
        .map_err(|e| anyhow::anyhow!("{owner}: cannot listen on {endpoint}: {e}"))
}
