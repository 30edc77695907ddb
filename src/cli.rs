//! `profcol [--config URI]... [--set key=value]...`, `profcol validate`,
//! `profcol components`, `profcol health`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use profcol_pipeline::config::{Config, ConfigErrors, Kind, LogsEncoding, Source};
use profcol_pipeline::runtime::{Graph, RunningService, RuntimeOptions};
use profcol_pipeline::telemetry::Telemetry;

#[derive(Parser, Debug)]
#[command(
    name = "profcol",
    version,
    about = "An OpenTelemetry-Collector-compatible pipeline for profiles"
)]
pub struct Cli {
    /// Config: a file path, `file:PATH`, `env:VAR` or `yaml:TEXT` (keys may
    /// reach down with `::`); repeat to merge several (later wins).
    #[arg(long = "config", short = 'c', global = true)]
    pub config: Vec<String>,

    /// Sets one config value, as the Collector's `--set`:
    /// `--set=processors.batch.timeout=2s`; applied after every `--config`.
    #[arg(long = "set", global = true, value_name = "KEY=VALUE")]
    pub set: Vec<String>,

    /// Deadline for draining on shutdown (Go duration syntax).
    #[arg(long, global = true, default_value = "30s", value_parser = parse_duration)]
    pub shutdown_timeout: std::time::Duration,

    /// Memory for batches in flight, in MiB (at least 1); past it receivers
    /// ask clients to retry. Default: the `memory_limiter` processor's
    /// `limit_mib` if one is configured, else 1024. Given, it wins.
    #[arg(long, global = true, value_parser = parse_memory_limit)]
    pub memory_limit_mib: Option<usize>,

    /// The Collector's feature gates, so that its command lines carry
    /// over: a comma list, repeatable. profcol knows
    /// `service.profilesSupport` (profiles are always on); others are a
    /// usage error.
    #[arg(long = "feature-gates", global = true, value_name = "GATES", value_parser = parse_feature_gates)]
    pub feature_gates: Vec<String>,

    /// Once the collector is ready, write every listener's bound address
    /// to this file, `<listener> <address>` a line
    /// (`receivers::otlp::protocols::grpc 127.0.0.1:41234`); rewritten after
    /// each config reload, removed on exit. With `:0` endpoints (a free
    /// port each) this is how a script or a test learns the ports.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The feature gates profcol knows, each always on.
const FEATURE_GATES: [&str; 1] = ["service.profilesSupport"];

/// A `--feature-gates` value as the Collector reads it (`gate`, `+gate`
/// to enable, `-gate` to disable, comma-separated): every gate must be
/// one profcol knows, and none can be turned off.
fn parse_feature_gates(s: &str) -> Result<String, String> {
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (off, gate) = match item.strip_prefix('-') {
            Some(g) => (true, g),
            None => (false, item.strip_prefix('+').unwrap_or(item)),
        };
        if !FEATURE_GATES.contains(&gate) {
            return Err(format!(
                "unknown feature gate {gate:?}; profcol knows {} (always on)",
                FEATURE_GATES.join(", ")
            ));
        }
        if off {
            return Err(format!(
                "{gate} cannot be turned off: profcol always carries profiles"
            ));
        }
    }
    Ok(s.to_owned())
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Check the config without binding any socket; lists every error.
    Validate,
    /// List the component types this build knows.
    Components,
    /// Ask a running collector's health_check extension whether it is
    /// ready: exit 0 on 200, 1 otherwise (for container health checks).
    Health {
        /// `host:port` of the health_check extension.
        #[arg(long, default_value = "localhost:13133")]
        endpoint: String,
        /// The extension's `path`.
        #[arg(long, default_value = "/")]
        path: String,
        /// How long to wait for the answer (Go duration syntax).
        #[arg(long, default_value = "5s", value_parser = parse_duration)]
        timeout: std::time::Duration,
    },
    /// Run pipeline tests: recorded payloads through a config, checked per exporter.
    Test {
        /// Test files (YAML); see README "Testing pipelines".
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Rewrite snapshot files instead of comparing with them.
        #[arg(long)]
        update: bool,
        /// Write the flame graphs of a failing test's exporters into this
        /// directory: what each got and, with a snapshot, what was expected
        /// and the difference.
        #[arg(long, value_name = "DIR")]
        flamegraph: Option<PathBuf>,
    },
    /// Render a recorded payload (OTLP protobuf or JSON, the file
    /// exporter's output, pprof, a Sentry envelope) as an SVG flame graph.
    Flamegraph {
        file: PathBuf,
        /// Where to write the SVG (default: FILE's name with `.svg`).
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Which sample type (`cpu` or `cpu/nanoseconds`); default the first.
        #[arg(long)]
        sample_type: Option<String>,
    },
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    profcol_pipeline::config::Duration::parse(s).map(|d| d.get())
}

