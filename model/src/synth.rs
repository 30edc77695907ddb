//! Synthetic but realistically shaped OTLP profiles for benchmarks and tests:
//! stacks share prefixes like a real call tree, a few stacks are hot, some
//! locations have inlined lines, samples carry a thread attribute, some a
//! trace link. Deterministic for a given [`Config`].

use crate::proto::{
    any_value::Value, AnyValue, InstrumentationScope, KeyValue, Line, Link, Location, Mapping,
    Profile, ProfilesData, Resource, ResourceProfiles, Sample, ScopeProfiles, ValueType,
};

use super::dictionary::{gc, DictionaryBuilder};

/// What to generate. `Default` is a 100k-sample, 20k-stack CPU profile.
#[derive(Clone, Debug)]
pub struct Config {
    pub samples: usize,
    /// Distinct stacks wanted (fewer if the call tree cannot hold that many).
    pub stacks: usize,
    pub functions: usize,
    pub mappings: usize,
    pub max_depth: usize,
    pub threads: usize,
    /// Resources, each with one profile; samples are split between them.
    pub resources: usize,
    /// Timestamp-only samples (one timestamp each) instead of aggregated values.
    pub timestamps: bool,
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            samples: 100_000,
            stacks: 20_000,
            functions: 4_000,
            mappings: 8,
            max_depth: 40,
            threads: 16,
            resources: 1,
            timestamps: true,
            seed: 1,
        }
    }
}

/// A request with `samples` samples over about `stacks` distinct stacks.
pub fn request(samples: usize, stacks: usize) -> ProfilesData {
    Config {
        samples,
        stacks,
        ..Config::default()
    }
    .build()
}

/// The requests of `profcol-bench` and the benches that compare with it:
/// `small` (1k samples over 500 stacks), `medium` (100k over 20k, ~2 MB),
/// `large` (400k over 60k, 8k functions), `one-value` (1e6 samples of one
/// value each, ~7 MB); `None` for another name.
pub fn sized(name: &str) -> Option<ProfilesData> {
    Some(match name {
        "small" => request(1_000, 500),
        "medium" => request(100_000, 20_000),
        "large" => Config {
            samples: 400_000,
            stacks: 60_000,
            functions: 8_000,
            ..Config::default()
        }
        .build(),
        "one-value" => Config {
            samples: 1_000_000,
            timestamps: false,
            ..Config::default()
        }
        .build(),
        _ => return None,
    })
}

/// `n` requests from the same program (same function names, different
/// stacks and samples): what a collector merges.
pub fn requests(n: usize, samples: usize, stacks: usize) -> Vec<ProfilesData> {
    (0..n)
        .map(|k| {
            Config {
                samples,
                stacks,
                seed: 1 + k as u64,
                ..Config::default()
            }
            .build()
        })
        .collect()
}

/// `n` small requests from `services` programs, round robin, as sidecars
/// send them to a gateway: request `k` comes from service `k % services`,
/// whose resource has its own `service.name`, and holds `samples` samples
/// of that service's program (its call tree of 300 stacks over 200
/// functions, hot stacks more often), with a dictionary of only what they
/// use. Requests of one service thus share most of their dictionary, as
/// successive profiles of one program do.
pub fn service_requests(n: usize, services: usize, samples: usize) -> Vec<ProfilesData> {
    let services = services.max(1);
    let programs: Vec<ProfilesData> = (0..services)
        .map(|s| {
            let mut p = Config {
                samples: 600,
                stacks: 300,
                functions: 200,
                mappings: 2,
                max_depth: 16,
                threads: 2,
                resources: 1,
                timestamps: true,
                seed: 1 + s as u64,
            }
            .build();
            let name = format!("svc{s}");
            if let Some(d) = &mut p.dictionary {
                for text in &mut d.string_table {
                    if text.contains("app") {
                        *text = text.replace("app", &name);
                    }
                }
            }
            for rp in &mut p.resource_profiles {
                if let Some(r) = &mut rp.resource {
                    r.attributes = vec![
                        string_kv("service.name", &name),
                        string_kv("service.instance.id", &format!("{name}-0")),
                        string_kv("host.name", &format!("node-{}", s % 3)),
                    ];
                }
            }
            p
        })
        .collect();
    (0..n)
        .map(|k| {
            let mut data = programs[k % services].clone();
            let mut rng = Rng(0x5eed_0000 + k as u64);
            let profile = &mut data.resource_profiles[0].scope_profiles[0].profiles[0];
            let all = std::mem::take(&mut profile.samples);
            let start = 1_700_000_000_000_000_000u64 + (k as u64) * 1_000_000_000;
            profile.samples = (0..samples)
                .map(|i| {
                    let mut s = all[rng.skewed(all.len())].clone();
                    s.timestamps_unix_nano = vec![start + i as u64 * 10_000_000];
                    s
                })
                .collect();
            profile.time_unix_nano = start;
            profile.duration_nano = 1_000_000_000;
            profile.profile_id = (k as u128 + 1).to_be_bytes().to_vec();
            gc(&mut data);
            data
        })
        .collect()
}

