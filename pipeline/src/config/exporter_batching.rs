//! `sending_queue::batch`, the Collector's batching in the exporter
//! (exporterhelper; the batching migration makes it the default), made of
//! what profcol already runs. An exporter whose sending queue batches gets a
//! pipeline of its own in front of it: the profiles pipelines that list it
//! send to a `forward` connector instead, which feeds
//! `profiles/sending_queue_batch_<exporter>`, a pipeline with one `batch`
//! processor (`batch/sending_queue_<exporter>`) that exports to it. So the
//! data of every pipeline bound for that exporter is batched together, as in
//! the Collector; the batches held count in the memory budget, and what goes
//! out waits for room in the exporter's queue, as a `batch` processor's
//! output does.
//!
//! The keys and checks are exporterhelper's (`flush_timeout`, `min_size`,
//! `max_size`, `sizer`, `partition`). Sizes are in samples, the `items` of
//! profiles, or in bytes of the encoded requests (`sizer: bytes`). A disabled
//! queue does not batch (the Collector's `batch` lives in its queue), and
//! metrics pipelines send unbatched: profcol's `batch` holds profiles.

use std::collections::BTreeSet;

use figment::value::{Dict, Value};
use serde::Deserialize;

use super::decode::decode_partial;
use super::expand::Originals;
use super::{
    ComponentConfig, ComponentId, Config, ConfigErrors, Duration, Kind, PipelineConfig, Signal,
};

/// `sending_queue::batch`, as exporterhelper reads it.
#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct BatchKeys {
    flush_timeout: Duration,
    min_size: i64,
    max_size: i64,
    sizer: Option<BatchSizer>,
    partition: PartitionKeys,
}

/// exporterhelper's sizers: `items` are samples here.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum BatchSizer {
    Items,
    Bytes,
    Requests,
}

