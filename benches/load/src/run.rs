//! Interleaved rounds: for each round, case and request size, profcol and
//! the naive proxy each get a fresh sink, a warm-up and a measured run of
//! the same load; CPU and memory are read from `/proc` for the process
//! under test alone.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tonic::transport::Channel;

use crate::kafka::{Broker, MAX_MESSAGE_BYTES};
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
    /// processors (profcol's four), processors-gzip, memory_limiter,
    /// resource, transform and filter (the Collector's processors: resource
    /// attributes set by both, or a resource condition that matches
    /// nothing, in profcol and the Collector alike), resource-gzip, batch
    /// (the Collector's, with its defaults; not in the Collector side),
    /// kafka-export (OTLP in, the `kafka` exporter out to a local broker),
    /// kafka-receive (the `kafka` receiver reading a filled topic, OTLP
    /// out); the kafka cases are also given as ratios to passthrough.
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
    /// Comma-separated: profcol, naive, `otelcol` (the real Collector, the
    /// pinned build of tests/otelcol) and `base` (another profcol binary,
    /// `--base`, e.g. an earlier build to compare with).
    #[arg(long, default_value = "profcol,naive")]
    pub sides: String,
    /// The profcol binary of the `base` side.
    #[arg(long)]
    pub base: Option<PathBuf>,
    /// The Collector binary of the `otelcol` side; default: what
    /// tests/otelcol/build.sh builds (or finds in its cache).
    #[arg(long)]
    pub otelcol: Option<PathBuf>,
    /// Messages the kafka-receive case reads when no passthrough run of
    /// the same size and round came before it (else: as many as that run
    /// delivered, warm-up included).
    #[arg(long, default_value_t = 1000)]
    pub kafka_messages: u64,
    /// The kafka cases' `producer.compression` (none, gzip, snappy, lz4,
    /// zstd): of the exporter, and of the messages kafka-receive reads.
    #[arg(long, default_value = "none")]
    pub kafka_compression: String,
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
    /// From the measured window's start until its last request was
    /// delivered (to the sink, or to the broker).
    wall_s: f64,
    cpu_s: f64,
    /// The broker's CPU in the window, in the kafka cases.
    broker_cpu_s: f64,
    samples_per_request: u64,
    peak_mib: f64,
    /// Resident memory `settle` after the load stopped.
    settled_mib: f64,
}

impl Measured {
    fn cpu_ms_per_request(&self) -> f64 {
        self.cpu_s * 1000.0 / self.report.ok.max(1) as f64
    }

    /// Samples delivered per second of the window.
    fn samples_per_s(&self) -> f64 {
        (self.report.ok * self.samples_per_request) as f64 / self.wall_s.max(1e-9)
    }
}

pub async fn run(a: Args) -> anyhow::Result<()> {
    let split = |s: &str| -> Vec<String> { s.split(',').map(|x| x.trim().to_owned()).collect() };
    let (cases, sizes, sides) = (split(&a.cases), split(&a.sizes), split(&a.sides));
    let broker = if cases.iter().any(|c| c.starts_with("kafka")) {
        Some(Broker::start().await?)
    } else {
        None
    };
    let mut all: Vec<Measured> = Vec::new();
    for round in 0..a.rounds {
        for case in &cases {
            for size in &sizes {
                for side in &sides {
                    if side == "otelcol" && !OTELCOL_CASES.contains(&case.as_str()) {
                        continue;
                    }
                    if side == "naive" && case.starts_with("kafka") {
                        continue;
                    }
                    // As many messages as the pass-through run before it
                    // delivered, so that both last about as long.
                    let fill = all
                        .iter()
                        .rev()
                        .find(|m| m.case == "passthrough" && &m.size == size && m.side == *side)
                        .map_or(a.kafka_messages, |m| {
                            let whole = (a.warmup + a.duration).as_secs_f64();
                            (m.report.ok as f64 * whole / a.duration.as_secs_f64()) as u64
                        });
                    let m = measure(&a, case, size, side, broker.as_ref(), fill).await?;
                    let first = match size.split_once('+') {
                        Some((first, _)) => format!(" ({} {first} ok)", m.report.first_ok),
                        None => String::new(),
                    };
                    eprintln!(
                        "round {} {case:<10} {size:<6} {side:<7} {:>8.2} ms CPU/req (broker {:.2})  {:.2} M samples/s  {}{first}  peak {:.0} MiB, {:.0} MiB once idle",
                        round + 1,
                        m.cpu_ms_per_request(),
                        m.broker_cpu_s * 1000.0 / m.report.ok.max(1) as f64,
                        m.samples_per_s() / 1e6,
                        m.report,
                        m.peak_mib,
                        m.settled_mib
                    );
                    all.push(m);
                }
            }
        }
    }
    print_table(&all, &cases, &sizes, &sides, a.rounds);
    print_kafka_table(&all, &cases, &sizes, &sides, a.rounds);
    Ok(())
}

