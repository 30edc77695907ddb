//! The broker of the `kafka-export` and `kafka-receive` cases: one Apache
//! Kafka node in KRaft mode on 127.0.0.1, from the jars
//! `tests/kafka/fetch.sh` caches, with the machine's JDK, started once per
//! run and shared by its rounds (each measurement gets its own topic).
//!
//! Unlike the tests' broker it runs with the JVM's full JIT and room for
//! the large request in one message, so that the broker is not what limits
//! the rate measured.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};

/// Partitions of each topic: one per request the load generator keeps in
/// flight, so that consumers may read as many at once as senders send.
pub const PARTITIONS: i32 = 4;

/// The largest message, broker and clients alike: the large request
/// (~10 MB) fits whole, as it does through OTLP.
pub const MAX_MESSAGE_BYTES: u64 = 64 << 20;

pub struct Broker {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Broker {
    pub async fn start() -> anyhow::Result<Broker> {
        let out = Command::new("bash")
            .arg("tests/kafka/fetch.sh")
            .stderr(Stdio::inherit())
            .output()?;
        anyhow::ensure!(out.status.success(), "tests/kafka/fetch.sh failed");
        let jars = PathBuf::from(
            String::from_utf8(out.stdout)?
                .lines()
                .last()
                .unwrap_or("")
                .trim(),
        );
        let dir = tempfile::tempdir()?;
        let (port, controller) = (crate::run::free_port()?, crate::run::free_port()?);
        let props = dir.path().join("server.properties");
        std::fs::write(
            &props,
            format!(
                "process.roles=broker,controller\n\
                 node.id=1\n\
                 controller.quorum.voters=1@127.0.0.1:{controller}\n\
                 listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{port}\n\
                 controller.listener.names=CONTROLLER\n\
                 log.dirs={}\n\
                 offsets.topic.replication.factor=1\n\
                 transaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\n\
                 share.coordinator.state.topic.replication.factor=1\n\
                 share.coordinator.state.topic.min.isr=1\n\
                 group.initial.rebalance.delay.ms=0\n\
                 message.max.bytes={MAX_MESSAGE_BYTES}\n\
                 replica.fetch.max.bytes={MAX_MESSAGE_BYTES}\n\
                 file.delete.delay.ms=0\n",
                dir.path().join("data").display()
            ),
        )?;
        let java = |main: &str| {
            let mut cmd = Command::new("java");
            cmd.arg("-Xmx1g")
                .arg("-Dlog4j2.configurationFile=tests/kafka/log4j2.properties")
                .arg("-cp")
                .arg(format!("{}/libs/*", jars.display()))
                .arg(main);
            cmd
        };
        let format = java("kafka.tools.StorageTool")
            .args(["format", "-t", "cHJvZmNvbC1iZW5jaC1rYWY", "-c"])
            .arg(&props)
            .output()?;
        anyhow::ensure!(
            format.status.success(),
            "kafka-storage format failed: {}",
            String::from_utf8_lossy(&format.stderr)
        );
        let child = java("kafka.Kafka")
            .arg(&props)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let mut broker = Broker {
            child,
            port,
            _dir: dir,
        };
        let started = Instant::now();
        loop {
            if let Some(status) = broker.child.try_wait()? {
                anyhow::bail!("the Kafka broker exited: {status}");
            }
            let address = broker.address();
            let up = tokio::task::spawn_blocking(move || {
                let consumer: Result<BaseConsumer, _> = ClientConfig::new()
                    .set("bootstrap.servers", &address)
                    .create();
                consumer.is_ok_and(|c| c.fetch_metadata(None, Duration::from_secs(1)).is_ok())
            })
            .await?;
            if up {
                return Ok(broker);
            }
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(60),
                "the Kafka broker was not ready within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The broker's process, whose CPU the kafka cases report beside.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub async fn create_topic(&self, topic: &str) -> anyhow::Result<()> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", self.address())
            .create()?;
        let results = admin
            .create_topics(
                &[NewTopic::new(topic, PARTITIONS, TopicReplication::Fixed(1))],
                &AdminOptions::new().operation_timeout(Some(Duration::from_secs(10))),
            )
            .await?;
        for r in results {
            r.map_err(|(t, e)| anyhow::anyhow!("creating topic {t}: {e}"))?;
        }
        Ok(())
    }

    /// Deletes `topic` and its data: a run writes gigabytes per case.
    pub async fn delete_topic(&self, topic: &str) -> anyhow::Result<()> {
        let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
            .set("bootstrap.servers", self.address())
            .create()?;
        for r in admin.delete_topics(&[topic], &AdminOptions::new()).await? {
            r.map_err(|(t, e)| anyhow::anyhow!("deleting topic {t}: {e}"))?;
        }
        Ok(())
    }

    /// Messages written to `topic` so far: its partitions' high watermarks.
    pub async fn messages(&self, topic: &str) -> u64 {
        let (address, topic) = (self.address(), topic.to_owned());
        tokio::task::spawn_blocking(move || {
            let Ok(consumer) = ClientConfig::new()
                .set("bootstrap.servers", &address)
                .create::<BaseConsumer>()
            else {
                return 0;
            };
            (0..PARTITIONS)
                .filter_map(|p| {
                    consumer
                        .fetch_watermarks(&topic, p, Duration::from_secs(5))
                        .ok()
                })
                .map(|(_, high)| high.max(0) as u64)
                .sum()
        })
        .await
        .unwrap_or(0)
    }

    /// Writes `n` messages of `value` to `topic`, spread over its partitions,
    /// and waits until the broker has them all.
    pub async fn fill(
        &self,
        topic: &str,
        value: &[u8],
        n: u64,
        compression: &str,
    ) -> anyhow::Result<()> {
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", self.address())
            .set("compression.codec", compression)
            .set("message.max.bytes", MAX_MESSAGE_BYTES.to_string())
            .set("linger.ms", "5")
            .create()?;
        let mut pending = futures::stream::FuturesUnordered::new();
        for i in 0..n {
            let record = FutureRecord::<(), [u8]>::to(topic)
                .payload(value)
                .partition((i % PARTITIONS as u64) as i32);
            pending.push(producer.send(record, Duration::from_secs(30)));
            // A bounded window: the producer's queue holds copies.
            if pending.len() >= 64 {
                if let Some(Err((e, _))) = pending.next().await {
                    anyhow::bail!("filling {topic}: {e}");
                }
            }
        }
        while let Some(r) = pending.next().await {
            r.map_err(|(e, _)| anyhow::anyhow!("filling {topic}: {e}"))?;
        }
        Ok(())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