impl Default for BatchKeys {
    fn default() -> Self {
        Self {
            flush_timeout: Duration::from_millis(200),
            min_size: 8192,
            max_size: 0,
            sizer: None,
            partition: PartitionKeys::default(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct PartitionKeys {
    metadata_keys: Vec<String>,
    cache_size: i64,
    /// How long an empty partition stays: profcol's `batch` keeps none (a
    /// partition goes when it sends), so only its check applies.
    idle_timeout: Duration,
}

impl Default for PartitionKeys {
    fn default() -> Self {
        Self {
            metadata_keys: Vec::new(),
            cache_size: 10_000,
            idle_timeout: Duration::from_secs(90),
        }
    }
}

/// The parts of a `sending_queue` this module reads (the runtime reports
/// what is wrong with them).
#[derive(Deserialize)]
struct QueueKeys {
    #[serde(default = "enabled")]
    enabled: bool,
    sizer: Option<BatchSizer>,
}

fn enabled() -> bool {
    true
}

/// Takes `sending_queue::batch` out of every exporter and, for those whose
/// queue is on and that a profiles pipeline lists, puts the batching
/// pipeline in front of them (see the module's doc). Errors name the keys
/// under `exporters::<id>::sending_queue::batch`.
pub(super) fn rewrite(config: &mut Config, errs: &mut ConfigErrors) {
    let ids: Vec<ComponentId> = config.exporters.keys().cloned().collect();
    for id in ids {
        let cfg = config.exporters.get_mut(&id).expect("listed above");
        let Some((batch, queue)) = take_batch(cfg) else {
            continue;
        };
        let base = format!("exporters::{id}::sending_queue");
        let (queue, queue_errs) = decode_partial::<QueueKeys>(&queue, &Originals::new(), &base);
        if !queue_errs.is_empty() {
            // The runtime's decode of the queue reports them.
            continue;
        }
        let queue = queue.expect("a queue that decodes");
        let Some((processor, metadata_keys)) =
            batch_processor(&batch, queue.sizer, &format!("{base}::batch"), errs)
        else {
            continue;
        };
        let profiles: Vec<String> = config
            .service
            .pipelines
            .iter()
            .filter(|(_, p)| p.signal == Signal::Profiles && p.exporters.contains(&id))
            .map(|(pid, _)| pid.clone())
            .collect();
        if !queue.enabled || profiles.is_empty() {
            continue;
        }
        let connector = hidden("forward", &format!("sending_queue_batch_{id}"));
        let batcher = hidden("batch", &format!("sending_queue_{id}"));
        let pipeline = format!("profiles/sending_queue_batch_{id}");
        if config.connectors.contains_key(&connector)
            || config.processors.contains_key(&batcher)
            || config.service.pipelines.contains_key(&pipeline)
        {
            errs.push(
                format!("{base}::batch"),
                format!("batching in front of the exporter takes the ids \"{connector}\", \"{batcher}\" and \"{pipeline}\", and the config uses one of them"),
            );
            continue;
        }
        for pid in &profiles {
            let exporters = &mut config
                .service
                .pipelines
                .get_mut(pid)
                .expect("listed above")
                .exporters;
            exporters.retain(|e| *e != id && *e != connector);
            exporters.push(connector.clone());
        }
        config.connectors.insert(
            connector.clone(),
            section(Kind::Connector, &connector, Dict::new()),
        );
        config.processors.insert(
            batcher.clone(),
            section(Kind::Processor, &batcher, processor),
        );
        config.service.pipelines.insert(
            pipeline,
            PipelineConfig {
                signal: Signal::Profiles,
                receivers: vec![connector],
                processors: vec![batcher],
                exporters: vec![id.clone()],
            },
        );
        config.batched_exporters.insert(id.clone(), metadata_keys);
    }
}

/// Removes `sending_queue::batch` from `cfg` (a key present even empty, as
/// the Collector reads `batch:`), returning it with the queue's other keys.
fn take_batch(cfg: &mut ComponentConfig) -> Option<(Value, Value)> {
    let Value::Dict(_, section) = &mut cfg.value else {
        return None;
    };
    let Some(Value::Dict(_, queue)) = section.get_mut("sending_queue") else {
        return None;
    };
    let batch = queue.remove("batch")?;
    let queue = Value::from(queue.clone());
    cfg.originals
        .retain(|p, _| !(p.len() > 1 && p[0] == "sending_queue" && p[1] == "batch"));
    let batch = match batch {
        Value::Empty(..) => Value::from(Dict::new()),
        other => other,
    };
    Some((batch, queue))
}

/// The `batch` processor's section for exporterhelper's `batch` at `path`,
/// with the metadata keys it partitions by, or `None` after reporting why
/// it cannot be.
fn batch_processor(
    batch: &Value,
    queue_sizer: Option<BatchSizer>,
    path: &str,
    errs: &mut ConfigErrors,
) -> Option<(Dict, Vec<String>)> {
    let (keys, decode_errs) = decode_partial::<BatchKeys>(batch, &Originals::new(), path);
    let failed = !decode_errs.is_empty();
    errs.extend(decode_errs);
    let k = keys?;
    let before = errs.0.len();
    if k.flush_timeout.get().is_zero() {
        errs.push(
            format!("{path}::flush_timeout"),
            "must be positive, found 0s",
        );
    }
    if k.min_size < 0 {
        errs.push(
            format!("{path}::min_size"),
            format!("must be non-negative, found {}", k.min_size),
        );
    }
    if k.max_size < 0 {
        errs.push(
            format!("{path}::max_size"),
            format!("must be non-negative, found {}", k.max_size),
        );
    }
    if k.max_size > 0 && k.max_size < k.min_size {
        errs.push(
            format!("{path}::max_size"),
            format!(
                "max_size ({}) must be greater or equal to min_size ({})",
                k.max_size, k.min_size
            ),
        );
    }
    // As exporterhelper: unset, the queue's sizer; the queue's unset too,
    // items.
    let sizer = match k.sizer.or(queue_sizer).unwrap_or(BatchSizer::Items) {
        BatchSizer::Items => "items",
        BatchSizer::Bytes => "bytes",
        BatchSizer::Requests => {
            errs.push(
                format!("{path}::sizer"),
                "batch supports only items or bytes sizer, found \"requests\" (the queue's sizer, when batch has none): set sizer: items",
            );
            "items"
        }
    };
    let mut seen = BTreeSet::new();
    for (i, key) in k.partition.metadata_keys.iter().enumerate() {
        if !seen.insert(key.to_ascii_lowercase()) {
            errs.push(
                format!("{path}::partition::metadata_keys::{i}"),
                format!(
                    "duplicate entry in metadata_keys: {:?} (case-insensitive)",
                    key.to_ascii_lowercase()
                ),
            );
        }
    }
    if k.partition.cache_size <= 0 {
        errs.push(
            format!("{path}::partition::cache_size"),
            format!("must be positive, found {}", k.partition.cache_size),
        );
    }
    if k.partition.idle_timeout.get().is_zero() {
        errs.push(
            format!("{path}::partition::idle_timeout"),
            "must be positive, found 0s",
        );
    }
    let size = |n: i64| Value::from(u32::try_from(n).unwrap_or(u32::MAX));
    let mut out = Dict::new();
    out.insert("timeout".into(), Value::from(k.flush_timeout.to_string()));
    out.insert("sizer".into(), Value::from(sizer));
    out.insert("send_batch_size".into(), size(k.min_size));
    out.insert("send_batch_max_size".into(), size(k.max_size));
    out.insert(
        "metadata_keys".into(),
        Value::from(
            k.partition
                .metadata_keys
                .iter()
                .cloned()
                .map(Value::from)
                .collect::<Vec<_>>(),
        ),
    );
    out.insert(
        "metadata_cardinality_limit".into(),
        size(k.partition.cache_size),
    );
    (!failed && errs.0.len() == before).then_some((out, k.partition.metadata_keys))
}

fn hidden(ty: &str, name: &str) -> ComponentId {
    ComponentId {
        ty: ty.to_owned(),
        name: Some(name.to_owned()),
    }
}

fn section(kind: Kind, id: &ComponentId, value: Dict) -> ComponentConfig {
    ComponentConfig {
        id: id.clone(),
        kind,
        value: Value::from(value),
        originals: Originals::new(),
    }
}
