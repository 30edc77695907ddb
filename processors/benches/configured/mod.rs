//! A processor made from its YAML config as a pipeline makes it, benched
//! with criterion and timed in [`turns`](super::turns) against the prost
//! decode of its input.

use bytes::Bytes;
use criterion::{BatchSize, Criterion, Throughput};

use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor, ProcessorFactory, Verdict};
use profcol_pipeline::config::{ComponentConfig, Kind};
use profcol_pipeline::telemetry::Telemetry;

use super::turns;

pub(crate) fn processor(factory: &dyn ProcessorFactory, yaml: &str) -> Box<dyn Processor> {
    let cfg =
        ComponentConfig::from_yaml(Kind::Processor, factory.type_name(), yaml).expect("config");
    factory.create(&cfg).expect("valid config")
}

/// Benches `p` on batches of `bytes` (`samples` each) in criterion group
/// `group`, as a receiver hands them on: decoded by prost, with the spare
/// capacity decoding leaves in each sample's vectors (a clone would have
/// none). Returns its timing in turns for the summary.
pub(crate) fn bench(
    c: &mut Criterion,
    group: &str,
    name: &str,
    bytes: &Bytes,
    samples: usize,
    mut p: Box<dyn Processor>,
) -> (String, turns::Timing) {
    let timing = turns::processor(bytes, &mut *p);
    let telemetry = Telemetry::new();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(samples as u64));
    g.bench_function(name, |b| {
        b.iter_batched(
            || ProfileBatch::decode(bytes.clone()).expect("decode"),
            |mut batch| {
                let mut ctx = ProcessContext::new("bench", name, &telemetry);
                let v = p.process(&mut batch, &mut ctx);
                (v == Verdict::Keep, batch)
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
    (name.to_owned(), timing)
}
