//! Round trip of recorded pprof files through OTLP, judged by Go's own
//! pprof tool: `go tool pprof -raw` of the result must equal that of the
//! original (same samples, values, stacks, labels, header fields).
//!
//! Needs `go` on PATH (Debian `golang-go`). Without it the test is skipped
//! locally and fails under CI (`CI` set), so CI cannot pass without running it.

use std::collections::HashMap;
use std::path::Path;

use super::tests::{fixture, go_heap_pprof};
use super::*;
use profcol_model::testing::{go_available, go_tool_pprof};

fn pprof_raw(path: &Path, tmp: &Path) -> String {
    go_tool_pprof(&["-raw"], path, tmp)
}

/// `-raw` output with what may legitimately differ taken out:
/// - `Comment: profcol: ...` lines are the ones the exporter adds to name the
///   source; every other comment line must survive.
/// - Location and mapping ids are arbitrary numbers (any unique nonzero id is
///   valid), so each id in a sample is replaced by the location it names,
///   with its mapping spelled out, and the id-keyed tables are dropped.
///   Stacks, addresses, functions, files, lines and mappings are still
///   compared, sample by sample and in order.
fn normalise(raw: &str) -> Vec<String> {
    #[derive(PartialEq)]
    enum Section {
        Header,
        Samples,
        Locations,
        Mappings,
    }
    let mut section = Section::Header;
    let mut header = Vec::new();
    let mut samples: Vec<String> = Vec::new();
    let mut locations: HashMap<String, String> = HashMap::new();
    let mut last_location = String::new();
    let mut mappings: HashMap<String, String> = HashMap::new();
    for line in raw.lines() {
        match line.trim_end() {
            "Samples:" => section = Section::Samples,
            "Locations" => section = Section::Locations,
            "Mappings" => section = Section::Mappings,
            l => match section {
                Section::Header if l.starts_with("Comment: profcol: ") => {}
                Section::Header => header.push(l.to_owned()),
                Section::Samples => samples.push(l.to_owned()),
                Section::Locations => match l.trim_start().split_once(": ") {
                    Some((id, rest)) if id.chars().all(|c| c.is_ascii_digit()) => {
                        last_location = id.to_owned();
                        locations.insert(id.to_owned(), rest.to_owned());
                    }
                    // An inlined caller of the location above.
                    _ => {
                        let entry = locations.entry(last_location.clone()).or_default();
                        entry.push_str(" / ");
                        entry.push_str(l.trim());
                    }
                },
                Section::Mappings => {
                    if let Some((id, rest)) = l.split_once(": ") {
                        mappings.insert(id.trim().to_owned(), rest.to_owned());
                    }
                }
            },
        }
    }
    let location = |id: &str| -> String {
        let text = locations
            .get(id)
            .unwrap_or_else(|| panic!("sample names unknown location {id}"));
        text.split(' ')
            .map(|w| match w.strip_prefix("M=") {
                Some(m) => format!("[{}]", mappings.get(m).map_or("?", String::as_str)),
                None => w.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = header;
    for l in samples {
        // `   count   nanos: id id id` (a sample) or `   key:[value]` (its labels).
        match l.split_once(": ") {
            Some((values, ids)) if values.split_whitespace().all(|v| v.parse::<i64>().is_ok()) => {
                let stack: Vec<String> = ids.split_whitespace().map(location).collect();
                out.push(format!(
                    "{} : {}",
                    values.split_whitespace().collect::<Vec<_>>().join(" "),
                    stack.join(" ; ")
                ));
            }
            _ => out.push(l),
        }
    }
    out
}

fn assert_same_raw(got: &str, want: &str, what: &str) {
    let (g, w) = (normalise(got), normalise(want));
    for (i, (a, b)) in g.iter().zip(&w).enumerate() {
        assert_eq!(
            a, b,
            "{what}: line {i} of the normalised -raw output differs"
        );
    }
    assert_eq!(g.len(), w.len(), "{what}: number of lines");
}

#[test]
fn recorded_pprof_round_trips_through_otlp_for_go_tool_pprof() {
    if !go_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    for name in ["go-cpu.pb.gz", "dd-wall.pb.gz"] {
        let original_path = profcol_model::testing::fixtures_dir()
            .join("pprof")
            .join(name);
        let original = decode_pprof(&fixture(&format!("pprof/{name}"))).unwrap();
        let data = pprof_to_otlp(&original).unwrap();
        let opts = ToPprofOptions {
            merge_sample_types: true,
            ..Default::default()
        };
        let files = plan_files(&data, &opts).unwrap();
        assert_eq!(
            files.len(),
            1,
            "{name}: sample types merge back into one file"
        );
        let path = tmp.path().join(name);
        let out = std::fs::File::create(&path).unwrap();
        write_pprof_gzip(&data, &files[0], &opts, DEFAULT_GZIP_LEVEL, out).unwrap();

        let want = pprof_raw(&original_path, tmp.path());
        let got = pprof_raw(&path, tmp.path());
        assert!(
            want.lines().count() > 20,
            "{name}: -raw printed too little:\n{want}"
        );
        assert!(
            got.contains("Comment: profcol: converted from OTLP profiles"),
            "{name}"
        );
        assert_same_raw(&got, &want, name);
    }
}

#[test]
fn the_normalisation_still_sees_real_differences() {
    if !go_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let original_path = profcol_model::testing::fixtures_dir().join("pprof/go-cpu.pb.gz");
    let want = normalise(&pprof_raw(&original_path, tmp.path()));
    let original = decode_pprof(&fixture("pprof/go-cpu.pb.gz")).unwrap();

    // One value changed, one label dropped, one frame's line changed: each
    // must show in the normalised output.
    let mut changed_value = original.clone();
    changed_value.sample[3].value[1] += 1;
    let mut dropped_label = original.clone();
    dropped_label.sample[0].label.clear();
    let mut changed_line = original.clone();
    changed_line.location[0].line[0].line += 1;
    // Renumbered ids alone are not a difference.
    let mut renumbered = original.clone();
    for l in &mut renumbered.location {
        l.id += 1000;
    }
    for s in &mut renumbered.sample {
        for id in &mut s.location_id {
            *id += 1000;
        }
    }
    for (p, differs) in [
        (changed_value, true),
        (dropped_label, true),
        (changed_line, true),
        (renumbered, false),
    ] {
        let path = tmp.path().join("variant.pb");
        std::fs::write(&path, prost::Message::encode_to_vec(&p)).unwrap();
        let got = normalise(&pprof_raw(&path, tmp.path()));
        assert_eq!(got != want, differs);
    }
}

/// The first entry of `-raw`'s mapping table: the main binary for pprof.
fn first_mapping(raw: &str) -> &str {
    let table = raw.split_once("\nMappings\n").expect("a mapping table").1;
    table.lines().next().unwrap().split_once(": ").unwrap().1
}

#[test]
fn go_heap_profile_round_trips_for_go_tool_pprof() {
    if !go_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let original = go_heap_pprof();
    // Written uncompressed, as some producers do: pprof reads both.
    let original_path = tmp.path().join("heap.pb");
    std::fs::write(&original_path, prost::Message::encode_to_vec(&original)).unwrap();
    let data =
        pprof_to_otlp(&decode_pprof(&std::fs::read(&original_path).unwrap()).unwrap()).unwrap();
    let opts = ToPprofOptions {
        merge_sample_types: true,
        ..Default::default()
    };
    let files = plan_files(&data, &opts).unwrap();
    assert_eq!(files.len(), 1);
    let path = tmp.path().join("heap.pb.gz");
    let out = std::fs::File::create(&path).unwrap();
    write_pprof_gzip(&data, &files[0], &opts, DEFAULT_GZIP_LEVEL, out).unwrap();

    let want = pprof_raw(&original_path, tmp.path());
    let got = pprof_raw(&path, tmp.path());
    assert!(want.contains("inuse_space/bytes[dflt]"), "{want}");
    assert_same_raw(&got, &want, "heap");
    assert_eq!(first_mapping(&got), first_mapping(&want));
    assert!(first_mapping(&got).contains("/srv/app/bin/server"), "{got}");
}

/// A file large enough to be compressed in many blocks on several threads
/// reads in Go exactly as the same profile written uncompressed.
#[test]
fn multi_block_gzip_reads_in_go_as_the_plain_file() {
    if !go_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = profcol_model::synth::request(20_000, 4_000);
    let opts = ToPprofOptions::default();
    let file = &plan_files(&data, &opts).unwrap()[0];
    let plain = write_pprof(&data, file, &opts, Vec::new()).unwrap();
    assert!(plain.len() > 8 * 64 * 1024, "{} bytes", plain.len());
    let plain_path = tmp.path().join("plain.pb");
    std::fs::write(&plain_path, &plain).unwrap();
    let gz_path = tmp.path().join("parallel.pb.gz");
    let out = std::fs::File::create(&gz_path).unwrap();
    write_pprof_gzip(&data, file, &opts, DEFAULT_GZIP_LEVEL, out).unwrap();

    let want = pprof_raw(&plain_path, tmp.path());
    assert!(want.lines().count() > 20_000, "{}", &want[..500]);
    assert_eq!(pprof_raw(&gz_path, tmp.path()), want);
}
