//! `host:port` endpoints as the Collector reads them.

use std::borrow::Cow;

/// The address to bind: as Go's `net.Listen`, which the Collector uses, an
/// empty host (`:4317`) means every interface.
pub fn listen_address(endpoint: &str) -> Cow<'_, str> {
    if endpoint.starts_with(':') {
        format!("0.0.0.0{endpoint}").into()
    } else {
        endpoint.into()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_empty_host_is_every_interface() {
        assert_eq!(super::listen_address(":4317"), "0.0.0.0:4317");
        assert_eq!(super::listen_address("127.0.0.1:1"), "127.0.0.1:1");
    }
}
