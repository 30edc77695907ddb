//! Flame graphs of recorded payloads (`profcol flamegraph FILE`) and of a
//! failing pipeline test's exporters (`profcol test --flamegraph DIR`),
//! rendered by the `profilez` extension's renderer.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use profcol_extensions::profilez::render::{self, Labels};
use profcol_model::proto::ProfilesData;
use profcol_model::resolved::ResolvedProfile;

use super::inputs::{self, Payload};
use super::spec::InputFormat;
use super::stacks::{frames_of, split_value};

/// Root-first stack -> total, per sample type (`type/unit`).
pub type ByType = BTreeMap<String, BTreeMap<String, i64>>;

/// Reads a recorded payload as the harness does (OTLP protobuf, JSON or
/// `file` exporter output, pprof, a Sentry envelope or recorded request)
/// into OTLP.
pub fn read(path: &Path, format: Option<InputFormat>) -> anyhow::Result<Vec<ProfilesData>> {
    match inputs::load(path, format)? {
        Payload::Otlp(reqs) => Ok(reqs
            .into_iter()
            .map(|r| ProfilesData {
                resource_profiles: r.resource_profiles,
                dictionary: r.dictionary,
            })
            .collect()),
        Payload::Http(req) if req.path.contains("/envelope") => {
            let body = if req.body.starts_with(&[0x1f, 0x8b]) {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&req.body[..])
                    .read_to_end(&mut out)
                    .with_context(|| format!("{}: gunzip", path.display()))?;
                out
            } else {
                req.body
            };
            sentry(&body, path)
        }
        Payload::Http(req) => bail!(
            "{}: a request to {}: only OTLP, pprof and Sentry envelopes are rendered",
            path.display(),
            req.path
        ),
    }
}

/// Every profile of a Sentry envelope, converted as the `sentry` receiver
/// converts them.
fn sentry(body: &[u8], path: &Path) -> anyhow::Result<Vec<ProfilesData>> {
    let env = profcol_sentry::parse_envelope(body)
        .map_err(|e| anyhow::anyhow!("{}: not a Sentry envelope: {e}", path.display()))?;
    let opts = profcol_sentry::ReceiveOptions {
        service_name: None,
        include_original_payload: false,
        max_item_size: profcol_sentry::MAX_ITEM_SIZE,
        project_id: None,
    };
    let transaction = env
        .items
        .iter()
        .find(|i| i.item_type() == "transaction")
        .map(|i| i.payload);
    let mut out = Vec::new();
    for item in &env.items {
        let converted = match item.item_type() {
            "profile_chunk" => profcol_sentry::chunk_to_otlp_in_envelope(
                item.payload,
                item.platform(),
                &env.header,
                &opts,
            ),
            "profile" => profcol_sentry::profile_v1_to_otlp(
                item.payload,
                item.platform(),
                transaction,
                &env.header,
                &opts,
            ),
            _ => continue,
        };
        match converted {
            Ok(c) => out.push(c.data),
            Err(e) => bail!(
                "{}: {} item: {}",
                path.display(),
                item.item_type(),
                e.message
            ),
        }
    }
    if out.is_empty() {
        bail!("{}: the envelope holds no profile", path.display());
    }
    Ok(out)
}

/// The stacks of `profiles` (the resolved view), attributes left out.
pub fn stacks_of(profiles: &[ResolvedProfile]) -> ByType {
    let mut out = ByType::new();
    for p in profiles {
        let by = out.entry(p.sample_type.clone()).or_default();
        for (line, v) in &p.samples {
            *by.entry(frames_of(line).join(";")).or_default() += v;
        }
    }
    out
}

/// The stacks a snapshot file (the resolved view's text) holds.
pub fn stacks_of_snapshot(text: &str) -> ByType {
    const META: [&str; 5] = [
        "resource: ",
        "scope: ",
        "scope attributes: ",
        "attributes: ",
        "original payload: ",
    ];
    let mut out = ByType::new();
    let mut ty = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("profile sample_type=") {
            ty = rest.split(' ').next().unwrap_or("").to_owned();
        } else if let Some(l) = line.strip_prefix("  ") {
            if META.iter().any(|m| l.starts_with(m)) {
                continue;
            }
            if let (stack, Some(v)) = split_value(l) {
                *out.entry(ty.clone())
                    .or_default()
                    .entry(frames_of(stack).join(";"))
                    .or_default() += v;
            }
        }
    }
    out
}

fn unit(ty: &str) -> &str {
    ty.split_once('/').map_or("", |(_, u)| u)
}

/// One SVG of `stacks` for `sample_type` (the first one when `None`); the
/// error lists the types there are.
pub fn render_one(
    stacks: &ByType,
    sample_type: Option<&str>,
    title: &str,
) -> anyhow::Result<(String, Vec<u8>)> {
    let types = || stacks.keys().cloned().collect::<Vec<_>>().join(", ");
    let (ty, by) = match sample_type {
        Some(t) => stacks
            .iter()
            .find(|(k, _)| *k == t || k.split('/').next() == Some(t))
            .with_context(|| format!("no sample type {t:?} (there are: {})", types()))?,
        None => stacks.iter().next().context("no samples to draw")?,
    };
    let labels = Labels {
        title,
        subtitle: Some(ty.clone()),
        unit: unit(ty),
    };
    let svg = render::flamegraph(by.iter().map(|(k, v)| (k.as_str(), *v)), &labels);
    Ok((ty.clone(), svg))
}

/// A file name part from free text.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Writes a failing test's graphs for one exporter into `dir`: what it
/// got (`actual`) and, when the test has a snapshot, what was expected
/// and the difference (red: more than expected), per sample type.
pub fn write_case(
    dir: &Path,
    test: &str,
    exporter: &str,
    actual: &ByType,
    expected: Option<&ByType>,
) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    let mut types: Vec<&String> = actual.keys().collect();
    if let Some(e) = expected {
        types.extend(e.keys());
    }
    types.sort();
    types.dedup();
    let empty = BTreeMap::new();
    for ty in types {
        let got = actual.get(ty).unwrap_or(&empty);
        let base = format!("{}--{}--{}", slug(test), slug(exporter), slug(ty));
        let title = format!("{test}: exporter {exporter}");
        let mut write = |kind: &str, svg: Vec<u8>| -> anyhow::Result<()> {
            let p = dir.join(format!("{base}-{kind}.svg"));
            std::fs::write(&p, svg).with_context(|| format!("writing {}", p.display()))?;
            written.push(p);
            Ok(())
        };
        let labels = |what: &str| Labels {
            title: &title,
            subtitle: Some(format!("{ty}: {what}")),
            unit: unit(ty),
        };
        write("actual", render::flamegraph(pairs(got), &labels("actual")))?;
        if let Some(e) = expected {
            let want = e.get(ty).unwrap_or(&empty);
            write(
                "expected",
                render::flamegraph(pairs(want), &labels("expected")),
            )?;
            write(
                "diff",
                render::differential(
                    pairs(want),
                    pairs(got),
                    &labels("actual against expected: red is more than expected"),
                ),
            )?;
        }
    }
    Ok(written)
}

fn pairs(m: &BTreeMap<String, i64>) -> impl Iterator<Item = (&str, i64)> {
    m.iter().map(|(k, v)| (k.as_str(), *v))
}
