//! A processor timed against the prost decode of its own input, in turns
//! (so that the machine's drift moves both alike), in two states of the
//! heap:
//!
//! - fresh: each batch is dropped once processed; the best of [`RUNS`].
//!   The ratio of record: both sides run on the same unscattered heap.
//! - steady: the last [`HELD`] batches stay alive, as batches in flight in
//!   a pipeline do; after [`WARM`] rounds, the median of [`RUNS`]. Once
//!   the heap has served a few batches whose samples were removed one by
//!   one, the vectors of a decoded request lie scattered in it, and every
//!   pass over them slows down: what a long-running collector sees. The
//!   decode slows too (about twice after `thread_pruning` or `sampling`),
//!   but that is the dropping processor's doing, so the steady time is
//!   given against the fresh decode.
use std::collections::VecDeque;
use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::Bytes;
use prost::Message;

use profcol_model::proto::ProfilesData;
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor};
use profcol_pipeline::telemetry::Telemetry;

pub(crate) const RUNS: usize = 30;
pub(crate) const WARM: usize = 10;
pub(crate) const HELD: usize = 2;

pub(crate) struct Timing {
    /// Best processor time and best decode time, fresh heap.
    pub fresh: (Duration, Duration),
    /// Median processor and decode times, steady heap.
    pub steady: (Duration, Duration),
}

/// One decode of `bytes`, timed, as the batch a receiver hands on (with the
/// spare capacity decoding leaves in each sample's vectors), then `run` on
/// it, timed.
fn round(
    bytes: &Bytes,
    run: &mut impl FnMut(&mut ProfileBatch),
) -> (Duration, Duration, ProfileBatch) {
    let t = Instant::now();
    let data = black_box(ProfilesData::decode(&bytes[..]).expect("decode"));
    let decode = t.elapsed();
    let mut batch = ProfileBatch::from_encoded(data, bytes.clone());
    let t = Instant::now();
    run(&mut batch);
    (t.elapsed(), decode, batch)
}

/// Times `run` on batches of `bytes` in both heap states (module docs).
pub(crate) fn in_turns(bytes: &Bytes, mut run: impl FnMut(&mut ProfileBatch)) -> Timing {
    let (mut took, mut decode) = (Duration::MAX, Duration::MAX);
    for _ in 0..RUNS {
        let (t, d, batch) = round(bytes, &mut run);
        drop(black_box(batch));
        took = took.min(t);
        decode = decode.min(d);
    }
    let mut held = VecDeque::with_capacity(HELD + 1);
    let mut rounds = Vec::with_capacity(RUNS);
    for k in 0..WARM + RUNS {
        let (t, d, batch) = round(bytes, &mut run);
        held.push_back(batch);
        if held.len() > HELD {
            held.pop_front();
        }
        if k >= WARM {
            rounds.push((t, d));
        }
    }
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    Timing {
        fresh: (took, decode),
        steady: (
            median(rounds.iter().map(|r| r.0).collect()),
            median(rounds.iter().map(|r| r.1).collect()),
        ),
    }
}

/// [`in_turns`] for processor `p`, called as the pipeline calls it.
pub(crate) fn processor(bytes: &Bytes, p: &mut dyn Processor) -> Timing {
    let telemetry = Telemetry::new();
    in_turns(bytes, |batch| {
        let mut ctx = ProcessContext::new("bench", "summary", &telemetry);
        black_box(p.process(batch, &mut ctx));
    })
}

/// The summary line of `name`.
pub(crate) fn line(name: &str, t: &Timing, target: f64) -> String {
    let (took, decode) = t.fresh;
    let (s_took, s_decode) = t.steady;
    let of_decode = |d: Duration| d.as_secs_f64() / decode.as_secs_f64();
    format!(
        "  {name:<36} {took:>8.2?} / {decode:>7.2?} = {:.2}x (target <= {target}x) | steady heap {s_took:>8.2?} = {:.2}x of the fresh decode (decode there {s_decode:.2?})",
        of_decode(took),
        of_decode(s_took),
    )
}

pub(crate) fn header(samples: usize, stacks: usize) -> String {
    format!(
        "\nsummary ({samples} samples, {stacks} stacks): each against prost decode of its own request, timed in turns with it; fresh heap: best of {RUNS}; steady heap ({HELD} batches held, after {WARM} rounds): median of {RUNS}"
    )
}