/// What a case's process sits between.
enum Ends {
    /// The load generator's gRPC calls in, the sink out.
    Otlp,
    /// The load generator in, a topic out.
    KafkaOut(String),
    /// A filled topic in, the sink out.
    KafkaIn(String),
}

async fn measure(
    a: &Args,
    case: &str,
    size: &str,
    side: &str,
    broker: Option<&Broker>,
    fill: u64,
) -> anyhow::Result<Measured> {
    static TOPICS: AtomicU64 = AtomicU64::new(0);
    // `A+B`: the first client sends A, the others B (a mixed load).
    let (first, rest) = size.split_once('+').unwrap_or((size, size));
    let p = payload(rest)?;
    let compression = if case.ends_with("gzip") {
        "gzip"
    } else {
        "none"
    };
    let framed = frame(&p, compression)?;
    let frames = if first == rest {
        vec![framed]
    } else {
        vec![frame(&payload(first)?, compression)?, framed]
    };
    let sink = Sink::start("127.0.0.1:0", false).await?;
    let port = free_port()?;
    let dir = tempfile::tempdir()?;
    let ends = match (case, broker) {
        ("kafka-export" | "kafka-receive", Some(broker)) => {
            let topic = format!(
                "bench-{}-{}",
                std::process::id(),
                TOPICS.fetch_add(1, Ordering::Relaxed)
            );
            broker.create_topic(&topic).await?;
            if case == "kafka-receive" {
                broker
                    .fill(&topic, &p.bytes, fill, &a.kafka_compression)
                    .await?;
                Ends::KafkaIn(topic)
            } else {
                Ends::KafkaOut(topic)
            }
        }
        (c, _) if c.starts_with("kafka") => anyhow::bail!("unknown case {c}"),
        _ => Ends::Otlp,
    };
    let ends_config = |collector: bool| {
        kafka_ends(
            &ends,
            broker.map(Broker::address).unwrap_or_default(),
            port,
            &sink.addr.to_string(),
            &a.kafka_compression,
            collector,
        )
    };
    let mut child = match side {
        "profcol" | "base" => {
            let cfg = dir.path().join("profcol.yaml");
            let yaml = ends_config(false).unwrap_or_else(|| {
                profcol_config(case, port, &sink.addr.to_string(), compression, dir.path())
            });
            std::fs::write(&cfg, yaml)?;
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
        "otelcol" => {
            let cfg = dir.path().join("otelcol.yaml");
            let yaml = match ends_config(true) {
                Some(yaml) => yaml,
                None => otelcol_config(case, port, &sink.addr.to_string(), compression)?,
            };
            std::fs::write(&cfg, yaml)?;
            Command::new(otelcol_binary(a)?)
                .arg(format!("--config=file:{}", cfg.display()))
                .arg("--feature-gates=service.profilesSupport")
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
    let pid = child.id();
    let broker_cpu = || match &ends {
        Ends::Otlp => 0.0,
        _ => broker.map_or(0.0, |b| cpu_seconds(b.pid())),
    };
    let delivered = || async {
        match &ends {
            Ends::KafkaOut(topic) => broker.expect("a broker").messages(topic).await,
            _ => sink.counts().0,
        }
    };
    let result = async {
        let (report, window) = if let Ends::KafkaIn(_) = ends {
            // The warm-up is the first part of the topic; the window the
            // rest, until the sink has every message.
            let whole = (a.warmup + a.duration).as_secs_f64();
            let warm = (fill as f64 * a.warmup.as_secs_f64() / whole) as u64;
            reached(&delivered, warm, Duration::from_secs(120)).await;
            let (cpu0, broker0, t0) = (cpu_seconds(pid), broker_cpu(), Instant::now());
            let (got, last) = settled(&delivered, fill, Duration::from_secs(120)).await;
            let report = Report {
                ok: got.saturating_sub(warm),
                elapsed: t0.elapsed(),
                ..Report::default()
            };
            (report, (cpu0, broker0, t0, last))
        } else {
            let channel = connect(port).await?;
            run_load(
                channel.clone(),
                &frames,
                compression,
                a.concurrency,
                a.warmup,
                None,
            )
            .await?;
            // The window opens once the warm-up's requests were delivered,
            // and closes once the measured ones have: CPU spent on requests
            // still queued inside the process counts.
            let (before, _) = settled(&delivered, 0, Duration::from_secs(30)).await;
            let (cpu0, broker0, t0) = (cpu_seconds(pid), broker_cpu(), Instant::now());
            let report = run_load(
                channel,
                &frames,
                compression,
                a.concurrency,
                a.duration,
                None,
            )
            .await?;
            let (_, last) = settled(&delivered, before + report.ok, Duration::from_secs(30)).await;
            (report, (cpu0, broker0, t0, last))
        };
        let (cpu0, broker0, t0, last) = window;
        let cpu_s = cpu_seconds(pid) - cpu0;
        let broker_cpu_s = broker_cpu() - broker0;
        // The peak read after the settle: work still queued when the last
        // request was delivered (another exporter's) counts too.
        tokio::time::sleep(a.settle).await;
        let (peak_mib, settled_mib) = memory_mib(pid);
        anyhow::Ok(Measured {
            case: case.to_owned(),
            size: size.to_owned(),
            side: side.to_owned(),
            report,
            wall_s: last.duration_since(t0).as_secs_f64(),
            cpu_s,
            broker_cpu_s,
            samples_per_request: p.samples,
            peak_mib,
            settled_mib,
        })
    }
    .await;
    stop(&mut child);
    if let (Ends::KafkaIn(topic) | Ends::KafkaOut(topic), Some(broker)) = (&ends, broker) {
        broker.delete_topic(topic).await?;
    }
    result
}

/// Waits until `count` reaches `want` (at most `limit`).
async fn reached<F, Fut>(count: &F, want: u64, limit: Duration)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let started = Instant::now();
    while count().await < want && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `count` reaches `want` and stays put for a moment (at most
/// `limit`); returns the count and when it last changed.
async fn settled<F, Fut>(count: &F, want: u64, limit: Duration) -> (u64, Instant)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = u64>,
{
    let started = Instant::now();
    let mut last = (count().await, Instant::now());
    loop {
        let n = count().await;
        if n != last.0 {
            last = (n, Instant::now());
        }
        let quiet = last.1.elapsed() > Duration::from_millis(300);
        if (n >= want && quiet) || started.elapsed() > limit {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The config of a kafka case, the same keys for profcol and the Collector
/// (its v0.161.0 `kafka` components): `None` for the other cases.
fn kafka_ends(
    ends: &Ends,
    broker: String,
    port: u16,
    sink: &str,
    kafka_compression: &str,
    collector: bool,
) -> Option<String> {
    let otlp_exporter = if collector { "otlp_grpc" } else { "otlp" };
    let (receiver, exporter) = match ends {
        Ends::Otlp => return None,
        Ends::KafkaOut(topic) => (
            format!(r#"otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:{port}", max_recv_msg_size_mib: 256}}}}}}"#),
            format!(
                "kafka: {{brokers: [\"{broker}\"], profiles: {{topic: {topic}, encoding: otlp_proto}}, \
                 producer: {{max_message_bytes: {MAX_MESSAGE_BYTES}, compression: {kafka_compression}}}}}"
            ),
        ),
        Ends::KafkaIn(topic) => (
            format!(
                "kafka: {{brokers: [\"{broker}\"], profiles: {{topics: [{topic}], encoding: otlp_proto}}, \
                 group_id: {topic}, initial_offset: earliest}}"
            ),
            format!(r#"{otlp_exporter}: {{endpoint: "{sink}", tls: {{insecure: true}}, compression: none}}"#),
        ),
    };
    let name = |component: &str| component.split(':').next().unwrap_or_default().to_owned();
    Some(format!(
        r#"
receivers:
  {receiver}
exporters:
  {exporter}
service:
  telemetry: {{metrics: {{level: none}}, logs: {{level: error}}}}
  pipelines:
    profiles: {{receivers: [{}], processors: [], exporters: [{}]}}
"#,
        name(&receiver),
        name(&exporter)
    ))
}

/// The Collector of the `otelcol` side.
fn otelcol_binary(a: &Args) -> anyhow::Result<PathBuf> {
    if let Some(p) = &a.otelcol {
        return Ok(p.clone());
    }
    let out = Command::new("bash")
        .arg("tests/otelcol/build.sh")
        .stderr(Stdio::inherit())
        .output()?;
    anyhow::ensure!(out.status.success(), "tests/otelcol/build.sh failed");
    let stdout = String::from_utf8(out.stdout)?;
    Ok(PathBuf::from(
        stdout.lines().last().unwrap_or_default().trim(),
    ))
}

/// The Collector doing the same work: its OTLP receiver (with room for the
/// large request, over gRPC-Go's default 4 MiB) to its OTLP exporter,
/// through `memory_limiter` in that case. Over gRPC the Collector
/// compresses gzip at level 6 and zstd at its default level, with no key
/// to change them: profcol and the naive proxy use level 1.
fn otelcol_config(case: &str, port: u16, sink: &str, compression: &str) -> anyhow::Result<String> {
    let (processors, list) = match (case, collector_processor(case)) {
        ("passthrough" | "gzip", _) => (String::new(), "[]".to_owned()),
        (_, Some(p)) => p,
        (other, None) => anyhow::bail!("the Collector has no {other} case"),
    };
    Ok(format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:{port}", max_recv_msg_size_mib: 256}}}}}}
{processors}
exporters:
  otlp_grpc: {{endpoint: "{sink}", tls: {{insecure: true}}, compression: {compression}}}
service:
  telemetry: {{metrics: {{level: none}}, logs: {{level: error}}}}
  pipelines:
    profiles: {{receivers: [otlp], processors: {list}, exporters: [otlp_grpc]}}
"#
    ))
}

/// The cases the Collector can run: it has none of profcol's processors.
const OTELCOL_CASES: [&str; 9] = [
    "passthrough",
    "gzip",
    "memory_limiter",
    "resource",
    "resource-gzip",
    "transform",
    "filter",
    "kafka-export",
    "kafka-receive",
];

/// The cases of one of the Collector's processors, configured the same in
/// both: its `processors:` section and the pipeline's list (`-gzip`: with
/// gzip both ways).
fn collector_processor(case: &str) -> Option<(String, String)> {
    let case = case.strip_suffix("-gzip").unwrap_or(case);
    let yaml = match case {
        "memory_limiter" => "{check_interval: 1s, limit_mib: 1536, spike_limit_mib: 256}",
        // What a gateway adds to every batch it forwards.
        "resource" => {
            "{attributes: [{key: deployment.environment, value: production, action: upsert}, \
             {key: k8s.cluster.name, value: eu-1, action: insert}]}"
        }
        "transform" => {
            "{profile_statements: [{context: resource, statements: \
             ['set(attributes[\"deployment.environment\"], \"production\")']}]}"
        }
        // The Collector's defaults: every request is read and merged.
        "batch" => "{}",
        // Resources of a service that sends nothing here: all stay.
        "filter" => {
            "{profile_conditions: \
             ['resource.attributes[\"service.name\"] == \"noisy-batch-job\"']}"
        }
        _ => return None,
    };
    Some((
        format!("\nprocessors:\n  {case}: {yaml}\n"),
        format!("[{case}]"),
    ))
}

fn profcol_config(
    case: &str,
    port: u16,
    sink: &str,
    compression: &str,
    dir: &std::path::Path,
) -> String {
    if let Some((section, list)) = collector_processor(case) {
        return profcol_config("passthrough", port, sink, compression, dir)
            .replace("\nexporters:", &format!("{section}exporters:"))
            .replace("processors: []", &format!("processors: {list}"));
    }
    if case == "all-exporters" {
        // The four processors and batch, to three exporters.
        return profcol_config("processors", port, sink, compression, dir)
            .replace("\nexporters:", "  batch: {}\nexporters:")
            .replace("sampling]", "sampling, batch]")
            .replace(
                "\nservice:",
                &format!(
                    "\n  file: {{path: {}}}\n  pprof: {{directory: {}}}\nservice:",
                    dir.join("out.json").display(),
                    dir.join("pprof").display()
                ),
            )
            .replace("exporters: [otlp]", "exporters: [otlp, file, pprof]");
    }
    let (processors, list) = if case.starts_with("processors") {
        let four = profcol_model::testing::BENCH_PROCESSORS;
        let configs: String = four
            .iter()
            .map(|(name, yaml)| format!("  {name}: {yaml}\n"))
            .collect();
        let names: Vec<&str> = four.iter().map(|(name, _)| *name).collect();
        (
            format!("\nprocessors:\n{configs}"),
            format!("[{}]", names.join(", ")),
        )
    } else {
        (String::new(), "[]".to_owned())
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

pub fn free_port() -> anyhow::Result<u16> {
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

/// One row per case and size: each side's median CPU per request, peak and
/// idle RSS, latency; profcol's ratio to every other side, round by round
/// (a side that did not run a case shows `-`).
fn print_table(
    all: &[Measured],
    cases: &[String],
    sizes: &[String],
    sides: &[String],
    rounds: usize,
) {
    let others: Vec<&String> = sides.iter().filter(|s| *s != "profcol").collect();
    let mut header = String::from("| case | size | CPU/req");
    for o in &others {
        header += &format!(" | profcol / {o} (each round)");
    }
    header += " | profcol samples/s/core | p50 / p99 | peak RSS | RSS once idle |";
    println!("\n{header}");
    println!("|{}", "---|".repeat(7 + others.len()));
    let names = sides.join(" / ");
    for case in cases {
        for size in sizes {
            let of = |side: &str| -> Vec<&Measured> {
                all.iter()
                    .filter(|m| &m.case == case && &m.size == size && m.side == side)
                    .collect()
            };
            let p = of("profcol");
            let per_side = |f: &dyn Fn(&[&Measured]) -> String| -> String {
                sides
                    .iter()
                    .map(|side| {
                        let ms = of(side);
                        if ms.is_empty() {
                            "-".to_owned()
                        } else {
                            f(&ms)
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" / ")
            };
            let cpu = per_side(&|ms| {
                format!(
                    "{:.2}",
                    median(ms.iter().map(|m| m.cpu_ms_per_request()).collect())
                )
            });
            let mut row = format!("| {case} | {size} | {cpu} ms ({names})");
            for o in &others {
                let base = of(o);
                let ratios: Vec<String> = (0..rounds)
                    .filter_map(|r| {
                        let (a, b) = (p.get(r)?, base.get(r)?);
                        Some(format!(
                            "{:.2}",
                            a.cpu_ms_per_request() / b.cpu_ms_per_request()
                        ))
                    })
                    .collect();
                row += &format!(
                    " | {}",
                    if ratios.is_empty() {
                        "-".to_owned()
                    } else {
                        ratios.join(", ")
                    }
                );
            }
            let per_core = median(
                p.iter()
                    .map(|m| (m.report.ok * m.samples_per_request) as f64 / m.cpu_s.max(1e-9))
                    .collect(),
            );
            let lat = per_side(&|ms| {
                let med = |f: &dyn Fn(&Report) -> Duration| {
                    median(
                        ms.iter()
                            .map(|m| f(&m.report).as_secs_f64() * 1000.0)
                            .collect(),
                    )
                };
                format!(
                    "{:.1}/{:.1}",
                    med(&|r| r.percentile(0.5)),
                    med(&|r| r.percentile(0.99))
                )
            });
            let peak =
                per_side(&|ms| format!("{:.0}", ms.iter().map(|m| m.peak_mib).fold(0.0, f64::max)));
            let settled = per_side(&|ms| {
                format!(
                    "{:.0}",
                    ms.iter().map(|m| m.settled_mib).fold(0.0, f64::max)
                )
            });
            println!(
                "{row} | {:.2} M | {lat} ms | {peak} MiB | {settled} MiB |",
                per_core / 1e6
            );
        }
    }
}

/// The kafka cases beside pass-through, each side against its own
/// pass-through of the same round and size: samples delivered per second
/// (wall clock) and CPU per request.
fn print_kafka_table(
    all: &[Measured],
    cases: &[String],
    sizes: &[String],
    sides: &[String],
    rounds: usize,
) {
    let kafka: Vec<&String> = cases.iter().filter(|c| c.starts_with("kafka")).collect();
    if kafka.is_empty() || !cases.iter().any(|c| c == "passthrough") {
        return;
    }
    println!(
        "\n| case | size | side | samples/s, M (kafka / passthrough) | rate / passthrough (each round) | CPU/req / passthrough (each round) |"
    );
    println!("|---|---|---|---|---|---|");
    for case in kafka {
        for size in sizes {
            for side in sides {
                let of = |c: &str| -> Vec<&Measured> {
                    all.iter()
                        .filter(|m| m.case == c && &m.size == size && &m.side == side)
                        .collect()
                };
                let (k, pt) = (of(case), of("passthrough"));
                if k.is_empty() || pt.is_empty() {
                    continue;
                }
                let each = |f: &dyn Fn(&Measured, &Measured) -> f64| -> String {
                    (0..rounds)
                        .filter_map(|r| Some(format!("{:.2}", f(k.get(r)?, pt.get(r)?))))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let rate =
                    |ms: &[&Measured]| median(ms.iter().map(|m| m.samples_per_s()).collect());
                println!(
                    "| {case} | {size} | {side} | {:.2} / {:.2} | {} | {} |",
                    rate(&k) / 1e6,
                    rate(&pt) / 1e6,
                    each(&|k, p| k.samples_per_s() / p.samples_per_s()),
                    each(&|k, p| k.cpu_ms_per_request() / p.cpu_ms_per_request()),
                );
            }
        }
    }
}
