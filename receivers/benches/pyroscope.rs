//! The `pyroscope` receiver's conversions against the baseline every OTLP
//! receiver pays anyway: prost decode of the OTLP request they produce.
//! Folded ingest of a 10k-line body (Python-like frames); the same 10k
//! stacks as a speedscope `sampled` profile, a trie and a tree (each read
//! into folded text, then through the folded converter, as the handler
//! does); and pprof ingest of the Go CPU fixture (gzip'd, as the Go SDK
//! sends it: inflate, decode, import, label mapping).
//!
//! `cargo bench -p profcol-receivers --bench pyroscope`
//!
//! After criterion's groups, a summary gives each conversion per sample
//! and as a ratio to prost decode (best of several interleaved runs), and
//! the speedscope, trie and tree ones as a ratio to folded ingest of the
//! same stacks, the decoder they end in.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use prost::Message;

use profcol_model::memory::MemoryBudget;
use profcol_model::proto::{data_into_request, ExportProfilesServiceRequest, ProfilesData};
use profcol_pyroscope::speedscope;
use profcol_pyroscope::tree::{self, Layout};
use profcol_receivers::pyroscope::convert::{Converter, SampleTypes, Window, Work};
use profcol_receivers::pyroscope::folded::{Shape, Text};
use profcol_receivers::pyroscope::labels::{describe, Described};

const RUNS: usize = 15;

struct Case {
    name: &'static str,
    convert: Box<dyn Fn() -> ProfilesData>,
    /// Bytes of the body converted (the pprof as sent: gzip'd).
    input: usize,
    /// The OTLP request the conversion makes, encoded.
    otlp: Vec<u8>,
    samples: u64,
}

fn work() -> Work {
    Work {
        memory: MemoryBudget::new(usize::MAX / 2).try_admit(0).unwrap(),
        limit: 64 << 20,
    }
}

fn described() -> Described {
    let labels = [("env".to_owned(), "prod".to_owned())];
    describe(Some("pyapp"), &labels, None)
}

/// 10,000 distinct stacks 8 to 40 deep over 400 frames written as
/// pyroscope-rs writes Python frames, counts 1 to 100; root first.
fn stacks() -> Vec<(Vec<String>, u64)> {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rand = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    (0..10_000)
        .map(|line| {
            let depth = 8 + rand(33);
            let mut frames: Vec<String> = (0..depth)
                .map(|d| {
                    let f = if d < 3 { d } else { rand(400) };
                    format!("pkg{}/module_{f}.py:{} - handler_{f}", f % 40, 100 + f * 7)
                })
                .collect();
            // The leaf makes every line its own stack.
            frames.push(format!("leaf.py:{line} - leaf"));
            (frames, 1 + rand(100))
        })
        .collect()
}

fn folded_body(stacks: &[(Vec<String>, u64)]) -> Vec<u8> {
    let mut body = String::new();
    for (i, (frames, count)) in stacks.iter().enumerate() {
        if i > 0 {
            body.push('\n');
        }
        write!(body, "{} {count}", frames.join(";")).unwrap();
    }
    body.into_bytes()
}

/// The stacks as one speedscope `sampled` profile in counts (`none`), as
/// py-spy writes a thread: a shared frame table, samples of its indices.
fn speedscope_body(stacks: &[(Vec<String>, u64)]) -> Vec<u8> {
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    let mut frames = Vec::new();
    let samples: Vec<Vec<usize>> = stacks
        .iter()
        .map(|(fs, _)| {
            fs.iter()
                .map(|f| {
                    *index.entry(f).or_insert_with(|| {
                        frames.push(serde_json::json!({ "name": f }));
                        frames.len() - 1
                    })
                })
                .collect()
        })
        .collect();
    let weights: Vec<u64> = stacks.iter().map(|(_, c)| *c).collect();
    serde_json::to_vec(&serde_json::json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": { "frames": frames },
        "profiles": [{
            "type": "sampled", "name": "MainThread", "unit": "none",
            "startValue": 0, "endValue": weights.iter().sum::<u64>(),
            "samples": samples, "weights": weights,
        }],
    }))
    .unwrap()
}

#[derive(Default)]
struct Node {
    value: u64,
    children: BTreeMap<String, Node>,
}

/// The stacks as Pyroscope's binary trie or tree: a node per frame (a
/// trie's pieces split at the `;`, which a trie may do), in preorder.
fn binary_body(stacks: &[(Vec<String>, u64)], layout: Layout) -> Vec<u8> {
    let mut root = Node::default();
    for (frames, count) in stacks {
        let mut n = &mut root;
        for (d, f) in frames.iter().enumerate() {
            let piece = match layout {
                Layout::Trie if d > 0 => format!(";{f}"),
                _ => f.clone(),
            };
            n = n.children.entry(piece).or_default();
        }
        n.value += count;
    }
    fn write(out: &mut Vec<u8>, name: &str, n: &Node) {
        prost::encoding::encode_varint(name.len() as u64, out);
        out.extend_from_slice(name.as_bytes());
        prost::encoding::encode_varint(n.value, out);
        prost::encoding::encode_varint(n.children.len() as u64, out);
        for (name, c) in &n.children {
            write(out, name, c);
        }
    }
    let mut out = Vec::new();
    write(&mut out, "", &root);
    out
}

