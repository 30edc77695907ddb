//! A real Apache Kafka broker as a test peer: one node in KRaft mode
//! (broker and controller in one JVM), started from the jars
//! `tests/kafka/fetch.sh` copies from Maven Central into its cache, with
//! the machine's JDK.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use super::Running;

/// The jars' directory (`libs/` in it): `PROFCOL_KAFKA` when set, else
/// what `tests/kafka/fetch.sh` prints, fetching on first use. `None` skips
/// the caller's test locally when `mvn` or `java` is missing or the fetch
/// fails; under CI (`CI` set) that fails instead.
pub fn jars() -> Option<PathBuf> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = DIR.get_or_init(|| {
        if Command::new("java").arg("-version").output().is_err() {
            return Err("java is not on PATH".into());
        }
        if let Some(path) = std::env::var_os("PROFCOL_KAFKA") {
            return Ok(PathBuf::from(path));
        }
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka/fetch.sh");
        match Command::new("bash").arg(&script).output() {
            Ok(out) if out.status.success() => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let path = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
                if path.join("libs").is_dir() {
                    return Ok(path);
                }
                Err(format!("{} printed no jar directory", script.display()))
            }
            Ok(out) => Err(format!(
                "{} failed: {}",
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
                "the Apache Kafka test broker is missing under CI: {why}"
            );
            profcol_model::testing::skipped(&format!(
                "no Apache Kafka test broker ({})",
                why.lines().next().unwrap_or_default()
            ));
            None
        }
    }
}

/// A running single-node broker on 127.0.0.1, its log directory removed
/// when dropped.
pub struct Broker {
    jars: PathBuf,
    dir: tempfile::TempDir,
    /// The client port and the controller port.
    ports: (u16, u16),
    running: Option<Running>,
}

/// Any 16 bytes in base64 (URL-safe, unpadded), as `kafka-storage format -t` wants.
const CLUSTER_ID: &str = "cHJvZmNvbC10ZXN0LWthZg";

impl Broker {
    /// A broker once it answers metadata requests; `None` when [`jars`]
    /// skips. The broker cannot report the port `:0` took, so these are
    /// ports that were free a moment ago; when another process took one in
    /// between, the broker exits (address in use) and is started again on
    /// others.
    pub async fn start() -> Option<Broker> {
        let jars = jars()?;
        let mut last = String::new();
        for _ in 0..5 {
            let free = || {
                std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap()
                    .port()
            };
            let mut broker = Broker {
                jars: jars.clone(),
                dir: tempfile::tempdir().unwrap(),
                ports: (free(), free()),
                running: None,
            };
            broker.format();
            match broker.run().await {
                Ok(()) => return Some(broker),
                Err(logs) if logs.contains("Address already in use") => last = logs,
                Err(logs) => panic!("the Kafka broker exited before it was ready:\n{logs}"),
            }
        }
        panic!("the Kafka broker found no free ports in 5 tries:\n{last}");
    }

    /// `host:port` for `brokers:`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.ports.0)
    }

    fn properties(&self) -> PathBuf {
        self.dir.path().join("server.properties")
    }

    fn java(&self, main: &str) -> Command {
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/kafka");
        let mut cmd = Command::new("java");
        cmd.arg("-Xms64m")
            .arg("-Xmx256m")
            .arg("-XX:+UseSerialGC")
            // The broker starts in ~4 s instead of ~7 with the C1 compiler only.
            .arg("-XX:TieredStopAtLevel=1")
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                here.join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(format!("{}/libs/*", self.jars.display()))
            .arg(main);
        cmd
    }

    /// Writes the config and formats the log directory.
    fn format(&self) {
        let (port, controller) = self.ports;
        let props = format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.voters=1@127.0.0.1:{controller}\n\
             listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
             advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             log.dirs={}\n\
             num.partitions=1\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=4\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n\
             auto.create.topics.enable=true\n",
            self.dir.path().join("data").display()
        );
        std::fs::write(self.properties(), props).unwrap();
        let out = self
            .java("kafka.tools.StorageTool")
            .args(["format", "-t", CLUSTER_ID, "-c"])
            .arg(self.properties())
            .output()
            .expect("run the Kafka storage tool");
        assert!(
            out.status.success(),
            "kafka-storage format failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the JVM on the formatted directory and waits until the broker
    /// answers a metadata request; the logs if it exits first.
    async fn run(&mut self) -> Result<(), String> {
        let mut cmd = self.java("kafka.Kafka");
        cmd.arg(self.properties());
        let mut running = Running::spawn(&mut cmd);
        let address = self.address();
        let started = Instant::now();
        loop {
            if !running.is_running() {
                let (code, logs) = running.wait(Duration::from_secs(5)).await;
                return Err(format!("exit {code:?}\n{logs}"));
            }
            let addr = address.clone();
            let up = tokio::task::spawn_blocking(move || answers(&addr))
                .await
                .unwrap();
            if up {
                self.running = Some(running);
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(60) {
                running
                    .fail("the Kafka broker was not ready within 60 s")
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Kills the broker (SIGKILL: nothing flushed beyond what it acknowledged).
    pub async fn kill(&mut self) {
        if let Some(running) = self.running.take() {
            running.signal("KILL");
            let _ = running.wait(Duration::from_secs(10)).await;
        }
    }

    /// Starts it again on the same ports and log directory.
    pub async fn restart(&mut self) {
        self.kill().await;
        if let Err(logs) = self.run().await {
            panic!("the Kafka broker did not start again:\n{logs}");
        }
    }

    /// Creates `topic` with `partitions` partitions.
    pub async fn create_topic(&self, topic: &str, partitions: i32) {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", self.address())
            .create()
            .unwrap();
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
            )
            .await
            .unwrap();
        for r in results {
            r.unwrap_or_else(|(t, e)| panic!("creating topic {t}: {e}"));
        }
    }

    /// The log directory (tests read nothing there; it is where the data lives).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// Whether a broker at `address` answers a metadata request within 1 s.
fn answers(address: &str) -> bool {
    let consumer: BaseConsumer = match ClientConfig::new()
        .set("bootstrap.servers", address)
        .set("log_level", "0")
        .create()
    {
        Ok(c) => c,
        Err(_) => return false,
    };
    consumer
        .fetch_metadata(None, Duration::from_secs(1))
        .is_ok_and(|m| !m.brokers().is_empty())
}
