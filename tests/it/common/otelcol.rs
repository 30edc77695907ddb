//! The real OpenTelemetry Collector as a test peer: the pinned build of
//! `tests/otelcol/builder-config.yaml`, made (or found in its cache) by
//! `tests/otelcol/build.sh`.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use super::Running;

/// The feature gate the Collector needs before it builds profiles pipelines.
pub const PROFILES_GATE: &str = "--feature-gates=service.profilesSupport";

/// The Collector binary: `PROFCOL_OTELCOL` when set, else the pinned
/// build, made on first use. `None` skips the caller's test
/// locally when `go` is missing or the build fails; under CI (`CI` set) that
/// fails instead, as the go tool pprof tests do.
pub fn binary() -> Option<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    built(&BIN, "PROFCOL_OTELCOL", "builder-config.yaml")
}

/// The newest core Collector (`tests/otelcol/latest.yaml`):
/// `PROFCOL_OTELCOL_LATEST` when set, else built on first use; `None` as
/// for [`binary`].
pub fn latest_binary() -> Option<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    built(&BIN, "PROFCOL_OTELCOL_LATEST", "latest.yaml")
}

fn built(cell: &OnceLock<Result<PathBuf, String>>, env: &str, config: &str) -> Option<PathBuf> {
    let found = cell.get_or_init(|| {
        if let Some(path) = std::env::var_os(env) {
            return Ok(PathBuf::from(path));
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/otelcol/build.sh");
        match Command::new("bash").arg(&script).arg(config).output() {
            Ok(out) if out.status.success() => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
                if path.is_file() {
                    return Ok(path);
                }
                Err(format!("{} printed no binary path", script.display()))
            }
            Ok(out) => Err(format!(
                "{} {config} failed: {}",
                script.display(),
                String::from_utf8_lossy(&out.stderr)
            )),
            Err(e) => Err(format!("{}: {e}", script.display())),
        }
    });
    match found {
        Ok(path) => Some(path.clone()),
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "the OpenTelemetry Collector test peer ({config}) is missing under CI: {why}"
            );
            // Every caller skips, so each is counted.
            profcol_model::testing::skipped(&format!(
                "no OpenTelemetry Collector test peer {config} ({})",
                why.lines().next().unwrap_or_default()
            ));
            None
        }
    }
}

/// `otelcol-profcol ARGS` with the profiles gate.
pub fn command(bin: &std::path::Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_remove("OTEL_RESOURCE_ATTRIBUTES");
    cmd
}

/// `otelcol validate` on `config`: whether it passed, and what it printed.
pub fn validate(bin: &std::path::Path, config: &std::path::Path) -> (bool, String) {
    validate_with(bin, config, |_| {})
}

/// [`validate`], with the command set up by `setup` first (its working
/// directory, its environment).
pub fn validate_with(
    bin: &std::path::Path,
    config: &std::path::Path,
    setup: impl FnOnce(&mut Command),
) -> (bool, String) {
    let mut cmd = command(bin);
    setup(&mut cmd);
    let out = cmd
        .arg("validate")
        .arg(format!("--config=file:{}", config.display()))
        .arg(PROFILES_GATE)
        .output()
        .expect("run otelcol validate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Starts a Collector on the config `config` makes of `n` ports (the last
/// for its `health_check`), once healthy, and says which ports. The
/// Collector cannot report the port `:0` took, so these are ports that
/// were free a moment ago; when another process took one in between, the
/// Collector exits (address in use) and is started again on others.
pub async fn start_on_free_ports(
    bin: &std::path::Path,
    n: usize,
    config: impl Fn(&[u16]) -> String,
) -> (Running, tempfile::TempDir, Vec<u16>) {
    start_on_free_ports_with(bin, n, config, &[]).await
}

/// [`start_on_free_ports`] with `env` set for the Collector's process
/// (`KUBECONFIG` for its `k8s_attributes`).
pub async fn start_on_free_ports_with(
    bin: &std::path::Path,
    n: usize,
    config: impl Fn(&[u16]) -> String,
    env: &[(&str, &std::ffi::OsStr)],
) -> (Running, tempfile::TempDir, Vec<u16>) {
    let mut last = String::new();
    for _ in 0..5 {
        let ports: Vec<u16> = (0..n)
            .map(|_| {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("otelcol.yaml");
        std::fs::write(&path, config(&ports)).unwrap();
        let running = Running::spawn(
            command(bin)
                .arg(format!("--config=file:{}", path.display()))
                .arg(PROFILES_GATE)
                .envs(env.iter().copied()),
        );
        match running.healthy_or_exit(ports[n - 1]).await {
            Ok(running) => return (running, dir, ports),
            Err(logs) if logs.contains("address already in use") => last = logs,
            Err(logs) => panic!("the Collector exited before it became healthy:\n{logs}"),
        }
    }
    panic!("the Collector found no free ports in 5 tries:\n{last}");
}

/// A running Collector on `config` (which must enable the `health_check`
/// extension on `health`), once healthy.
pub async fn start(
    bin: &std::path::Path,
    config: &str,
    health: u16,
) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("otelcol.yaml");
    std::fs::write(&path, config).unwrap();
    let running = Running::spawn(
        command(bin)
            .arg(format!("--config=file:{}", path.display()))
            .arg(PROFILES_GATE),
    )
    .healthy(health)
    .await;
    (running, dir)
}
