//! Interleaved rounds: for each round, case and request size, profcol and
//! the naive proxy each get a fresh sink, a warm-up and a measured run of
//! the same load; CPU and memory are read from `/proc` for the process
//! under test alone.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic::transport::Channel;

use crate::load::{frame, run_load, Report};
use crate::proc_stats::{cpu_seconds, memory_mib};
use crate::requests::payload;
use crate::sink::Sink;

#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// The profcol binary to measure.
    #[arg(long, default_value = "target/release/profcol")]
    pub profcol: PathBuf,
    /// Comma-separated: passthrough, gzip (pass-through, gzip both ways),
    /// processors, processors-gzip.
    #[arg(long, default_value = "passthrough,gzip,processors,processors-gzip")]
    pub cases: String,
    /// Comma-separated: small, medium, large (or request files).
    #[arg(long, default_value = "small,medium,large")]
    pub sizes: String,
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub warmup: Duration,
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Passed to profcol as --memory-limit-mib.
    #[arg(long)]
    pub memory_limit_mib: Option<u64>,
    /// Comma-separated: profcol, naive, and `base` (another profcol
    /// binary, `--base`, e.g. an earlier build to compare with).
    #[arg(long, default_value = "profcol,naive")]
    pub sides: String,
    /// The profcol binary of the `base` side.
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// After the load, how long to wait before reading the resident memory
    /// again (what the process gives back once idle).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub settle: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    profcol_pipeline::config::Duration::parse(s).map(|d| d.get())
}

/// One measured run.
#[derive(Debug, Clone)]
struct Measured {
    case: String,
    size: String,
    side: String,
    report: Report,
    cpu_s: f64,
    samples_per_request: u64,
    peak_mib: f64,
    /// Resident memory `settle` after the load stopped.
    settled_mib: f64,
}

impl Measured {
    fn cpu_ms_per_request(&self) -> f64 {
        self.cpu_s * 1000.0 / self.report.ok.max(1) as f64
    }
}

pub async fn run(a: Args) -> anyhow::Result<()> {
    let split = |s: &str| -> Vec<String> { s.split(',').map(|x| x.trim().to_owned()).collect() };
    let (cases, sizes, sides) = (split(&a.cases), split(&a.sizes), split(&a.sides));
    let mut all = Vec::new();
    for round in 0..a.rounds {
        for case in &cases {
            for size in &sizes {
                for side in &sides {
                    let m = measure(&a, case, size, side).await?;
                    eprintln!(
                        "round {} {case:<10} {size:<6} {side:<7} {:>8.2} ms CPU/req  {}  peak {:.0} MiB, {:.0} MiB once idle",
                        round + 1,
                        m.cpu_ms_per_request(),
                        m.report,
                        m.peak_mib,
                        m.settled_mib
                    );
                    all.push(m);
                }
            }
        }
    }
    print_table(&all, &cases, &sizes, a.rounds);
    Ok(())
}