/// A budget of 0 would refuse every batch: a usage error, like any bad flag.
fn parse_memory_limit(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be greater than 0 (a budget of 0 bytes refuses every batch)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("expected a whole number of MiB: {e}")),
    }
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Components) => {
            components();
            ExitCode::SUCCESS
        }
        Some(Command::Validate) => match sources(&cli) {
            Ok(sources) => validate(&sources),
            Err(code) => code,
        },
        Some(Command::Test {
            ref files,
            update,
            ref flamegraph,
        }) => test(files, update, flamegraph.as_deref()),
        Some(Command::Flamegraph {
            ref file,
            ref output,
            ref sample_type,
        }) => flamegraph(file, output.as_deref(), sample_type.as_deref()),
        Some(Command::Health {
            ref endpoint,
            ref path,
            timeout,
        }) => match crate::health_probe::probe(endpoint, path, timeout) {
            Ok(status) => {
                println!("healthy: {status}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("unhealthy: {e}");
                ExitCode::FAILURE
            }
        },
        None => run(cli),
    }
}

fn components() {
    let reg = crate::components::registry();
    for kind in [
        Kind::Receiver,
        Kind::Processor,
        Kind::Exporter,
        Kind::Extension,
        Kind::Connector,
    ] {
        println!("{}:", kind.section());
        for t in reg.types(kind) {
            println!("  - {t}");
        }
    }
}

/// The `--config` and `--set` values as config sources, in the order the
/// Collector applies them (every `--config`, then every `--set`); a usage
/// error (exit 2) for none or a malformed one.
fn sources(cli: &Cli) -> Result<Vec<Source>, ExitCode> {
    if cli.config.is_empty() {
        eprintln!("error: at least one --config FILE is required");
        return Err(ExitCode::from(2));
    }
    let parsed = cli
        .config
        .iter()
        .map(|c| Source::parse(c))
        .chain(cli.set.iter().map(|s| Source::set(s)));
    let mut out = Vec::new();
    let mut bad = false;
    for s in parsed {
        match s {
            Ok(s) => out.push(s),
            Err(e) => {
                eprintln!("error: {e}");
                bad = true;
            }
        }
    }
    if bad {
        return Err(ExitCode::from(2));
    }
    Ok(out)
}

fn validate(sources: &[Source]) -> ExitCode {
    match load(sources, true) {
        Ok(_) => {
            println!("config is valid");
            ExitCode::SUCCESS
        }
        Err(errs) => invalid(&errs),
    }
}

/// Loads the config and builds every component. Components warn while
/// they are built (a sampling rate that rounds to zero, say), before the
/// configured logger exists: those warnings go to stderr from here.
/// With `check`, as `validate` checks it (no processor does what only a
/// running one does).
fn load(sources: &[Source], check: bool) -> Result<(Config, Graph), ConfigErrors> {
    let early = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .finish();
    tracing::subscriber::with_default(early, || {
        if check {
            crate::app::check_sources(sources)
        } else {
            crate::app::load_sources(sources)
        }
    })
}

