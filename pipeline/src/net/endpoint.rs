//! `host:port` endpoints as the Collector writes them.

/// Checks `host:port` without resolving the host.
pub fn check(endpoint: &str) -> Result<(), String> {
    let Some((host, port)) = endpoint.rsplit_once(':') else {
        return Err(format!("invalid endpoint {endpoint:?}: expected host:port"));
    };
    if port.parse::<u16>().is_err() {
        return Err(format!("invalid endpoint {endpoint:?}: bad port {port:?}"));
    }
    if host.contains(char::is_whitespace) {
        return Err(format!("invalid endpoint {endpoint:?}: bad host {host:?}"));
    }
    Ok(())
}

/// Whether two endpoints would listen on one port of one address (an
/// empty host or `0.0.0.0` covers every address; port 0 is whichever port
/// is free when each binds, never the same).
pub fn same_port(a: &str, b: &str) -> bool {
    let split = |e: &str| {
        e.rsplit_once(':')
            .map(|(h, p)| (h.to_owned(), p.to_owned()))
    };
    match (split(a), split(b)) {
        (Some((ha, pa)), Some((hb, pb))) if pa == pb && pa != "0" => {
            let any = |h: &str| h.is_empty() || h == "0.0.0.0" || h == "[::]";
            let norm = |h: &str| {
                if h == "localhost" {
                    "127.0.0.1".to_owned()
                } else {
                    h.to_owned()
                }
            };
            any(&ha) || any(&hb) || norm(&ha) == norm(&hb)
        }
        _ => false,
    }
}

/// Binds a TCP listener, resolving host names such as `localhost`.
pub async fn bind(endpoint: &str, owner: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(&*crate::config::listen_address(endpoint))
        .await
        .map_err(|e| anyhow::anyhow!("{owner}: cannot listen on {endpoint}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_read_as_the_collector_reads_them() {
        for ok in ["0.0.0.0:4317", ":4317", "localhost:3000", "[::1]:13133"] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in ["4317", "host:port", "host:70000", "a b:1"] {
            assert!(check(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn port_zero_never_clashes() {
        assert!(same_port("127.0.0.1:4317", ":4317"));
        assert!(!same_port("127.0.0.1:0", "127.0.0.1:0"));
    }

    #[tokio::test]
    async fn an_empty_host_listens_on_every_interface() {
        let l = bind(":0", "test").await.unwrap();
        assert!(l.local_addr().unwrap().ip().is_unspecified());
    }
}