/// splitmix64: tiny, fast, stable across dependency versions.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// Skewed towards 0: a few hot entries, a long tail.
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        ((u * u * u) * n as f64) as usize % n.max(1)
    }
}

impl Config {
    pub fn build(&self) -> ProfilesData {
        let mut rng = Rng(self.seed.wrapping_mul(0x2545_f491_4f6c_dd1d));
        let mut b = DictionaryBuilder::new();

        let mappings: Vec<i32> = (0..self.mappings.max(1))
            .map(|k| {
                let m = Mapping {
                    memory_start: 0x40_0000 + (k as u64) * 0x100_0000,
                    memory_limit: 0x40_0000 + (k as u64 + 1) * 0x100_0000,
                    file_offset: 0,
                    filename_strindex: b.string(&format!("/usr/lib/lib{k}.so")),
                    attribute_indices: vec![],
                };
                b.mapping(m)
            })
            .collect();

        // Function names do not depend on the seed: requests from one program.
        let functions: Vec<i32> = (0..self.functions.max(1))
            .map(|f| {
                let (pkg, ty) = (f % 97, f % 13);
                b.function_named(
                    &format!("app::pkg{pkg}::Type{ty}::method{f}"),
                    &format!("_ZN3app5pkg{pkg}6Type{ty}7method{f}E"),
                    &format!("/srv/app/src/pkg{pkg}/type{ty}.rs"),
                    (f % 500) as i64 + 1,
                )
            })
            .collect();

        // About two call sites per function; one in ten has inlined callees.
        let locations: Vec<i32> = (0..functions.len() * 2)
            .map(|k| {
                let inlined = if rng.below(10) == 0 {
                    1 + rng.below(2)
                } else {
                    0
                };
                let lines = (0..=inlined)
                    .map(|_| Line {
                        function_index: functions[rng.skewed(functions.len())],
                        line: 1 + rng.below(2000) as i64,
                        column: 0,
                    })
                    .collect();
                let mapping = mappings[k % mappings.len()];
                b.location(Location {
                    mapping_index: mapping,
                    address: 0x40_0000 + (k as u64) * 0x40 + rng.below(0x40) as u64,
                    lines,
                    attribute_indices: vec![],
                })
            })
            .collect();

        // A call tree: each new stack extends a prefix of an earlier one.
        let mut paths: Vec<Vec<i32>> = vec![vec![locations[0]]];
        let mut stack_ids: Vec<i32> = Vec::with_capacity(self.stacks);
        let mut leaf_first: Vec<i32> = Vec::with_capacity(self.max_depth);
        let mut attempts = 0;
        while stack_ids.len() < self.stacks.max(1) && attempts < self.stacks.max(1) * 4 {
            attempts += 1;
            let parent = &paths[rng.skewed(paths.len())];
            let keep = 1 + rng.below(parent.len());
            let mut path: Vec<i32> = parent[..keep].to_vec();
            for _ in 0..1 + rng.below(4) {
                if path.len() >= self.max_depth.max(1) {
                    break;
                }
                path.push(locations[rng.below(locations.len())]);
            }
            leaf_first.clear();
            leaf_first.extend(path.iter().rev());
            let before = b.stacks.len();
            let id = b.stack(&leaf_first);
            if b.stacks.len() > before {
                stack_ids.push(id);
                paths.push(path);
            }
        }

        let threads: Vec<i32> = (0..self.threads.max(1))
            .map(|t| {
                let name = if t == 0 {
                    "main".to_owned()
                } else {
                    format!("worker-{t}")
                };
                b.attribute_kv(
                    "thread.name",
                    AnyValue {
                        value: Some(Value::StringValue(name)),
                    },
                    "",
                )
            })
            .collect();
        let links: Vec<i32> = (0..32u64)
            .map(|k| {
                let mut trace_id = [0u8; 16];
                trace_id[..8].copy_from_slice(&(rng.next() | 1).to_be_bytes());
                trace_id[8..].copy_from_slice(&k.to_be_bytes());
                b.link(Link {
                    trace_id: trace_id.to_vec(),
                    span_id: (rng.next() | 1).to_be_bytes().to_vec(),
                })
            })
            .collect();

        let period = 10_000_000i64;
        let start = 1_700_000_000_000_000_000u64 + self.seed * 60_000_000_000;
        let cpu = b.string("cpu");
        let ns = b.string("nanoseconds");
        let resources = self.resources.max(1);
        let per_resource = self.samples.div_ceil(resources);
        let mut resource_profiles = Vec::with_capacity(resources);
        for r in 0..resources {
            let n = per_resource.min(self.samples.saturating_sub(r * per_resource));
            let samples: Vec<Sample> = (0..n)
                .map(|i| {
                    let link_index = if rng.below(10) == 0 {
                        links[rng.below(links.len())]
                    } else {
                        0
                    };
                    let (values, timestamps_unix_nano) = if self.timestamps {
                        (
                            vec![],
                            vec![start + (i as u64) * (period as u64) / threads.len() as u64],
                        )
                    } else {
                        (vec![period * (1 + rng.below(3) as i64)], vec![])
                    };
                    Sample {
                        stack_index: stack_ids[if r * per_resource + i < stack_ids.len() {
                            r * per_resource + i // every stack used at least once
                        } else {
                            rng.skewed(stack_ids.len())
                        }],
                        attribute_indices: vec![threads[rng.below(threads.len())]],
                        link_index,
                        values,
                        timestamps_unix_nano,
                    }
                })
                .collect();
            let profile = Profile {
                sample_type: Some(ValueType {
                    type_strindex: cpu,
                    unit_strindex: ns,
                }),
                samples,
                time_unix_nano: start,
                duration_nano: 60_000_000_000,
                period_type: Some(ValueType {
                    type_strindex: cpu,
                    unit_strindex: ns,
                }),
                period,
                profile_id: (self.seed as u128 * 1000 + r as u128 + 1)
                    .to_be_bytes()
                    .to_vec(),
                ..Default::default()
            };
            resource_profiles.push(ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![
                        string_kv("service.name", "synth-app"),
                        string_kv("service.instance.id", &format!("instance-{r}")),
                    ],
                    ..Default::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    scope: Some(InstrumentationScope {
                        name: "profcol-synth".to_owned(),
                        version: "1".to_owned(),
                        ..Default::default()
                    }),
                    profiles: vec![profile],
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            });
        }
        let mut data = ProfilesData {
            resource_profiles,
            dictionary: Some(b.finish()),
        };
        // Producers send only what their samples use.
        gc(&mut data);
        data
    }
}

