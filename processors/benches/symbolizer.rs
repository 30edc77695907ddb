//! `symbolizer` on profiles shaped as the eBPF profiler sends them: 100k
//! samples over 20k stacks of 10 native frames, 5k distinct addresses in
//! 20 C binaries built here (gcc -g -O2). Warm: every address is in the
//! result cache; the baseline is prost decode of the same request (issue
//! target: within 0.3x). Cold: the first batch, every debug file parsed
//! and every address resolved, reported per MB of DWARF.
//!
//! `cargo bench -p profcol-processors --bench symbolizer -- --warm-up-time 1 --measurement-time 3`

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use prost::Message;

use profcol_model::dictionary::DictionaryBuilder;
use profcol_model::proto::{
    any_value::Value as A, AnyValue, Location, Mapping, Profile, ProfilesData, ResourceProfiles,
    Sample, ScopeProfiles,
};
use profcol_model::ProfileBatch;
use profcol_pipeline::component::ProcessContext;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BINARIES: usize = 20;
const FUNCTIONS: usize = 50;
const PER_FUNCTION: usize = 5;
const SAMPLES: usize = 100_000;
const STACKS: usize = 20_000;
const DEPTH: usize = 10;

fn out(cmd: &mut Command) -> String {
    let o = cmd.output().expect("run");
    assert!(o.status.success(), "{cmd:?}");
    String::from_utf8(o.stdout).unwrap()
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// A binary: path, build id, (offset, vaddr, size) of its text, addresses,
/// bytes of DWARF.
struct Bin {
    path: String,
    id: String,
    text: (u64, u64, u64),
    addrs: Vec<u64>,
    dwarf: u64,
}

fn build(dir: &Path, k: usize) -> Bin {
    let mut src = String::from("#include <stdio.h>\n");
    for f in 0..FUNCTIONS {
        src += &format!(
            "static inline int h{f}(int x) {{ return x * {m} + {k}; }}\n\
             __attribute__((noinline)) int f{f}(int n) {{ int s = 0; for (int i = 0; i < n; i++) s += h{f}(i) ^ (s >> 3); return s; }}\n",
            m = f + 3
        );
    }
    src += "int main(int c, char **v) { int s = 0;\n";
    for f in 0..FUNCTIONS {
        src += &format!("s += f{f}(c * 100);\n");
    }
    src += "printf(\"%d\\n\", s); return 0; }\n";
    let c = dir.join(format!("b{k}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(format!("b{k}"));
    out(Command::new("gcc")
        .args(["-g", "-O2", "-Wl,--build-id", "-o"])
        .arg(&exe)
        .arg(&c));
    let notes = out(Command::new("readelf").arg("-nW").arg(&exe));
    let id = notes
        .lines()
        .find_map(|l| l.split("Build ID: ").nth(1))
        .unwrap()
        .trim()
        .to_string();
    let phdrs = out(Command::new("readelf").arg("-lW").arg(&exe));
    let text = phdrs
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&"LOAD") && w.contains(&"E"))
        .map(|w| (hex(w[1]), hex(w[2]), hex(w[4])))
        .unwrap();
    let sections = out(Command::new("readelf").arg("-SW").arg(&exe));
    let dwarf = sections
        .lines()
        .filter(|l| l.contains(".debug_"))
        .filter_map(|l| {
            let l = &l[l.find(']')? + 1..];
            let w: Vec<_> = l.split_whitespace().collect();
            Some(hex(w.get(4)?))
        })
        .sum();
    let nm = out(Command::new("nm").arg("-S").arg(&exe));
    let mut addrs = Vec::new();
    for line in nm.lines() {
        let w: Vec<_> = line.split_whitespace().collect();
        if w.len() == 4 && w[3].starts_with('f') && w[3][1..].parse::<usize>().is_ok() {
            let (start, size) = (hex(w[0]), hex(w[1]));
            for j in 0..PER_FUNCTION as u64 {
                addrs.push(start + size * j / PER_FUNCTION as u64);
            }
        }
    }
    assert_eq!(addrs.len(), FUNCTIONS * PER_FUNCTION);
    Bin {
        path: exe.to_str().unwrap().to_string(),
        id,
        text,
        addrs,
        dwarf,
    }
}

fn request(bins: &[Bin]) -> ProfilesData {
    let mut d = DictionaryBuilder::new();
    let native = d.attribute_kv(
        "profile.frame.type",
        AnyValue {
            value: Some(A::StringValue("native".into())),
        },
        "",
    );
    let mut locs = Vec::new();
    for b in bins {
        let id = d.attribute_kv(
            "process.executable.build_id.gnu",
            AnyValue {
                value: Some(A::StringValue(b.id.clone())),
            },
            "",
        );
        let filename = d.string(&b.path);
        let m = d.mapping(Mapping {
            memory_start: b.text.1,
            memory_limit: b.text.1 + b.text.2,
            file_offset: b.text.0,
            filename_strindex: filename,
            attribute_indices: vec![id],
        });
        for &a in &b.addrs {
            locs.push(d.location(Location {
                mapping_index: m,
                address: a,
                lines: vec![],
                attribute_indices: vec![native],
            }));
        }
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let stacks: Vec<i32> = (0..STACKS)
        .map(|_| {
            let s: Vec<i32> = (0..DEPTH)
                .map(|_| locs[next() as usize % locs.len()])
                .collect();
            d.stack(&s)
        })
        .collect();
    let samples = (0..SAMPLES)
        .map(|i| Sample {
            stack_index: stacks[i % STACKS],
            values: vec![1],
            timestamps_unix_nano: vec![1_700_000_000_000_000_000 + i as u64],
            ..Default::default()
        })
        .collect();
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            scope_profiles: vec![ScopeProfiles {
                profiles: vec![Profile {
                    samples,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
        dictionary: Some(d.finish()),
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let bins: Vec<Bin> = (0..BINARIES).map(|k| build(dir.path(), k)).collect();
    let data = request(&bins);
    let bytes = Bytes::from(data.encode_to_vec());
    let yaml = format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 600s\nworkers: 2",
        dir.path().display()
    );
    let mut p = profcol_processors::symbolizer::from_yaml(&yaml).unwrap();
    // Cold: one batch parses every file and resolves every address.
    let t = Instant::now();
    let mut b = ProfileBatch::new(data.clone());
    let mut ctx = ProcessContext::deferred("profiles", "symbolizer");
    p.process(&mut b, &mut ctx);
    let cold = t.elapsed();
    let events = ctx.into_counts().events;
    assert_eq!(
        events,
        vec![(
            "symbolizer_locations_symbolized",
            (BINARIES * FUNCTIONS * PER_FUNCTION) as u64
        )]
    );
    profcol_model::validate(b.data()).unwrap();
    let dwarf: u64 = bins.iter().map(|b| b.dwarf).sum();
    println!(
        "request: {} bytes, {SAMPLES} samples; cold: {:?} for {:.2} MB of DWARF in {BINARIES} files = {:.1} ms/MB",
        bytes.len(),
        cold,
        dwarf as f64 / 1e6,
        cold.as_secs_f64() * 1e3 / (dwarf as f64 / 1e6)
    );

    let mut g = c.benchmark_group("symbolizer");
    g.throughput(Throughput::Elements(SAMPLES as u64));
    g.bench_function("prost_decode", |b| {
        b.iter(|| ProfilesData::decode(&bytes[..]).unwrap())
    });
    g.bench_function("warm_cache", |b| {
        b.iter_batched(
            || ProfileBatch::new(data.clone()),
            |mut batch| {
                let mut ctx = ProcessContext::deferred("profiles", "symbolizer");
                p.process(&mut batch, &mut ctx);
                batch
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
