//! A load generator: `concurrency` requests in flight on one HTTP/2
//! connection for `duration`, each the same request, framed and compressed
//! once up front so that the generator itself costs little CPU.

use std::io::Write;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::BodyExt;
use tonic::transport::Channel;
use tower::{Service, ServiceExt};

use profcol_model::proto::EXPORT_PATH;

use crate::requests::{payload, Payload};

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// `host:port` of the OTLP gRPC endpoint.
    #[arg(long)]
    pub target: String,
    /// `small`, `medium`, `large` or a request file.
    #[arg(long, default_value = "medium")]
    pub request: String,
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// none, gzip or zstd.
    #[arg(long, default_value = "none")]
    pub compression: String,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    profcol_pipeline::config::Duration::parse(s).map(|d| d.get())
}

/// What a load run saw.
#[derive(Debug, Default, Clone)]
pub struct Report {
    pub ok: u64,
    /// Of `ok`, the first client's (the one that sends its own request in
    /// a mixed load, `A+B`).
    pub first_ok: u64,
    pub failed: u64,
    /// gRPC status codes of failures, with counts.
    pub failures: Vec<(i32, u64)>,
    pub latencies: Vec<Duration>,
    pub elapsed: Duration,
}

impl Report {
    pub fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let mut l = self.latencies.clone();
        l.sort();
        l[((l.len() - 1) as f64 * p).round() as usize]
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ok, {} failed {:?} in {:.1?}: {:.1} req/s, p50 {:.1?}, p99 {:.1?}",
            self.ok,
            self.failed,
            self.failures,
            self.elapsed,
            self.ok as f64 / self.elapsed.as_secs_f64(),
            self.percentile(0.5),
            self.percentile(0.99)
        )
    }
}

/// The gRPC frame of `p`: flag, length, message (compressed when asked).
pub fn frame(p: &Payload, compression: &str) -> anyhow::Result<Bytes> {
    frame_bytes(&p.bytes, compression)
}

/// The gRPC frame of a message, compressed at level 1 (gzip, zstd) as
/// profcol compresses.
pub fn frame_bytes(message: &[u8], compression: &str) -> anyhow::Result<Bytes> {
    let body: Vec<u8> = match compression {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(message)?;
            e.finish()?
        }
        "zstd" => zstd::encode_all(message, 1)?,
        "none" | "" => message.to_vec(),
        other => anyhow::bail!("unknown compression {other}"),
    };
    let mut out = BytesMut::with_capacity(body.len() + 5);
    out.put_u8(u8::from(compression != "none" && !compression.is_empty()));
    out.put_u32(body.len() as u32);
    out.put_slice(&body);
    Ok(out.freeze())
}

pub async fn load(a: &Args) -> anyhow::Result<Report> {
    let p = payload(&a.request)?;
    let framed = frame(&p, &a.compression)?;
    let channel = Channel::from_shared(format!("http://{}", a.target))?
        .connect()
        .await?;
    run_load(
        channel,
        std::slice::from_ref(&framed),
        &a.compression,
        a.concurrency,
        a.duration,
        None,
    )
    .await
}

/// Sends `frames` with `concurrency` in flight until `duration` has passed
/// (or `stop` fires): the first client sends the first of them, the others
/// the last (one request for all, or a mixed load).
pub async fn run_load(
    channel: Channel,
    frames: &[Bytes],
    compression: &str,
    concurrency: usize,
    duration: Duration,
    stop: Option<tokio_util::sync::CancellationToken>,
) -> anyhow::Result<Report> {
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for task in 0..concurrency {
        let framed = if task == 0 {
            &frames[0]
        } else {
            &frames[frames.len() - 1]
        };
        let (channel, framed, enc, stop) = (
            channel.clone(),
            framed.clone(),
            compression.to_owned(),
            stop.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut r = Report::default();
            while Instant::now() < deadline && !stop.as_ref().is_some_and(|s| s.is_cancelled()) {
                let t = Instant::now();
                match export(channel.clone(), framed.clone(), &enc).await {
                    Ok(0) => {
                        r.ok += 1;
                        r.latencies.push(t.elapsed());
                    }
                    Ok(code) | Err(code) => {
                        r.failed += 1;
                        match r.failures.iter_mut().find(|(c, _)| *c == code) {
                            Some((_, n)) => *n += 1,
                            None => r.failures.push((code, 1)),
                        }
                        // A refusal is usually "retry later": do not spin.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            r
        }));
    }
    let mut total = Report::default();
    for (task, t) in tasks.into_iter().enumerate() {
        let r = t.await?;
        if task == 0 {
            total.first_ok = r.ok;
        }
        total.ok += r.ok;
        total.failed += r.failed;
        for (c, n) in r.failures {
            match total.failures.iter_mut().find(|(x, _)| *x == c) {
                Some((_, m)) => *m += n,
                None => total.failures.push((c, n)),
            }
        }
        total.latencies.extend(r.latencies);
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// One export; `Ok(grpc-status)`, or `Err(-1)` when the call itself failed.
pub async fn export(mut channel: Channel, framed: Bytes, compression: &str) -> Result<i32, i32> {
    let mut req = http::Request::builder()
        .method("POST")
        .uri(EXPORT_PATH)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    if compression != "none" && !compression.is_empty() {
        req = req.header("grpc-encoding", compression);
    }
    let req = req
        .body(tonic::body::Body::new(http_body_util::Full::new(framed)))
        .map_err(|_| -1)?;
    let resp = channel
        .ready()
        .await
        .map_err(|_| -1)?
        .call(req)
        .await
        .map_err(|_| -1)?;
    let status_of = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<i32>().ok())
    };
    if let Some(s) = status_of(resp.headers()) {
        return Ok(s);
    }
    let collected = resp.into_body().collect().await.map_err(|_| -1)?;
    Ok(collected.trailers().and_then(status_of).unwrap_or(-1))
}