/// `profcol flamegraph FILE`: every sample of the file, all services
/// together, one sample type.
fn flamegraph(
    file: &std::path::Path,
    output: Option<&std::path::Path>,
    sample_type: Option<&str>,
) -> ExitCode {
    use crate::harness::flamegraph as fg;
    let made = fg::read(file, None).and_then(|all| {
        let profiles: Vec<_> = all.iter().flat_map(profcol_model::folded).collect();
        let title = file.file_name().map_or_else(
            || file.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        fg::render_one(&fg::stacks_of(&profiles), sample_type, &title)
    });
    let out = output.map_or_else(|| file.with_extension("svg"), std::path::Path::to_path_buf);
    match made.and_then(|(ty, svg)| {
        std::fs::write(&out, svg)
            .map(|()| ty)
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", out.display()))
    }) {
        Ok(ty) => {
            println!("wrote {} ({ty})", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("profcol flamegraph: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn test(files: &[PathBuf], update: bool, flamegraphs: Option<&std::path::Path>) -> ExitCode {
    // Components' warnings (a failed export, say) explain failures.
    init_logs("warn");
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let summary = rt.block_on(crate::harness::run_files(
        files,
        update,
        flamegraphs,
        &mut std::io::stdout(),
    ));
    if summary.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn invalid(errs: &profcol_pipeline::config::ConfigErrors) -> ExitCode {
    eprintln!("invalid configuration ({} errors):", errs.0.len());
    for e in &errs.0 {
        eprintln!("  {e}");
    }
    ExitCode::FAILURE
}

fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(profcol_model::memory::on_thread_park)
        // A blocking thread's allocator heap keeps what was freed on it
        // until the thread ends: idle blocking threads end when the memory
        // guard finds the collector idle, so that it can return their pages.
        .thread_keep_alive(profcol_model::memory::IDLE)
        .build()
        .map_err(|e| eprintln!("error: cannot start the async runtime: {e}"))
        .ok()
}

fn init_logs(level: &str) {
    init_logs_as(level, LogsEncoding::Console)
}

fn init_logs_as(level: &str, encoding: LogsEncoding) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match encoding {
        // One JSON object a line (`service.telemetry.logs.encoding: json`),
        // with the event's fields at the top level, for log pipelines.
        LogsEncoding::Json => logs.json().flatten_event(true).init(),
        // Colours only on a terminal: logs piped to files or journald stay plain.
        LogsEncoding::Console => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
    }
}

fn run(cli: Cli) -> ExitCode {
    let sources = match sources(&cli) {
        Ok(s) => s,
        Err(code) => return code,
    };
    let (mut cfg, graph) = match load(&sources, false) {
        Ok(v) => v,
        Err(errs) => return invalid(&errs),
    };
    init_logs_as(
        &cfg.service.telemetry.logs_level,
        cfg.service.telemetry.logs_encoding,
    );
    raise_fd_limit();
    let Some(rt) = runtime() else {
        return ExitCode::FAILURE;
    };
    let opts = RuntimeOptions {
        memory_limit_bytes: cli.memory_limit_mib.unwrap_or(1024).saturating_mul(1 << 20),
        memory_limit_explicit: cli.memory_limit_mib.is_some(),
        shutdown_timeout: cli.shutdown_timeout,
        guard_process_memory: true,
        ..RuntimeOptions::default()
    };
    let ready_file = cli.ready_file.clone();
    let code = rt.block_on(async move {
        // Listening from before start-up on, so no signal is missed between
        // the first and the second.
        let mut signals = match Signals::install() {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("cannot install signal handlers: {e}");
                return ExitCode::FAILURE;
            }
        };
        // A file left by an earlier run must not pass for this one's.
        if let Some(path) = &ready_file {
            let _ = std::fs::remove_file(path);
        }
        let mut svc = match RunningService::start(graph, opts, Arc::new(Telemetry::new())).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{e:#}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(path) = &ready_file {
            if let Err(e) = write_ready_file(path, &svc) {
                tracing::error!("cannot write the ready file {}: {e}", path.display());
                svc.shutdown().await;
                return ExitCode::FAILURE;
            }
        }
        loop {
            match signals.next().await {
                Signal::Stop(name) => {
                    tracing::info!("received {name}; shutting down");
                    break;
                }
                Signal::DumpAndStop(name) => {
                    tracing::info!("received {name}; logging the state, then shutting down");
                    log_state(&svc);
                    break;
                }
                Signal::Dump(name) => {
                    tracing::info!("received {name}; logging the state");
                    log_state(&svc);
                }
                Signal::Reload(name) => {
                    tracing::info!("received {name}; reloading the config");
                    reload(&sources, &mut cfg, &mut svc, ready_file.as_deref()).await;
                }
                Signal::Ignore(name, why) => tracing::warn!("received {name}; {why}"),
            }
        }
        // A second stopping signal forces exit without draining.
        tokio::spawn(async move {
            loop {
                if let Signal::Stop(name) | Signal::DumpAndStop(name) = signals.next().await {
                    tracing::warn!("second signal: exiting without draining ({name})");
                    std::process::exit(130);
                }
            }
        });
        svc.shutdown().await;
        if let Some(path) = &ready_file {
            let _ = std::fs::remove_file(path);
        }
        ExitCode::SUCCESS
    });
    // The drain above is bounded by its deadline; work still running on
    // the blocking pool (a conversion cut off by it) must not hold the
    // process up after it.
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
    code
}

/// Reads the config again from the sources the process started with and
/// moves the running collector to it (see `runtime::reload`); a config
/// that does not load, or that the running collector cannot switch to, is
/// refused with every error logged at its key, and the old one keeps
/// running.
async fn reload(
    sources: &[Source],
    current: &mut Config,
    svc: &mut RunningService,
    ready_file: Option<&std::path::Path>,
) {
    let refused = |svc: &RunningService, errs: &ConfigErrors| {
        tracing::error!(
            "config reload refused ({} errors); the running config is kept",
            errs.0.len()
        );
        for e in &errs.0 {
            tracing::error!("  {e}");
        }
        svc.telemetry().config_reload("failure");
    };
    let (new, graph) = match crate::app::load_sources(sources) {
        Ok(v) => v,
        Err(errs) => return refused(svc, &errs),
    };
    let result = svc.reload(current, &new, graph).await;
    // Before the reload is counted: whoever waits on the counter reads a
    // file that is already rewritten.
    if let (Ok(_), Some(path)) = (&result, ready_file) {
        if let Err(e) = write_ready_file(path, svc) {
            tracing::error!("cannot write the ready file {}: {e}", path.display());
        }
    }
    match result {
        Err(errs) => refused(svc, &errs),
        Ok(summary) if summary.failed.is_empty() => {
            *current = new;
            tracing::info!("config reloaded: {summary}");
            svc.telemetry().config_reload("success");
        }
        Ok(summary) => {
            *current = new;
            tracing::error!(
                "config reloaded, but not all of it runs: {summary}; failed to start: {}",
                summary.failed.join("; ")
            );
            svc.telemetry().config_reload("partial");
        }
    }
}

/// Writes `--ready-file`: every listener and its bound address, a line
/// each, through a temporary file renamed over it, so that a reader sees
/// the whole file or none.
fn write_ready_file(path: &std::path::Path, svc: &RunningService) -> std::io::Result<()> {
    let text: String = svc
        .listeners()
        .iter()
        .map(|b| format!("{} {}\n", b.name, b.address))
        .collect();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Raises the soft limit on open files to the hard one, as Go programs do
/// at start: every connection is a descriptor, and 1024 (a common soft
/// default) is far below what one gateway holds.
fn raise_fd_limit() {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => tracing::debug!(limit = n, "open files limit"),
        Err(e) => tracing::warn!(error = %e, "cannot raise the open files limit"),
    }
}

/// Logs the collector's own metrics (queues, accepted, refused, sent), one
/// line each, for an operator who sent SIGUSR1 or SIGQUIT.
fn log_state(svc: &RunningService) {
    let text = svc
        .telemetry()
        .encode_text_at(profcol_pipeline::config::MetricsLevel::Basic);
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        tracing::info!("state: {line}");
    }
}

/// What a signal asks of the collector.
enum Signal {
    /// SIGTERM, SIGINT: drain and exit.
    Stop(&'static str),
    /// SIGQUIT: log the state, then drain and exit.
    DumpAndStop(&'static str),
    /// SIGUSR1: log the state and keep running.
    Dump(&'static str),
    /// SIGHUP: read the config again and switch to it.
    Reload(&'static str),
    /// Signals whose default action would end the process at once without
    /// a drain or a log line: logged and ignored.
    Ignore(&'static str, &'static str),
}

/// Every catchable signal whose default action ends the process.
struct Signals {
    #[cfg(unix)]
    streams: Vec<(tokio::signal::unix::Signal, &'static str)>,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let kinds = [
                (SignalKind::terminate(), "SIGTERM"),
                (SignalKind::interrupt(), "SIGINT"),
                (SignalKind::quit(), "SIGQUIT"),
                (SignalKind::hangup(), "SIGHUP"),
                (SignalKind::user_defined1(), "SIGUSR1"),
                (SignalKind::user_defined2(), "SIGUSR2"),
                (SignalKind::alarm(), "SIGALRM"),
                (SignalKind::io(), "SIGIO"),
                (SignalKind::from_raw(libc::SIGVTALRM), "SIGVTALRM"),
                (SignalKind::from_raw(libc::SIGPROF), "SIGPROF"),
                (SignalKind::from_raw(libc::SIGXCPU), "SIGXCPU"),
                (SignalKind::from_raw(libc::SIGXFSZ), "SIGXFSZ"),
                #[cfg(target_os = "linux")]
                (SignalKind::from_raw(libc::SIGPWR), "SIGPWR"),
            ];
            let mut streams = Vec::with_capacity(kinds.len());
            for (kind, name) in kinds {
                streams.push((signal(kind)?, name));
            }
            Ok(Self { streams })
        }
        #[cfg(not(unix))]
        Ok(Self {})
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        {
            let name = futures::future::select_all(
                self.streams
                    .iter_mut()
                    .map(|(s, name)| Box::pin(async move { s.recv().await.map(|_| *name) })),
            )
            .await
            .0
            .unwrap_or("SIGTERM");
            match name {
                "SIGTERM" | "SIGINT" => Signal::Stop(name),
                "SIGQUIT" => Signal::DumpAndStop(name),
                "SIGUSR1" => Signal::Dump(name),
                "SIGHUP" => Signal::Reload(name),
                _ => Signal::Ignore(name, "ignoring the signal"),
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            Signal::Stop("Ctrl-C")
        }
    }
}