fn string_kv(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(Value::StringValue(value.to_owned())),
        }),
        key_strindex: 0,
    }
}

/// Requests with values that once made profcol loop or allocate without
/// end (found by a black-box probe): each is `(name, data)`, a valid
/// dictionary with one Profile of one sample. Every processor and exporter
/// must finish them in bounded time and memory; ingest refuses those whose
/// times lie past 2262.
pub fn hostile() -> Vec<(&'static str, ProfilesData)> {
    const MAX: u64 = u64::MAX;
    let one = |ts: Vec<u64>, values: Vec<i64>, time: u64, duration: u64, unit: &str| {
        let mut b = DictionaryBuilder::new();
        let f = b.function_named("main", "", "main.go", 0);
        let loc = b.location(Location {
            lines: vec![Line {
                function_index: f,
                line: 1,
                column: 0,
            }],
            ..Location::default()
        });
        let stack = b.stack(&[loc]);
        let thread = b.attribute_kv(
            "thread.name",
            AnyValue {
                value: Some(Value::StringValue("main".into())),
            },
            "",
        );
        let (ty, u) = if unit == "count" {
            ("samples", "count")
        } else {
            ("cpu", "nanoseconds")
        };
        let sample_type = ValueType {
            type_strindex: b.string(ty),
            unit_strindex: b.string(u),
        };
        let period_type = ValueType {
            type_strindex: b.string("cpu"),
            unit_strindex: b.string("nanoseconds"),
        };
        let profile = Profile {
            sample_type: Some(sample_type),
            samples: vec![Sample {
                stack_index: stack,
                attribute_indices: vec![thread],
                link_index: 0,
                values,
                timestamps_unix_nano: ts,
            }],
            time_unix_nano: time,
            duration_nano: duration,
            period_type: Some(period_type),
            period: 10_000_000,
            profile_id: vec![7; 16],
            ..Profile::default()
        };
        ProfilesData {
            resource_profiles: vec![ResourceProfiles {
                resource: Some(Resource {
                    attributes: vec![KeyValue {
                        key: "service.name".into(),
                        value: Some(AnyValue {
                            value: Some(Value::StringValue("hostile".into())),
                        }),
                        ..KeyValue::default()
                    }],
                    ..Resource::default()
                }),
                scope_profiles: vec![ScopeProfiles {
                    profiles: vec![profile],
                    ..ScopeProfiles::default()
                }],
                ..ResourceProfiles::default()
            }],
            dictionary: Some(b.finish()),
        }
    };
    let now = 1_795_000_000_000_000_000;
    vec![
        (
            "sample timestamp 2^64-1",
            one(vec![MAX], vec![], now, 0, "count"),
        ),
        (
            "time_unix_nano 2^64-1",
            one(vec![], vec![5], MAX, 1_000_000_000, "count"),
        ),
        (
            "duration_nano 2^64-1",
            one(vec![], vec![5], now, MAX, "count"),
        ),
        (
            "duration 1e13, value 2^62 ns",
            one(vec![], vec![1 << 62], now, 10_000_000_000_000, "ns"),
        ),
        (
            "duration 1e14, value 2^62 ns",
            one(vec![], vec![1 << 62], now, 100_000_000_000_000, "ns"),
        ),
        (
            "no duration, value 2^63-1 count",
            one(vec![], vec![i64::MAX], now, 0, "count"),
        ),
        (
            "timestamps 0 and 2^63-1",
            one(vec![0, i64::MAX as u64], vec![], now, 0, "count"),
        ),
        (
            "value 2^63-1 twice",
            one(vec![], vec![i64::MAX, i64::MAX], now, 60_000_000_000, "ns"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{dictionary::PerTable, validate};

    #[test]
    fn requests_are_valid_deterministic_and_sized_as_asked() {
        let a = request(5_000, 1_000);
        assert_eq!(validate(&a), Ok(()));
        assert_eq!(a, request(5_000, 1_000));
        let n: usize = a.resource_profiles[0].scope_profiles[0].profiles[0]
            .samples
            .len();
        assert_eq!(n, 5_000);
        // Every requested stack is used (plus the zero value), nothing else.
        assert_eq!(PerTable::lens(a.dictionary.as_ref().unwrap()).stacks, 1_001);
        assert!(crate::dictionary::mark(&a).all_live());

        let parts = Config {
            samples: 1_001,
            stacks: 100,
            resources: 3,
            timestamps: false,
            ..Config::default()
        }
        .build();
        assert_eq!(validate(&parts), Ok(()));
        let counts: Vec<usize> = parts
            .resource_profiles
            .iter()
            .map(|r| r.scope_profiles[0].profiles[0].samples.len())
            .collect();
        assert_eq!(counts, vec![334, 334, 333]);
        assert_ne!(requests(2, 100, 50)[0], requests(2, 100, 50)[1]);
    }
}