fn case(name: &'static str, input: usize, convert: impl Fn() -> ProfilesData + 'static) -> Case {
    let data = convert();
    let samples = data
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles)
        .map(|p| p.samples.len() as u64)
        .sum();
    Case {
        name,
        input,
        otlp: data_into_request(data).encode_to_vec(),
        convert: Box::new(convert),
        samples,
    }
}

fn folded_shape() -> Shape {
    Shape {
        sample_type: ("samples".into(), "count".into()),
        period_type: Some(("cpu".into(), "nanoseconds".into())),
        period: 10_000_000,
        time_unix_nano: 1_795_728_140_000_000_000,
        duration_nano: 10_000_000_000,
    }
}

/// Folded text through the receiver's folded converter.
fn from_folded(c: &mut Converter, text: &[u8], labels: &Described, w: &mut Work) {
    c.text(
        text,
        Text::Folded,
        &folded_shape(),
        labels,
        &SampleTypes::default(),
        w,
    )
    .unwrap();
}

fn cases() -> Vec<Case> {
    let stacks = stacks();
    let body = folded_body(&stacks);
    let folded = case("folded_10k_lines", body.len(), move || {
        let mut c = Converter::new();
        from_folded(&mut c, &body, &described(), &mut work());
        c.finish().unwrap()
    });
    let json = speedscope_body(&stacks);
    let speedscope = case("speedscope_10k", json.len(), move || {
        let mut c = Converter::new();
        let mut w = work();
        let parts = speedscope::to_folded(&json, &mut |n| w.reserve(n)).unwrap();
        for p in parts {
            // As the handler labels each profile of a file.
            let labels = [("profile_name".to_owned(), p.name)];
            let d = describe(Some("pyapp"), &labels, None);
            from_folded(&mut c, &p.folded, &d, &mut w);
        }
        c.finish().unwrap()
    });
    let binary = |name, layout| {
        let bin = binary_body(&stacks, layout);
        case(name, bin.len(), move || {
            let mut c = Converter::new();
            let mut w = work();
            let text = tree::to_folded(&bin, layout, &mut |n| w.reserve(n)).unwrap();
            from_folded(&mut c, &text, &described(), &mut w);
            c.finish().unwrap()
        })
    };
    let trie = binary("trie_10k", Layout::Trie);
    let tree = binary("tree_10k", Layout::Tree);
    let gz = profcol_model::testing::fixture("pprof/go-cpu.pb.gz");
    let pprof = case("pprof_go_cpu", gz.len(), move || {
        let mut c = Converter::new();
        let window = Window { from: 0, until: 0 };
        c.pprof(
            &gz,
            &described(),
            &SampleTypes::default(),
            window,
            &mut work(),
        )
        .unwrap();
        c.finish().unwrap()
    });
    vec![folded, speedscope, trie, tree, pprof]
}

fn decode(otlp: &[u8]) -> ExportProfilesServiceRequest {
    ExportProfilesServiceRequest::decode(otlp).unwrap()
}

fn main() {
    let cases = cases();
    let mut c = Criterion::default().sample_size(20).configure_from_args();
    for k in &cases {
        println!(
            "{}: {} samples, input {} bytes, OTLP {} bytes",
            k.name,
            k.samples,
            k.input,
            k.otlp.len()
        );
        let mut g = c.benchmark_group(k.name);
        g.throughput(Throughput::Elements(k.samples));
        g.bench_function("otlp_prost_decode", |b| {
            b.iter(|| black_box(decode(&k.otlp)))
        });
        g.bench_function("convert", |b| b.iter(|| black_box((k.convert)())));
        g.finish();
    }
    c.final_summary();

    println!("\nsummary (best of {RUNS} interleaved runs): cost per sample, and as a ratio to prost decode of the OTLP request it makes");
    let mut converts = Vec::new();
    for k in &cases {
        let mut best = [Duration::MAX; 2];
        for _ in 0..RUNS {
            let t = Instant::now();
            black_box(decode(&k.otlp));
            best[0] = best[0].min(t.elapsed());
            let t = Instant::now();
            black_box((k.convert)());
            best[1] = best[1].min(t.elapsed());
        }
        let per = |d: Duration| d.as_secs_f64() * 1e9 / k.samples as f64;
        println!(
            "  {:<18} {:>6} samples: prost decode {:>9.2?} ({:.0} ns/sample), convert {:>9.2?} ({:.0} ns/sample) = {:.2}x",
            k.name,
            k.samples,
            best[0],
            per(best[0]),
            best[1],
            per(best[1]),
            best[1].as_secs_f64() / best[0].as_secs_f64()
        );
        converts.push((k.name, best[1]));
    }
    // speedscope, trie and tree end in the folded converter: their ratio
    // to it (same 10k stacks) is what reading the format adds.
    let folded = converts[0].1.as_secs_f64();
    for (name, t) in &converts[1..4] {
        println!(
            "  {name:<18} = {:.2}x folded ingest of the same stacks",
            t.as_secs_f64() / folded
        );
    }
}
