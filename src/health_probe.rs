//! `profcol health`: asks a running collector's `health_check` extension
//! whether it is ready, for container health checks in images without
//! curl or wget (distroless). Plain HTTP/1.1 over one blocking connection:
//! no async runtime and no client library for one GET.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Why the collector is not known to be healthy.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("cannot resolve {0}: {1}")]
    Resolve(String, std::io::Error),
    #[error("{0} resolves to no address")]
    NoAddress(String),
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    #[error("talking to {0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0} did not answer with HTTP: {1:?}")]
    NotHttp(String, String),
    #[error("{0} answered {1}")]
    Unhealthy(String, String),
}

/// GETs `http://endpoint/path`; `Ok` with the status line when it is 200.
pub fn probe(endpoint: &str, path: &str, timeout: Duration) -> Result<String, ProbeError> {
    let target = endpoint.to_string();
    let addr = endpoint
        .to_socket_addrs()
        .map_err(|e| ProbeError::Resolve(target.clone(), e))?
        .next()
        .ok_or_else(|| ProbeError::NoAddress(target.clone()))?;
    let mut conn = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| ProbeError::Connect(target.clone(), e))?;
    let io = |e| ProbeError::Io(target.clone(), e);
    conn.set_read_timeout(Some(timeout)).map_err(io)?;
    conn.set_write_timeout(Some(timeout)).map_err(io)?;
    write!(
        conn,
        "GET {path} HTTP/1.1\r\nHost: {endpoint}\r\nUser-Agent: profcol-health\r\nConnection: close\r\n\r\n"
    )
    .map_err(io)?;
    // The status line is all that matters; the body is a few bytes. A
    // server that closes with part of the request unread resets the
    // connection, which may cut the read short after the answer arrived:
    // what was read by then counts.
    let mut head = Vec::with_capacity(256);
    if let Err(e) = conn.take(4096).read_to_end(&mut head) {
        if head.is_empty() {
            return Err(io(e));
        }
    }
    let text = String::from_utf8_lossy(&head);
    let status = text.lines().next().unwrap_or_default().trim().to_string();
    let code = status
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .ok_or_else(|| ProbeError::NotHttp(target.clone(), status.clone()))?;
    if code == "200" {
        Ok(status)
    } else {
        Err(ProbeError::Unhealthy(target, status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server that answers one connection with `answer`.
    fn answering(answer: &'static str) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (mut c, _) = l.accept().unwrap();
            // The whole request first: closing with some of it unread
            // would reset the connection under the client's read.
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            c.write_all(answer.as_bytes()).unwrap();
        });
        addr
    }

    #[test]
    fn ok_only_on_200() {
        let t = Duration::from_secs(5);
        let up = answering("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}");
        assert_eq!(probe(&up, "/", t).unwrap(), "HTTP/1.1 200 OK");
        let draining = answering("HTTP/1.1 503 Service Unavailable\r\n\r\n");
        let e = probe(&draining, "/", t).unwrap_err().to_string();
        assert!(
            e.ends_with("answered HTTP/1.1 503 Service Unavailable"),
            "{e}"
        );
        let junk = answering("SSH-2.0-OpenSSH\r\n");
        assert!(matches!(probe(&junk, "/", t), Err(ProbeError::NotHttp(..))));
    }

    #[test]
    fn nothing_listening_is_a_connect_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = probe(&format!("127.0.0.1:{port}"), "/", Duration::from_secs(2));
        assert!(matches!(e, Err(ProbeError::Connect(..))), "{e:?}");
    }
}
