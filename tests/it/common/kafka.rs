//! A real Apache Kafka broker as a test peer: one node in KRaft mode
//! (broker and controller in one JVM), started from the jars
//! `tests/kafka/fetch.sh` copies from Maven Central into its cache, with
//! the machine's JDK.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
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
    /// Listeners that ask for SASL and TLS, when started [`Broker::secured`].
    secured: Option<Secured>,
    /// Its node id, and the controller quorum (`id@host:port`, ...).
    node: usize,
    voters: String,
    /// The nodes of its cluster: the replicas of internal topics and of
    /// topics the tests create.
    nodes: usize,
    running: Option<Running>,
}

/// The users the secured listeners know, with their passwords: `alice`
/// for PLAIN, `scram256` and `scram512` for the SCRAM mechanisms.
pub const USERS: [(&str, &str); 3] = [
    ("alice", "alice-secret"),
    ("scram256", "scram256-secret"),
    ("scram512", "scram512-secret"),
];

/// The ports of the secured listeners.
pub struct Secured {
    pub sasl_plaintext: u16,
    pub ssl: u16,
    pub sasl_ssl: u16,
}

impl Secured {
    fn listeners(&self) -> [(&'static str, u16); 3] {
        [
            ("SASL_PLAINTEXT", self.sasl_plaintext),
            ("SSL", self.ssl),
            ("SASL_SSL", self.sasl_ssl),
        ]
    }
}

/// A port free now and below the system's ephemeral range: a broker is
/// killed and started again on its ports, and while it is down no
/// `bind(:0)` of another test and no outgoing connection's local port
/// (librdkafka reconnecting to that very port included) can take one.
fn free() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32768)
        .clamp(2048, 65535);
    let span = low / 2;
    let start = std::process::id() % span;
    for _ in 0..span {
        let port = (low - span + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below {low}");
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
        Self::start_with(false).await
    }

    /// A broker that also listens with SASL (PLAIN, SCRAM-SHA-256 and
    /// SCRAM-SHA-512, [`USERS`]) in plain text, with TLS, and with both;
    /// its certificate is signed by the CA in [`Broker::ca_file`].
    pub async fn secured() -> Option<Broker> {
        Self::start_with(true).await
    }

    async fn start_with(secured: bool) -> Option<Broker> {
        let jars = jars()?;
        let mut last = String::new();
        for _ in 0..5 {
            let ports = (free(), free());
            let mut broker = Broker {
                jars: jars.clone(),
                dir: tempfile::tempdir().unwrap(),
                ports,
                secured: secured.then(|| Secured {
                    sasl_plaintext: free(),
                    ssl: free(),
                    sasl_ssl: free(),
                }),
                node: 1,
                voters: format!("1@127.0.0.1:{}", ports.1),
                nodes: 1,
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

    /// The secured listeners' ports ([`Broker::secured`]).
    pub fn secured_ports(&self) -> &Secured {
        self.secured
            .as_ref()
            .expect("a broker started with Broker::secured")
    }

    /// The PEM file of the CA that signed the broker's certificate.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The settings of the secured listeners, and the broker's key and
    /// certificate (signed by a CA of the test's, for 127.0.0.1) in the
    /// PEM key store Kafka reads.
    fn security_properties(&self) -> String {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "profcol Kafka test CA");
        let ca =
            rcgen::CertifiedIssuer::self_signed(ca, rcgen::KeyPair::generate().unwrap()).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = vec![rcgen::SanType::IpAddress(std::net::IpAddr::from([
            127, 0, 0, 1,
        ]))];
        let cert = params.signed_by(&key, &ca).unwrap();
        std::fs::write(self.ca_file(), ca.pem()).unwrap();
        let store = self.dir.path().join("broker.pem");
        std::fs::write(&store, format!("{}{}", key.serialize_pem(), cert.pem())).unwrap();
        let plain_users: String = USERS
            .iter()
            .map(|(u, p)| format!(" user_{u}=\"{p}\""))
            .collect();
        let mut props = format!(
            "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n\
             ssl.keystore.type=PEM\n\
             ssl.keystore.location={}\n",
            store.display()
        );
        for listener in ["sasl_plaintext", "sasl_ssl"] {
            props.push_str(&format!(
                "listener.name.{listener}.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{plain_users};\n\
                 listener.name.{listener}.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
                 listener.name.{listener}.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n"
            ));
        }
        props
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
        let (mut listeners, mut advertised, mut map) = (
            format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}"),
            format!("PLAINTEXT://127.0.0.1:{port}"),
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT".to_owned(),
        );
        let mut extra = String::new();
        if let Some(s) = &self.secured {
            for (name, p) in s.listeners() {
                listeners.push_str(&format!(",{name}://127.0.0.1:{p}"));
                advertised.push_str(&format!(",{name}://127.0.0.1:{p}"));
                map.push_str(&format!(",{name}:{name}"));
            }
            extra = self.security_properties();
        }
        let props = format!(
            "process.roles=broker,controller\n\
             node.id={node}\n\
             controller.quorum.voters={voters}\n\
             listeners={listeners}\n\
             advertised.listeners={advertised}\n\
             inter.broker.listener.name=PLAINTEXT\n\
             controller.listener.names=CONTROLLER\n\
             listener.security.protocol.map={map}\n\
             log.dirs={}\n\
             num.partitions=1\n\
             offsets.topic.replication.factor={replicas}\n\
             offsets.topic.num.partitions=4\n\
             transaction.state.log.replication.factor={replicas}\n\
             transaction.state.log.min.isr=1\n\
             share.coordinator.state.topic.replication.factor={replicas}\n\
             share.coordinator.state.topic.min.isr=1\n\
             default.replication.factor={replicas}\n\
             min.insync.replicas={min_isr}\n\
             group.initial.rebalance.delay.ms=0\n\
             auto.create.topics.enable=true\n{extra}",
            self.dir.path().join("data").display(),
            node = self.node,
            voters = self.voters,
            replicas = self.nodes,
            // With replicas, `acks=all` waits for two: one node may go.
            min_isr = self.nodes.min(2),
        );
        std::fs::write(self.properties(), props).unwrap();
        let mut format = self.java("kafka.tools.StorageTool");
        format
            .args(["format", "-t", CLUSTER_ID, "-c"])
            .arg(self.properties());
        // SCRAM credentials live in the cluster's metadata, written at format.
        if self.secured.is_some() {
            for (mechanism, (user, password)) in
                [("SCRAM-SHA-256", USERS[1]), ("SCRAM-SHA-512", USERS[2])]
            {
                format
                    .arg("--add-scram")
                    .arg(format!("{mechanism}=[name={user},password={password}]"));
            }
        }
        let out = format.output().expect("run the Kafka storage tool");
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
        self.spawn();
        self.ready().await
    }

    fn spawn(&mut self) {
        let mut cmd = self.java("kafka.Kafka");
        cmd.arg(self.properties());
        self.running = Some(Running::spawn(&mut cmd));
    }

    /// Waits until the spawned broker answers a metadata request (in a
    /// cluster, once the controllers have a quorum); the logs if it exits.
    async fn ready(&mut self) -> Result<(), String> {
        let address = self.address();
        let started = Instant::now();
        loop {
            let running = self.running.as_mut().expect("a spawned broker");
            if !running.is_running() {
                let running = self.running.take().unwrap();
                let (code, logs) = running.wait(Duration::from_secs(5)).await;
                return Err(format!("exit {code:?}\n{logs}"));
            }
            let addr = address.clone();
            let up = tokio::task::spawn_blocking(move || answers(&addr))
                .await
                .unwrap();
            if up {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(60) {
                self.running
                    .take()
                    .unwrap()
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
                &[NewTopic::new(
                    topic,
                    partitions,
                    TopicReplication::Fixed(self.nodes as i32),
                )],
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

/// Brokers on 127.0.0.1 forming one KRaft cluster (each a broker and a
/// controller): internal and created topics are replicated on every node,
/// `min.insync.replicas` is 2, so one node may be killed without losing
/// what `acks=all` acknowledged.
pub struct Cluster {
    pub nodes: Vec<Broker>,
}

impl Cluster {
    /// `n` nodes once each answers metadata requests; `None` when [`jars`]
    /// skips.
    pub async fn start(n: usize) -> Option<Cluster> {
        let jars = jars()?;
        let mut last = String::new();
        for _ in 0..5 {
            let ports: Vec<(u16, u16)> = (0..n).map(|_| (free(), free())).collect();
            let voters: Vec<String> = ports
                .iter()
                .enumerate()
                .map(|(i, (_, c))| format!("{}@127.0.0.1:{c}", i + 1))
                .collect();
            let mut nodes: Vec<Broker> = ports
                .iter()
                .enumerate()
                .map(|(i, &ports)| Broker {
                    jars: jars.clone(),
                    dir: tempfile::tempdir().unwrap(),
                    ports,
                    secured: None,
                    node: i + 1,
                    voters: voters.join(","),
                    nodes: n,
                    running: None,
                })
                .collect();
            std::thread::scope(|s| {
                for b in &nodes {
                    s.spawn(|| b.format());
                }
            });
            // All at once: none answers before the controllers have a quorum.
            for b in &mut nodes {
                b.spawn();
            }
            let mut failed = None;
            for b in &mut nodes {
                if let Err(logs) = b.ready().await {
                    failed = Some(logs);
                    break;
                }
            }
            match failed {
                None => return Some(Cluster { nodes }),
                Some(logs) if logs.contains("Address already in use") => last = logs,
                Some(logs) => panic!("a Kafka node exited before it was ready:\n{logs}"),
            }
        }
        panic!("the Kafka cluster found no free ports in 5 tries:\n{last}");
    }

    /// Every node's `host:port`, for `brokers:`.
    pub fn addresses(&self) -> Vec<String> {
        self.nodes.iter().map(Broker::address).collect()
    }

    /// The node (index in `nodes`) leading `partition` of `topic`.
    pub fn leader(&self, topic: &str, partition: i32) -> usize {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", self.addresses().join(","))
            .create()
            .unwrap();
        let meta = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .unwrap();
        let leader = meta.topics()[0]
            .partitions()
            .iter()
            .find(|p| p.id() == partition)
            .expect("the partition")
            .leader();
        self.nodes
            .iter()
            .position(|b| b.node as i32 == leader)
            .expect("a leader among the nodes")
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