async fn measure(a: &Args, case: &str, size: &str, side: &str) -> anyhow::Result<Measured> {
    let p = payload(size)?;
    let compression = if case.ends_with("gzip") {
        "gzip"
    } else {
        "none"
    };
    let framed = frame(&p, compression)?;
    let sink = Sink::start("127.0.0.1:0", false).await?;
    let port = free_port()?;
    let dir = tempfile::tempdir()?;
    let mut child = match side {
        "profcol" | "base" => {
            let cfg = dir.path().join("profcol.yaml");
            std::fs::write(
                &cfg,
                profcol_config(case, port, &sink.addr.to_string(), compression),
            )?;
            let bin = match side {
                "base" => a
                    .base
                    .clone()
                    .ok_or_else(|| anyhow::anyhow!("the base side needs --base"))?,
                _ => a.profcol.clone(),
            };
            let mut cmd = Command::new(bin);
            cmd.arg("--config").arg(&cfg);
            if let Some(m) = a.memory_limit_mib {
                cmd.arg("--memory-limit-mib").arg(m.to_string());
            }
            cmd.env("RUST_LOG", "error")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?
        }
        "naive" => Command::new(std::env::current_exe()?)
            .args([
                "naive",
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--forward",
                &sink.addr.to_string(),
                "--compression",
                compression,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
        other => anyhow::bail!("unknown side {other}"),
    };
    let result = async {
        let channel = connect(port).await?;
        run_load(
            channel.clone(),
            &framed,
            compression,
            a.concurrency,
            a.warmup,
            None,
        )
        .await?;
        let pid = child.id();
        let cpu0 = cpu_seconds(pid);
        let report = run_load(
            channel,
            &framed,
            compression,
            a.concurrency,
            a.duration,
            None,
        )
        .await?;
        let cpu_s = cpu_seconds(pid) - cpu0;
        let (peak_mib, _) = memory_mib(pid);
        tokio::time::sleep(a.settle).await;
        let (_, settled_mib) = memory_mib(pid);
        anyhow::Ok(Measured {
            case: case.to_owned(),
            size: size.to_owned(),
            side: side.to_owned(),
            report,
            cpu_s,
            samples_per_request: p.samples,
            peak_mib,
            settled_mib,
        })
    }
    .await;
    stop(&mut child);
    result
}

fn profcol_config(case: &str, port: u16, sink: &str, compression: &str) -> String {
    let (processors, list) = if case.starts_with("processors") {
        (
            r#"
processors:
  dictionary_dedup: {}
  unit_normalization: {target: ucum}
  thread_pruning: {rename_threads: [{pattern: 'worker-\d+', replacement: 'worker-*'}]}
  sampling: {sampling_percentage: 100, mode: session}
"#,
            "[dictionary_dedup, unit_normalization, thread_pruning, sampling]",
        )
    } else {
        ("", "[]")
    };
    format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:{port}"}}}}}}
{processors}
exporters:
  otlp: {{endpoint: "{sink}", tls: {{insecure: true}}, compression: {compression}}}
service:
  telemetry: {{metrics: {{level: none}}, logs: {{level: error}}}}
  pipelines:
    profiles: {{receivers: [otlp], processors: {list}, exporters: [otlp]}}
"#
    )
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

async fn connect(port: u16) -> anyhow::Result<Channel> {
    let started = Instant::now();
    loop {
        match Channel::from_shared(format!("http://127.0.0.1:{port}"))?
            .connect()
            .await
        {
            Ok(c) => return Ok(c),
            Err(e) if started.elapsed() > Duration::from_secs(20) => return Err(e.into()),
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

fn stop(child: &mut Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn print_table(all: &[Measured], cases: &[String], sizes: &[String], rounds: usize) {
    println!(
        "\n| case | size | profcol CPU/req | naive CPU/req | profcol / naive (each round) | profcol samples/s/core | p50 / p99 profcol | p50 / p99 naive | peak RSS profcol / naive | RSS once idle profcol / naive |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for case in cases {
        for size in sizes {
            let of = |side: &str| -> Vec<&Measured> {
                all.iter()
                    .filter(|m| &m.case == case && &m.size == size && m.side == side)
                    .collect()
            };
            let (p, n) = (of("profcol"), of("naive"));
            let base = of("base");
            if !base.is_empty() {
                let ratios: Vec<String> = (0..rounds)
                    .filter_map(|r| {
                        let (a, b) = (p.get(r)?, base.get(r)?);
                        Some(format!(
                            "{:.2}",
                            a.cpu_ms_per_request() / b.cpu_ms_per_request()
                        ))
                    })
                    .collect();
                let peak = |ms: &[&Measured]| ms.iter().map(|m| m.peak_mib).fold(0.0, f64::max);
                println!(
                    "| {case} | {size} | profcol / base CPU per request: {} (base {:.2} ms, peak {:.0} MiB) |",
                    ratios.join(", "),
                    median(base.iter().map(|m| m.cpu_ms_per_request()).collect()),
                    peak(&base)
                );
            }
            let cpu =
                |ms: &[&Measured]| median(ms.iter().map(|m| m.cpu_ms_per_request()).collect());
            let ratios: Vec<String> = (0..rounds)
                .filter_map(|r| {
                    let (a, b) = (p.get(r)?, n.get(r)?);
                    Some(format!(
                        "{:.2}",
                        a.cpu_ms_per_request() / b.cpu_ms_per_request()
                    ))
                })
                .collect();
            let per_core = median(
                p.iter()
                    .map(|m| (m.report.ok * m.samples_per_request) as f64 / m.cpu_s.max(1e-9))
                    .collect(),
            );
            let lat = |ms: &[&Measured]| {
                let med = |f: &dyn Fn(&Report) -> Duration| {
                    median(
                        ms.iter()
                            .map(|m| f(&m.report).as_secs_f64() * 1000.0)
                            .collect(),
                    )
                };
                format!(
                    "{:.1} / {:.1} ms",
                    med(&|r| r.percentile(0.5)),
                    med(&|r| r.percentile(0.99))
                )
            };
            let peak = |ms: &[&Measured]| ms.iter().map(|m| m.peak_mib).fold(0.0, f64::max);
            let settled = |ms: &[&Measured]| ms.iter().map(|m| m.settled_mib).fold(0.0, f64::max);
            println!(
                "| {case} | {size} | {:.2} ms | {:.2} ms | {} | {:.2} M | {} | {} | {:.0} / {:.0} MiB | {:.0} / {:.0} MiB |",
                cpu(&p),
                cpu(&n),
                ratios.join(", "),
                per_core / 1e6,
                lat(&p),
                lat(&n),
                peak(&p),
                peak(&n),
                settled(&p),
                settled(&n)
            );
        }
    }
}
