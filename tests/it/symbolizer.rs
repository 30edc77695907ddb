//! The `symbolizer` processor on real programs built here (gcc, g++,
//! rustc, go), with profiles shaped as the OpenTelemetry eBPF profiler
//! sends them (build ids from the ELF notes, file addresses of the
//! executable segment, `profile.frame.type: native`) and as pprof
//! converters do (process addresses). The oracle is binutils'
//! `addr2line -a -f -i -C` on the same addresses.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use profcol_model::dictionary::{DictionaryBuilder, Lookup};
use profcol_model::proto::{
    any_value::Value as A, AnyValue, KeyValue, Location, Mapping, Profile, ProfilesData, Resource,
    ResourceProfiles, Sample, ScopeProfiles,
};
use profcol_model::ProfileBatch;
use profcol_pipeline::component::{ProcessContext, Processor};

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A program built here, as the eBPF profiler sees it.
struct Built {
    path: PathBuf,
    gnu_build_id: Option<String>,
    go_build_id: Option<String>,
    /// The OpenTelemetry file id the eBPF profiler sends for every file.
    htlhash: String,
    /// The executable PT_LOAD: (offset, vaddr, filesz).
    text: (u64, u64, u64),
}

/// A tool on `PATH` (Debian's package of that name), or `None`: skipped,
/// a failure under CI, which installs it.
fn tool(name: &'static str) -> Option<&'static str> {
    if Command::new(name).arg("--version").output().is_ok() {
        return Some(name);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no {name} on PATH: CI must install it (.ci/run)"
    );
    profcol_model::testing::skipped(&format!("no {name} on PATH (Debian package `{name}`)"));
    None
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

fn gnu_build_id(path: &Path) -> Option<String> {
    let notes = run(Command::new("readelf").arg("-nW").arg(path));
    notes
        .lines()
        .find_map(|l| l.split("Build ID: ").nth(1))
        .map(|s| s.trim().to_string())
}

/// The file id of the profiles semantic conventions (`htlhash`), by
/// their definition: SHA-256 of the first and last 4096 bytes and the
/// big-endian length, 16 bytes in hex (computed by Python's hashlib).
fn htlhash(path: &Path) -> String {
    let py = "import hashlib, sys\n\
              b = open(sys.argv[1], 'rb').read()\n\
              print(hashlib.sha256(b[:4096] + b[-4096:] + len(b).to_bytes(8, 'big')).hexdigest()[:32])";
    run(Command::new("python3").arg("-c").arg(py).arg(path))
        .trim()
        .to_owned()
}

fn inspect(path: &Path) -> Built {
    let gnu_build_id = gnu_build_id(path);
    let headers = run(Command::new("readelf").arg("-lW").arg(path));
    let text = headers
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&"LOAD") && (w.contains(&"E") || w.contains(&"RE")))
        .map(|w| (hex(w[1]), hex(w[2]), hex(w[4])))
        .expect("an executable LOAD segment");
    Built {
        path: path.to_path_buf(),
        gnu_build_id,
        go_build_id: None,
        htlhash: htlhash(path),
        text,
    }
}

/// Addresses inside the named functions: their start and a spread of
/// offsets through them (call sites, inlined code).
fn addresses_in(path: &Path, functions: &[&str]) -> Vec<u64> {
    let nm = run(Command::new("nm").arg("-S").arg("--defined-only").arg(path));
    let mut out = Vec::new();
    for line in nm.lines() {
        let w: Vec<_> = line.split_whitespace().collect();
        if w.len() != 4 || !matches!(w[2], "T" | "t") {
            continue;
        }
        if !functions.iter().any(|f| w[3].contains(f)) {
            continue;
        }
        let (start, size) = (hex(w[0]), hex(w[1]));
        for k in 0..8 {
            out.push(start + size * k / 8);
        }
    }
    out.sort();
    out.dedup();
    assert!(!out.is_empty(), "no function of {functions:?} in {path:?}");
    out
}

/// `(function, file, line)` per frame, innermost first, as binutils says.
type Frames = Vec<(String, String, i64)>;

/// Go's own `go tool addr2line` (binutils misreads Go's line tables):
/// no inline frames.
fn go_oracle(path: &Path, addrs: &[u64]) -> Vec<Frames> {
    let mut child = Command::new("go")
        .args(["tool", "addr2line"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let input: String = addrs.iter().map(|a| format!("{a:#x}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    let all: Vec<Frames> = lines
        .chunks(2)
        .map(|c| {
            let (file, line) = c[1].rsplit_once(':').unwrap();
            vec![(
                c[0].to_string(),
                file.to_string(),
                line.parse().unwrap_or(0),
            )]
        })
        .collect();
    assert_eq!(all.len(), addrs.len());
    all
}

fn oracle(path: &Path, addrs: &[u64]) -> Vec<Frames> {
    let mut cmd = Command::new("addr2line");
    cmd.args(["-a", "-f", "-i", "-C", "-e"]).arg(path);
    cmd.args(addrs.iter().map(|a| format!("{a:#x}")));
    let out = run(&mut cmd);
    let mut all: Vec<Frames> = Vec::new();
    let mut lines = out.lines().peekable();
    while let Some(l) = lines.next() {
        if l.starts_with("0x") {
            all.push(Vec::new());
            continue;
        }
        let func = l.to_string();
        let loc = lines.next().unwrap_or("??:0");
        let loc = loc.split(" (discriminator").next().unwrap();
        let (file, line) = loc.rsplit_once(':').unwrap();
        let line = line.parse().unwrap_or(0);
        all.last_mut().unwrap().push((func, file.to_string(), line));
    }
    assert_eq!(all.len(), addrs.len());
    all
}

/// How the producer expresses addresses.
#[derive(Clone, Copy)]
enum Shape {
    /// The eBPF profiler: file addresses, `profile.frame.type`, the
    /// mapping named by the file's base name and the process's executable
    /// by path (a resource attribute).
    Ebpf,
    /// pprof: process addresses from a load bias, no frame type.
    Process { bias: u64 },
}

fn profile_of(bin: &Built, addrs: &[u64], shape: Shape, filename: &str) -> ProfilesData {
    let mut d = DictionaryBuilder::new();
    let mut attrs = Vec::new();
    if let Some(id) = &bin.gnu_build_id {
        attrs.push(d.attribute_kv(
            "process.executable.build_id.gnu",
            AnyValue {
                value: Some(A::StringValue(id.clone())),
            },
            "",
        ));
    }
    if let Some(id) = &bin.go_build_id {
        attrs.push(d.attribute_kv(
            "process.executable.build_id.go",
            AnyValue {
                value: Some(A::StringValue(id.clone())),
            },
            "",
        ));
    }
    attrs.push(d.attribute_kv(
        "process.executable.build_id.htlhash",
        AnyValue {
            value: Some(A::StringValue(bin.htlhash.clone())),
        },
        "",
    ));
    let (off, vaddr, size) = bin.text;
    let (start, limit) = match shape {
        Shape::Ebpf => (vaddr, vaddr + size),
        Shape::Process { bias } => (bias + vaddr, bias + vaddr + size),
    };
    let path = filename;
    let filename = d.string(match shape {
        Shape::Ebpf => filename.rsplit('/').next().unwrap(),
        Shape::Process { .. } => filename,
    });
    let mapping = d.mapping(Mapping {
        memory_start: start,
        memory_limit: limit,
        file_offset: off,
        filename_strindex: filename,
        attribute_indices: attrs,
    });
    let native = d.attribute_kv(
        "profile.frame.type",
        AnyValue {
            value: Some(A::StringValue("native".into())),
        },
        "",
    );
    let locs: Vec<i32> = addrs
        .iter()
        .map(|&a| {
            d.location(match shape {
                Shape::Ebpf => Location {
                    mapping_index: mapping,
                    address: a,
                    lines: vec![],
                    attribute_indices: vec![native],
                },
                Shape::Process { bias } => Location {
                    mapping_index: mapping,
                    address: a + bias,
                    lines: vec![],
                    attribute_indices: vec![],
                },
            })
        })
        .collect();
    let samples = locs
        .iter()
        .map(|&l| Sample {
            stack_index: d.stack(&[l]),
            values: vec![1],
            ..Default::default()
        })
        .collect();
    let resource = match shape {
        Shape::Ebpf => Some(Resource {
            attributes: vec![KeyValue {
                key: "process.executable.path".into(),
                value: Some(AnyValue {
                    value: Some(A::StringValue(path.into())),
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        Shape::Process { .. } => None,
    };
    ProfilesData {
        resource_profiles: vec![ResourceProfiles {
            resource,
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

fn process(p: &mut Box<dyn Processor>, data: ProfilesData) -> ProfilesData {
    let mut batch = ProfileBatch::new(data);
    let mut ctx = ProcessContext::deferred("profiles", "symbolizer");
    p.process(&mut batch, &mut ctx);
    batch.into_data()
}

/// The frames the processor wrote, per location in stack order.
fn symbolized(data: &ProfilesData) -> Vec<Frames> {
    let l = Lookup::of(data);
    data.resource_profiles[0].scope_profiles[0].profiles[0]
        .samples
        .iter()
        .map(|s| frames_of(&l, l.location(l.stack(s.stack_index).location_indices[0])))
        .collect()
}

/// The lines of `loc`, innermost first.
fn frames_of(l: &Lookup<'_>, loc: &Location) -> Frames {
    loc.lines
        .iter()
        .map(|line| {
            let f = l.function(line.function_index);
            (
                l.string(f.name_strindex).to_string(),
                l.string(f.filename_strindex).to_string(),
                line.line,
            )
        })
        .collect()
}

/// binutils and cpp_demangle space template closers differently.
fn norm(s: &str) -> String {
    s.replace("> >", ">>")
}

fn assert_matches_oracle(bin: &Built, addrs: &[u64], got: &[Frames]) {
    let want = if bin.go_build_id.is_some() {
        go_oracle(&bin.path, addrs)
    } else {
        oracle(&bin.path, addrs)
    };
    let mut named = 0;
    for ((a, w), g) in addrs.iter().zip(&want).zip(got) {
        let w: Frames = w
            .iter()
            .filter(|f| f.0 != "??")
            .map(|f| (norm(&f.0), f.1.clone(), f.2))
            .collect();
        let mut g: Frames = g.iter().map(|f| (norm(&f.0), f.1.clone(), f.2)).collect();
        if bin.go_build_id.is_some() {
            g.truncate(1); // Go's tool names the innermost frame only
        }
        if w.is_empty() {
            continue;
        }
        named += 1;
        assert_eq!(g, w, "{:?} at {a:#x}", bin.path);
    }
    assert!(
        named * 2 >= addrs.len(),
        "binutils named {named} of {}",
        addrs.len()
    );
}

fn symbolizer(yaml: &str) -> Box<dyn Processor> {
    profcol_processors::symbolizer::from_yaml(yaml).expect("config")
}

const C_SRC: &str = r#"
#include <stdio.h>
static inline __attribute__((always_inline)) int leaf(int x) { return x * x + 3; }
static inline __attribute__((always_inline)) int mid(int x) { return leaf(x) ^ leaf(x + 1); }
__attribute__((noinline)) int work(int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s += mid(i);
    return s;
}
__attribute__((noinline)) int outer(int n) { return work(n) + work(n / 2); }
int main(int argc, char **argv) { printf("%d\n", outer(argc * 1000)); return 0; }
"#;

fn build_c(dir: &Path) -> Built {
    build_c_as(dir, "prog", &[])
}

/// `fatal` ends in a call to a function that never returns.
const NORETURN_SRC: &str = r#"
#include <stdlib.h>
__attribute__((noinline, noreturn)) void die(int c) { exit(c); }
__attribute__((noinline)) void fatal(int c) { die(c + 1); }
__attribute__((noinline)) int after(int x) { return x * 3 + (x >> 2); }
int main(int argc, char **argv) { if (argc > 5) fatal(argc); return after(argc); }
"#;

/// `C_SRC` built in `dir` (its working directory: where `-gsplit-dwarf`
/// writes the `.dwo`) as `name`, with `flags` besides `-g -O2`.
fn build_c_as(dir: &Path, name: &str, flags: &[&str]) -> Built {
    let src = dir.join("prog.c");
    std::fs::write(&src, C_SRC).unwrap();
    let exe = dir.join(name);
    run(Command::new("gcc")
        .current_dir(dir)
        .args(["-g", "-O2", "-Wl,--build-id"])
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(&src));
    inspect(&exe)
}

/// The bytes of `path`'s `.text`.
fn text_of(path: &Path) -> Vec<u8> {
    let out = path.with_extension("text");
    run(Command::new("objcopy")
        .args(["-O", "binary", "--only-section=.text"])
        .arg(path)
        .arg(&out));
    std::fs::read(out).unwrap()
}

/// Whether an inline chain `leaf` in `mid` in `work` was named.
fn has_inline_chain(got: &[Frames]) -> bool {
    got.iter()
        .any(|f| f.len() >= 3 && f[0].0 == "leaf" && f[1].0 == "mid" && f[2].0 == "work")
}

/// Split DWARF (`-gsplit-dwarf`): function names and inline chains are in
/// the `.dwo` file the executable's skeleton unit names, or in a `.dwp`
/// package beside the executable (`dwp`). binutils' addr2line reads
/// neither, so the oracle is the program built without the flag, checked
/// to hold the same code.
#[test]
fn split_dwarf_is_read_from_dwo_files_and_dwp_packages() {
    let dir = tempfile::tempdir().unwrap();
    let plain = build_c_as(dir.path(), "plain", &[]);
    let yaml = format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        dir.path().display()
    );
    // DWARF 5 with its .dwo beside it, as gcc leaves it.
    let split = build_c_as(dir.path(), "prog", &["-gsplit-dwarf"]);
    assert_eq!(text_of(&plain.path), text_of(&split.path));
    let dwo: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dwo"))
        .collect();
    assert_eq!(dwo.len(), 1, "{dwo:?}");
    let addrs = addresses_in(&plain.path, &["work", "outer", "main"]);
    let symbolize = |bin: &Built| {
        let out = process(
            &mut symbolizer(&yaml),
            profile_of(bin, &addrs, Shape::Ebpf, bin.path.to_str().unwrap()),
        );
        symbolized(&out)
    };
    let got = symbolize(&split);
    assert_matches_oracle(&plain, &addrs, &got);
    assert!(has_inline_chain(&got), "{got:?}");

    // Installed elsewhere, with the build directory not allowed: the
    // .dwo the skeleton names there is not read, one beside the
    // executable is.
    let installed = tempfile::tempdir().unwrap();
    let exe = installed.path().join("prog");
    std::fs::copy(&split.path, &exe).unwrap();
    let moved = Built {
        path: exe.clone(),
        ..inspect(&exe)
    };
    let only_installed = format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        std::fs::canonicalize(installed.path()).unwrap().display()
    );
    let symbolize_installed = || {
        let out = process(
            &mut symbolizer(&only_installed),
            profile_of(&moved, &addrs, Shape::Ebpf, exe.to_str().unwrap()),
        );
        symbolized(&out)
    };
    assert!(!has_inline_chain(&symbolize_installed()));
    std::fs::copy(&dwo[0], installed.path().join(dwo[0].file_name().unwrap())).unwrap();
    let got = symbolize_installed();
    assert_matches_oracle(&plain, &addrs, &got);

    // Without it, the skeleton has no functions: the symbol table's names.
    std::fs::remove_file(&dwo[0]).unwrap();
    let got = symbolize(&split);
    assert!(!has_inline_chain(&got), "{got:?}");

    // DWARF 4 (what binutils' dwp packs) in a .dwp, the .dwo files gone.
    let split = build_c_as(dir.path(), "prog4", &["-gsplit-dwarf", "-gdwarf-4"]);
    assert_eq!(text_of(&plain.path), text_of(&split.path));
    run(Command::new("dwp")
        .current_dir(dir.path())
        .args(["-e", "prog4", "-o", "prog4.dwp"]));
    for e in std::fs::read_dir(dir.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|e| e == "dwo") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let got = symbolize(&split);
    assert_matches_oracle(&plain, &addrs, &got);
    assert!(has_inline_chain(&got), "{got:?}");
}

/// A program linked without a build id (as some distributions' and
/// hand-made builds are) is named by the eBPF profiler only by its
/// `htlhash`: the mapping file with that hash is read, and a file of
/// another hash at its path is not.
#[test]
fn a_file_without_build_id_is_found_by_its_htlhash() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c_as(dir.path(), "prog", &["-Wl,--build-id=none"]);
    assert_eq!(bin.gnu_build_id, None);
    let addrs = addresses_in(&bin.path, &["work", "outer", "main"]);
    let yaml = format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        dir.path().display()
    );
    let profile = || profile_of(&bin, &addrs, Shape::Ebpf, bin.path.to_str().unwrap());
    let got = symbolized(&process(&mut symbolizer(&yaml), profile()));
    assert_matches_oracle(&bin, &addrs, &got);
    assert!(has_inline_chain(&got), "{got:?}");

    // Rebuilt at the same path: another file, left alone.
    let data = profile();
    build_c_as(dir.path(), "prog", &["-Wl,--build-id=none", "-O1"]);
    let got = symbolized(&process(&mut symbolizer(&yaml), data));
    assert!(got.iter().all(Vec::is_empty), "{got:?}");
}

/// dwz (which Debian's and Fedora's debug packages go through) moves
/// what programs share into a supplementary file that each names in
/// `.gnu_debugaltlink`: found by its path, or by its build id in a debug
/// directory, and only when its build id is the one named.
#[test]
fn dwz_supplementary_files_are_followed() {
    let Some(dwz) = tool("dwz") else { return };
    let dir = tempfile::tempdir().unwrap();
    let one = build_c_as(dir.path(), "one", &[]);
    let two = dir.path().join("two");
    std::fs::copy(&one.path, dir.path().join("one.orig")).unwrap();
    let orig = inspect(&dir.path().join("one.orig"));
    let other = C_SRC.replace("argc * 1000", "argc * 7");
    std::fs::write(dir.path().join("two.c"), other).unwrap();
    run(Command::new("gcc").current_dir(dir.path()).args([
        "-g",
        "-O2",
        "-Wl,--build-id",
        "-o",
        "two",
        "two.c",
    ]));
    let common = dir.path().join("common.debug");
    run(Command::new(dwz)
        .arg("-m")
        .arg(&common)
        .arg("-M")
        .arg(&common)
        .arg(&one.path)
        .arg(&two));
    let links = run(Command::new("readelf").arg("-SW").arg(&one.path));
    assert!(links.contains(".gnu_debugaltlink"), "{links}");
    let addrs = addresses_in(&orig.path, &["work", "outer", "main"]);
    let symbolize = |yaml: &str| {
        let out = process(
            &mut symbolizer(yaml),
            profile_of(&one, &addrs, Shape::Ebpf, one.path.to_str().unwrap()),
        );
        symbolized(&out)
    };
    let yaml = format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        dir.path().display()
    );
    let got = symbolize(&yaml);
    assert_matches_oracle(&orig, &addrs, &got);
    assert!(has_inline_chain(&got), "{got:?}");

    // Moved into a debug directory's .build-id tree, as distributions
    // install it.
    let id = gnu_build_id(&common).expect("dwz gives it a build id");
    let debug = dir.path().join("debug");
    let by_id = debug
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(by_id.parent().unwrap()).unwrap();
    std::fs::rename(&common, &by_id).unwrap();
    let got = symbolize(&format!(
        "allow_mapping_paths: [{}]\ndebug_directories: [{}]\ntimeout: 30s",
        dir.path().display(),
        debug.display()
    ));
    assert_matches_oracle(&orig, &addrs, &got);

    // Another file under that name is not it.
    std::fs::copy(&two, &common).unwrap();
    let got = symbolize(&yaml);
    assert!(!has_inline_chain(&got), "{got:?}");
}

#[test]
fn c_with_inlining_as_the_ebpf_profiler_sends_it_matches_addr2line() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path());
    let addrs = addresses_in(&bin.path, &["work", "outer", "main"]);
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        dir.path().display()
    ));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, bin.path.to_str().unwrap()),
    );
    let got = symbolized(&out);
    assert_matches_oracle(&bin, &addrs, &got);
    // The inline chain is there: leaf inlined in mid inlined in work.
    assert!(
        got.iter()
            .any(|f| f.len() >= 3 && f[0].0 == "leaf" && f[1].0 == "mid" && f[2].0 == "work"),
        "{got:?}"
    );
}

#[test]
fn pprof_process_addresses_are_turned_into_file_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path());
    let addrs = addresses_in(&bin.path, &["work", "outer"]);
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ntimeout: 30s",
        dir.path().display()
    ));
    let bias = 0x7f12_3450_0000;
    let out = process(
        &mut p,
        profile_of(
            &bin,
            &addrs,
            Shape::Process { bias },
            bin.path.to_str().unwrap(),
        ),
    );
    assert_matches_oracle(&bin, &addrs, &symbolized(&out));
}

#[test]
fn stripped_binary_finds_its_debug_file_by_build_id() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path());
    let addrs = addresses_in(&bin.path, &["work", "outer"]);
    let id = bin.gnu_build_id.clone().unwrap();
    let debug_root = dir.path().join("debug");
    let debug = debug_root
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug.parent().unwrap()).unwrap();
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin.path)
        .arg(&debug));
    let stripped = dir.path().join("bin").join("prog");
    std::fs::create_dir_all(stripped.parent().unwrap()).unwrap();
    run(Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(&bin.path));
    // The mapping names a file profcol may not open: the debug directory
    // alone, by build id, names the frames.
    let mut p = symbolizer(&format!(
        "debug_directories: [{}]\ntimeout: 30s",
        debug_root.display()
    ));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, stripped.to_str().unwrap()),
    );
    assert_matches_oracle(&bin, &addrs, &symbolized(&out));
}

#[test]
fn gnu_debuglink_next_to_the_binary_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path());
    let addrs = addresses_in(&bin.path, &["work"]);
    let bindir = dir.path().join("bin");
    std::fs::create_dir_all(bindir.join(".debug")).unwrap();
    let debug = bindir.join(".debug").join("prog.dbg");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin.path)
        .arg(&debug));
    let stripped = bindir.join("prog");
    run(Command::new("objcopy")
        .arg("--strip-all")
        .arg(format!("--add-gnu-debuglink={}", debug.display()))
        .arg(&bin.path)
        .arg(&stripped));
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        bindir.display()
    ));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, stripped.to_str().unwrap()),
    );
    assert_matches_oracle(&bin, &addrs, &symbolized(&out));
}

#[test]
fn cpp_templates_are_demangled() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("prog.cc");
    std::fs::write(
        &src,
        r#"
#include <cstdio>
#include <vector>
namespace ns {
template <typename T> struct Acc {
    __attribute__((noinline)) T sum(const std::vector<T>& v) {
        T s{};
        for (auto x : v) s += x * 2;
        return s;
    }
};
}
int main(int argc, char**) {
    std::vector<double> v(argc * 100, 1.5);
    std::vector<long> w(argc * 10, 3);
    ns::Acc<double> a; ns::Acc<long> b;
    std::printf("%f %ld\n", a.sum(v), b.sum(w));
}
"#,
    )
    .unwrap();
    let exe = dir.path().join("prog");
    run(Command::new("g++")
        .args(["-g", "-O2", "-Wl,--build-id", "-o"])
        .arg(&exe)
        .arg(&src));
    let bin = inspect(&exe);
    let addrs = addresses_in(&exe, &["AccIdE3sum", "AccIlE3sum"]);
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ntimeout: 30s",
        dir.path().display()
    ));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, exe.to_str().unwrap()),
    );
    let got = symbolized(&out);
    assert_matches_oracle(&bin, &addrs, &got);
    assert!(
        got.iter()
            .flatten()
            .any(|f| f.0.starts_with("ns::Acc<double>::sum(")),
        "{got:?}"
    );
    // The mangled name is kept as the function's system name.
    let l = Lookup::of(&out);
    assert!(out
        .dictionary
        .as_ref()
        .unwrap()
        .function_table
        .iter()
        .any(|f| l
            .string(f.system_name_strindex)
            .starts_with("_ZN2ns3AccIdE3sum")));
}

#[test]
fn rust_program_matches_addr2line() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("prog.rs");
    std::fs::write(
        &src,
        r#"
#[inline(never)]
fn crunch(v: &[u64]) -> u64 { v.iter().map(|x| x.wrapping_mul(31) ^ 7).sum() }
#[inline(never)]
fn drive(n: u64) -> u64 { let v: Vec<u64> = (0..n).collect(); crunch(&v) }
fn main() { println!("{}", drive(std::env::args().count() as u64 * 1000)); }
"#,
    )
    .unwrap();
    let exe = dir.path().join("prog");
    run(Command::new("rustc")
        .args([
            "-g",
            "-C",
            "opt-level=2",
            "-C",
            "link-arg=-Wl,--build-id",
            "-o",
        ])
        .arg(&exe)
        .arg(&src));
    let bin = inspect(&exe);
    let addrs = addresses_in(&exe, &["4prog6crunch", "4prog5drive"]);
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ntimeout: 30s",
        dir.path().display()
    ));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, exe.to_str().unwrap()),
    );
    let got = symbolized(&out);
    assert_matches_oracle(&bin, &addrs, &got);
    assert!(
        got.iter().flatten().any(|f| f.0 == "prog::crunch"),
        "{got:?}"
    );
}

#[test]
fn go_program_found_by_its_go_build_id() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("main.go"),
        r#"package main

import ("fmt"; "os")

//go:noinline
func crunch(n int) int { s := 0; for i := 0; i < n; i++ { s += i * 31 ^ 7 }; return s }

func main() { fmt.Println(crunch(len(os.Args) * 1000)) }
"#,
    )
    .unwrap();
    std::fs::write(dir.path().join("go.mod"), "module prog\n\ngo 1.21\n").unwrap();
    let exe = dir.path().join("prog");
    run(Command::new("go")
        .args(["build", "-o"])
        .arg(&exe)
        .arg(".")
        .current_dir(dir.path())
        .env("GOCACHE", dir.path().join("cache"))
        .env("GOFLAGS", "-mod=mod"));
    let mut bin = inspect(&exe);
    bin.gnu_build_id = None;
    bin.go_build_id = Some(
        run(Command::new("go").args(["tool", "buildid"]).arg(&exe))
            .trim()
            .to_string(),
    );
    let addrs = addresses_in(&exe, &["main.crunch"]);
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ntimeout: 30s",
        dir.path().display()
    ));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, exe.to_str().unwrap()),
    );
    let got = symbolized(&out);
    assert_matches_oracle(&bin, &addrs, &got);
    assert!(
        got.iter().flatten().any(|f| f.0 == "main.crunch"),
        "{got:?}"
    );
}

/// A debuginfod server serving `files` by build id, answering as `mode`.
#[derive(Clone)]
enum Mode {
    Serve,
    /// Answers once the flag is set (or after 30 s, so that a test that
    /// waits on it fails rather than hangs).
    Held(Arc<AtomicBool>),
    Truncate,
    /// Sends without end, counting the bytes the client took.
    Endless(Arc<AtomicUsize>),
}

fn debuginfod(files: Vec<(String, Vec<u8>)>, mode: Mode) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let files = files.clone();
            let h = h.clone();
            let mode = mode.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let n = conn.read(&mut buf).unwrap_or(0);
                let req = String::from_utf8_lossy(&buf[..n]).into_owned();
                let path = req.split_whitespace().nth(1).unwrap_or("").to_string();
                h.fetch_add(1, Ordering::SeqCst);
                let body = files.iter().find_map(|(id, data)| {
                    (path == format!("/buildid/{id}/debuginfo")).then(|| data.clone())
                });
                let Some(body) = body else {
                    let _ = conn.write_all(
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                    );
                    return;
                };
                match mode {
                    Mode::Serve => {}
                    Mode::Held(open) => {
                        let held = Instant::now();
                        while !open.load(Ordering::SeqCst)
                            && held.elapsed() < Duration::from_secs(30)
                        {
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                    Mode::Truncate => {
                        let head = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = conn.write_all(head.as_bytes());
                        let _ = conn.write_all(&body[..body.len() / 2]);
                        return;
                    }
                    Mode::Endless(sent) => {
                        let _ = conn.write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n");
                        let chunk = vec![0u8; 65536];
                        loop {
                            let head = format!("{:x}\r\n", chunk.len());
                            if conn.write_all(head.as_bytes()).is_err()
                                || conn.write_all(&chunk).is_err()
                                || conn.write_all(b"\r\n").is_err()
                            {
                                return;
                            }
                            sent.fetch_add(chunk.len(), Ordering::SeqCst);
                        }
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn.write_all(head.as_bytes());
                let _ = conn.write_all(&body);
            });
        }
    });
    (url, hits)
}

/// A C program whose mapping profcol may not open, and its debug file.
fn stripped_c(dir: &Path) -> (Built, Vec<u8>, Vec<u64>) {
    let bin = build_c(dir);
    let addrs = addresses_in(&bin.path, &["work", "outer"]);
    let debug = dir.join("prog.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&bin.path)
        .arg(&debug));
    (bin, std::fs::read(&debug).unwrap(), addrs)
}

fn debuginfod_yaml(url: &str, cache: &Path, extra: &str) -> String {
    format!(
        "debug_directories: []\ndebuginfod:\n  urls: [{url}]\n  cache_directory: {}\n  retries: 0\n  timeout: 3s\n{extra}",
        cache.display()
    )
}

#[test]
fn debuginfod_serves_the_debug_file_into_the_disk_cache() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, debug, addrs) = stripped_c(dir.path());
    let id = bin.gnu_build_id.clone().unwrap();
    let (url, hits) = debuginfod(vec![(id.clone(), debug)], Mode::Serve);
    let cache = dir.path().join("cache");
    let mut p = symbolizer(&debuginfod_yaml(&url, &cache, "timeout: 30s"));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, "/nonexistent/prog"),
    );
    assert_matches_oracle(&bin, &addrs, &symbolized(&out));
    assert!(cache.join(format!("{id}.debuginfo")).is_file());
    // A new processor (a restart) uses the disk cache, not the server.
    let before = hits.load(Ordering::SeqCst);
    let mut p = symbolizer(&debuginfod_yaml(&url, &cache, "timeout: 30s"));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, "/nonexistent/prog"),
    );
    assert_matches_oracle(&bin, &addrs, &symbolized(&out));
    assert_eq!(hits.load(Ordering::SeqCst), before);
}

#[test]
fn slow_debuginfod_does_not_hold_the_batch_and_later_batches_get_names() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, debug, addrs) = stripped_c(dir.path());
    let id = bin.gnu_build_id.clone().unwrap();
    let open = Arc::new(AtomicBool::new(false));
    let (url, _) = debuginfod(vec![(id, debug)], Mode::Held(open.clone()));
    let cache = dir.path().join("cache");
    let mut p = symbolizer(&debuginfod_yaml(&url, &cache, "timeout: 100ms"));
    // The server answers only once this batch is back: a batch held for
    // the fetch would come back after 30 s, named.
    let out = process(&mut p, profile_of(&bin, &addrs, Shape::Ebpf, "/x/prog"));
    assert!(
        symbolized(&out).iter().all(|f| f.is_empty()),
        "passed unsymbolized"
    );
    open.store(true, Ordering::SeqCst);
    // The background fetch finishes; a later batch is named.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = process(&mut p, profile_of(&bin, &addrs, Shape::Ebpf, "/x/prog"));
        let got = symbolized(&out);
        if got.iter().any(|f| !f.is_empty()) {
            assert_matches_oracle(&bin, &addrs, &got);
            break;
        }
        assert!(Instant::now() < deadline, "never symbolized");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn debuginfod_404_truncated_and_endless_answers_are_refused() {
    let endless = Arc::new(AtomicUsize::new(0));
    for mode in [Mode::Serve, Mode::Truncate, Mode::Endless(endless.clone())] {
        let dir = tempfile::tempdir().unwrap();
        let (bin, debug, addrs) = stripped_c(dir.path());
        // Serve: under another build id, so this one is a 404.
        let id = match mode {
            Mode::Serve => "00".repeat(20),
            _ => bin.gnu_build_id.clone().unwrap(),
        };
        let (url, _) = debuginfod(vec![(id, debug)], mode);
        let cache = dir.path().join("cache");
        let mut p = symbolizer(&debuginfod_yaml(
            &url,
            &cache,
            "timeout: 30s\nmax_file_size_mib: 2",
        ));
        let out = process(&mut p, profile_of(&bin, &addrs, Shape::Ebpf, "/x/prog"));
        assert!(symbolized(&out).iter().all(|f| f.is_empty()));
        // Nothing partial stays in the cache.
        let left: Vec<_> = std::fs::read_dir(&cache)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "{left:?}");
    }
    // The endless answer was cut at `max_file_size_mib` (what the sockets
    // buffer besides), not read until the 30 s timeout.
    let sent = endless.load(Ordering::SeqCst);
    assert!(sent > 2 << 20 && sent < 32 << 20, "{sent} bytes sent");
}

#[test]
fn hostile_mappings_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path());
    let addrs = addresses_in(&bin.path, &["work"]);
    let allowed = format!(
        "allow_mapping_paths: [{}, /etc]\ndebug_directories: []\ntimeout: 10s",
        dir.path().display()
    );
    // A forged build id: the file is named but is not that binary.
    let mut forged = inspect(&bin.path);
    forged.gnu_build_id = Some("ab".repeat(20));
    // Non-ELF files, in an allowed directory and out of it; the binary
    // outside under a name the allowed one does not have (by name, the
    // allowed copy of the same build would be found).
    let other = tempfile::tempdir().unwrap();
    let outside = other.path().join("prog-outside");
    std::fs::copy(&bin.path, &outside).unwrap();
    let escape = format!(
        "{}/../{}/prog-outside",
        dir.path().display(),
        other.path().display()
    );
    for (b, name) in [
        (&forged, bin.path.to_str().unwrap()),
        (&bin, "/etc/passwd"),
        (&bin, "/etc/shadow"),
        (&bin, "/dev/zero"),
        (&bin, outside.to_str().unwrap()),
        (&bin, escape.as_str()),
    ] {
        let mut p = symbolizer(&allowed);
        let out = process(&mut p, profile_of(b, &addrs, Shape::Ebpf, name));
        assert!(
            symbolized(&out).iter().all(|f| f.is_empty()),
            "{name} was used"
        );
    }
}

#[test]
fn config_errors_name_the_key() {
    let err = profcol_processors::symbolizer::from_yaml(
        "allow_mapping_paths: [relative/dir]\nworkers: 0\ndebuginfod: {urls: [ftp://x], bogus: 1}",
    )
    .err()
    .unwrap();
    for part in [
        "allow_mapping_paths::0",
        "debuginfod: unknown field \"bogus\"",
        "urls::0",
    ] {
        assert!(err.contains(part), "{err}");
    }
    let err = profcol_processors::symbolizer::from_yaml(
        "workers: 0\nallow_mapping_paths: [/]\nproc_path: host/proc",
    )
    .err()
    .unwrap();
    for part in ["workers", "allow_mapping_paths::0", "proc_path"] {
        assert!(err.contains(part), "{err}");
    }
}

/// Kernel frames sent as addresses (`profile.frame.type: kernel`, no
/// mapping) are named by the host's kallsyms with `kernel_symbols: true`,
/// through the running collector (the table is read at start): here a
/// kallsyms file in the kernel's format, as a container would mount the
/// host's. An address past every symbol stays unnamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kernel_frames_are_named_by_kallsyms() {
    use crate::common::Ports;
    let dir = tempfile::tempdir().unwrap();
    let kallsyms = dir.path().join("kallsyms");
    std::fs::write(
        &kallsyms,
        "ffffffff81000000 T _stext\n\
         ffffffff81200000 D jiffies\n\
         ffffffff81400000 T __x64_sys_write\n\
         ffffffff81400800 t vfs_write\n\
         ffffffffc0a00000 t ext4_file_write_iter\t[ext4]\n",
    )
    .unwrap();
    let out = dir.path().join("out.jsonl");
    let yaml = format!(
        r#"
receivers:
  otlp: {{protocols: {{grpc: {{endpoint: "127.0.0.1:0"}}}}}}
processors:
  symbolizer: {{kernel_symbols: true, kallsyms_path: {k}}}
exporters:
  file: {{path: {o}}}
service:
  telemetry: {{metrics: {{address: "127.0.0.1:0"}}}}
  pipelines:
    profiles: {{receivers: [otlp], processors: [symbolizer], exporters: [file]}}
"#,
        k = kallsyms.display(),
        o = out.display()
    );
    let mut d = DictionaryBuilder::new();
    let kernel = d.attribute_kv(
        "profile.frame.type",
        AnyValue {
            value: Some(A::StringValue("kernel".into())),
        },
        "",
    );
    let mut loc = |address| {
        d.location(Location {
            mapping_index: 0,
            address,
            lines: vec![],
            attribute_indices: vec![kernel],
        })
    };
    // Leaf first: a write syscall into ext4, and a frame past every symbol.
    let stack = [0xffffffffc0a00040, 0xffffffff81400810, 0xffffffff81400004];
    let locs: Vec<i32> = stack.iter().map(|&a| loc(a)).collect();
    let lost = loc(0xffffffffc0a00000 + (1 << 20));
    let samples = vec![
        Sample {
            stack_index: d.stack(&locs),
            values: vec![3],
            ..Default::default()
        },
        Sample {
            stack_index: d.stack(&[lost]),
            values: vec![1],
            ..Default::default()
        },
    ];
    let data = ProfilesData {
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
    };
    let svc = profcol::app::start_str(&yaml, profcol_pipeline::runtime::RuntimeOptions::default())
        .await
        .unwrap();
    let mut client = crate::common::client(svc.grpc_port()).await;
    client
        .export(profcol_model::proto::data_into_request(data))
        .await
        .unwrap();
    svc.shutdown().await;
    let profiles = crate::file_exporter::profiles(&out);
    let stacks: Vec<(String, i64)> = profiles
        .iter()
        .flat_map(|p| p.samples.iter().map(|(s, v)| (s.clone(), *v)))
        .collect();
    assert!(
        stacks.iter().any(|(s, v)| *v == 3
            && s.contains("__x64_sys_write")
            && s.contains("vfs_write")
            && s.contains("ext4_file_write_iter")),
        "{stacks:?}"
    );
    assert!(
        stacks.iter().any(|(s, v)| *v == 1 && !s.contains("ext4")),
        "{stacks:?}"
    );
}

/// The eBPF profiler's recorded request with the C program it profiled
/// (`burn`), and the folder holding both.
fn ebpf_recording() -> (PathBuf, ProfilesData) {
    let dir = profcol_model::testing::fixtures_dir()
        .join("otlp-revisions/ebpf-profiler-v0.0.202633")
        .canonicalize()
        .unwrap();
    let bytes = std::fs::read(dir.join("0002.binpb")).unwrap();
    let data = profcol_otlp::revisions::decode(&bytes.into()).unwrap().data;
    (dir, data)
}

/// What the eBPF profiler v0.0.202633 sent while profiling the fixture's
/// `burn` (tests/fixtures/otlp-revisions/ebpf-profiler-v0.0.202633): its
/// mappings name files by base name alone and its process's executable by
/// a path of the recording machine. The binary is found by that name under
/// `allow_mapping_paths`, proven by its build id, and every frame of it is
/// named as addr2line names it; frames of other files stay as sent.
#[test]
fn the_ebpf_profilers_recording_is_symbolized_by_file_name() {
    let (dir, data) = ebpf_recording();
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 10s",
        dir.display()
    ));
    let out = process(&mut p, data);
    let l = Lookup::of(&out);
    let dict = out.dictionary.as_ref().unwrap();
    let (mut burn, mut others_named) = (Vec::new(), 0);
    for loc in &dict.location_table[1..] {
        let file = l.string(l.mapping(loc.mapping_index).filename_strindex);
        let names: Vec<String> = frames_of(&l, loc).into_iter().map(|f| f.0).collect();
        if file == "burn" {
            burn.push((loc.address, names));
        } else if !names.is_empty() && file.starts_with("lib") {
            others_named += 1;
        }
    }
    let addrs: Vec<u64> = burn.iter().map(|(a, _)| *a).collect();
    assert!(
        addrs.contains(&0x108d) && addrs.contains(&0x10f0),
        "{addrs:x?}"
    );
    let want = oracle(&dir.join("burn"), &addrs);
    for ((addr, got), want) in burn.iter().zip(&want) {
        let want: Vec<&str> = want.iter().map(|(f, _, _)| f.as_str()).collect();
        assert_eq!(got, &want, "{addr:#x}");
    }
    let named: Vec<&str> = burn
        .iter()
        .flat_map(|(_, n)| n)
        .map(String::as_str)
        .collect();
    for f in ["leaf_hash", "middle_work", "main", "_start"] {
        assert!(named.contains(&f), "{f}: {named:?}");
    }
    // libc and libpython are not under allow_mapping_paths: not read.
    assert_eq!(others_named, 0);
}

/// A release build keeps its symbol table but no DWARF: with the default
/// sources and no debuginfod server, its frames are named by the symbols
/// (the debuginfod source, not configured, once ended the search before
/// the symbol table's fallback was taken).
#[test]
fn a_binary_with_only_a_symbol_table_is_named_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let bin = build_c(dir.path());
    let addrs = addresses_in(&bin.path, &["work", "outer"]);
    let bindir = dir.path().join("bin");
    std::fs::create_dir_all(&bindir).unwrap();
    let plain = bindir.join("prog");
    run(Command::new("strip")
        .arg("--strip-debug")
        .arg("-o")
        .arg(&plain)
        .arg(&bin.path));
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        bindir.canonicalize().unwrap().display()
    ));
    let out = process(
        &mut p,
        profile_of(&bin, &addrs, Shape::Ebpf, plain.to_str().unwrap()),
    );
    let want = oracle(&plain, &addrs);
    for ((a, got), want) in addrs.iter().zip(symbolized(&out)).zip(want) {
        let names: Vec<&str> = got.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, [want[0].0.as_str()], "{a:#x}");
    }
}

/// A Sentry SDK's native frames (here the Rust SDK's v1 profile, shaped as
/// sentry 0.31.5 sends it): process addresses, one debug image per file
/// with its load address and GNU build id. The image's file is read, each
/// address taken relative to the image, a caller's one back to its call
/// (as symbolicator does), and every frame named as addr2line names it.
/// The caller here ends its function with a call that never returns: its
/// return address is the next function's first byte.
#[test]
fn a_sentry_sdks_native_frames_are_named_from_its_debug_images() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nr.c"), NORETURN_SRC).unwrap();
    let exe = dir.path().join("nr");
    run(Command::new("gcc")
        .current_dir(dir.path())
        .args(["-g", "-O2", "-falign-functions=1", "-Wl,--build-id", "-o"])
        .arg(&exe)
        .arg("nr.c"));
    let bin = inspect(&exe);
    // Inside `after`, not its first byte: that is `fatal`'s return address.
    let leaves = &addresses_in(&bin.path, &["after"])[1..];
    let fatal = addresses_in(&bin.path, &["fatal"]);
    let nm = run(Command::new("nm").arg("-S").arg(&bin.path));
    let end = nm
        .lines()
        .find(|l| l.ends_with(" fatal"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            hex(w[0]) + hex(w[1])
        })
        .unwrap();
    assert!(fatal.iter().all(|&a| a < end));
    let base = 0x5600_0000_0000u64;
    let mut frames = Vec::new();
    let mut stacks = Vec::new();
    for (k, &leaf) in leaves.iter().enumerate() {
        frames.push(serde_json::json!({"instruction_addr": format!("{:#x}", base + leaf)}));
        frames.push(serde_json::json!({"instruction_addr": format!("{:#x}", base + end)}));
        stacks.push(serde_json::json!([2 * k, 2 * k + 1]));
    }
    let samples: Vec<_> = (0..stacks.len())
        .map(|k| serde_json::json!({"stack_id": k, "thread_id": 7, "elapsed_since_start_ns": k as u64 * 10_000_000}))
        .collect();
    let profile = serde_json::json!({
        "version": "1",
        "platform": "rust",
        "event_id": "0743116e821148eb9afd93ab6e02e43c",
        "timestamp": "2026-12-01T07:20:46.156809142Z",
        "release": "srs@1.0.0",
        "environment": "production",
        "device": {"architecture": "x86_64"},
        "os": {"name": "Linux", "version": "6.18.44"},
        "runtime": {"name": "rustc", "version": "1.95.0"},
        "debug_meta": {"images": [{
            "type": "symbolic",
            "name": bin.path.to_str().unwrap(),
            "arch": null,
            "image_addr": format!("{base:#x}"),
            "image_size": std::fs::metadata(&bin.path).unwrap().len(),
            "id": "9fe20df4-48e2-f765-fe5e-d9673833ed1c",
            "code_id": bin.gnu_build_id.clone().unwrap(),
        }]},
        "profile": {"samples": samples, "stacks": stacks, "frames": frames,
                    "thread_metadata": {"7": {"name": "main"}}},
        "transaction": {"id": "070b384812ee4e2d9c1d8c3f45647c71", "name": "burn",
                        "trace_id": "cd786d50689442e5fa955b6eb20b40e7", "active_thread_id": 7},
    });
    let converted = profcol_sentry::profile_v1_to_otlp(
        &serde_json::to_vec(&profile).unwrap(),
        Some("rust"),
        None,
        &serde_json::json!({}),
        &Default::default(),
    )
    .unwrap();
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 30s",
        dir.path().canonicalize().unwrap().display()
    ));
    let out = process(&mut p, converted.data);
    let l = Lookup::of(&out);
    let named = |addr: u64| -> Frames {
        let loc = out.dictionary.as_ref().unwrap().location_table[1..]
            .iter()
            .find(|loc| loc.address == base + addr)
            .unwrap_or_else(|| panic!("{addr:#x}"));
        frames_of(&l, loc)
    };
    let got: Vec<Frames> = leaves.iter().map(|&a| named(a)).collect();
    assert_matches_oracle(&bin, leaves, &got);
    assert_eq!(named(end)[0].0, "fatal");
    assert_matches_oracle(&bin, &[end - 1], &[named(end)]);
}

/// A C program that sleeps a minute when given an argument, built with
/// debug info into `dir`, and the addresses of its `work` and `outer`.
fn sleeping_program(dir: &Path) -> (PathBuf, Built, Vec<u64>) {
    std::fs::write(
        dir.join("prog.c"),
        C_SRC.replace(
            "int main(int argc, char **argv) {",
            "#include <unistd.h>\nint main(int argc, char **argv) { if (argc > 1) sleep(60);",
        ),
    )
    .unwrap();
    let exe = dir.join("prog");
    run(Command::new("gcc")
        .current_dir(dir)
        .args(["-g", "-O2", "-Wl,--build-id", "-o"])
        .arg(&exe)
        .arg("prog.c"));
    let bin = inspect(&exe);
    let addrs = addresses_in(&bin.path, &["work", "outer"]);
    (exe, bin, addrs)
}

/// `exe` run until the loader has mapped it.
fn run_mapped(exe: &Path) -> std::process::Child {
    let child = Command::new(exe).arg("wait").spawn().unwrap();
    let maps = format!("/proc/{}/maps", child.id());
    let t = Instant::now();
    while !std::fs::read_to_string(&maps).is_ok_and(|m| m.contains(exe.to_str().unwrap())) {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    child
}

/// The eBPF profiler's request for `addrs` of `bin`, from process `pid`.
fn ebpf_profile_of(bin: &Built, addrs: &[u64], pid: u32) -> ProfilesData {
    let mut data = profile_of(bin, addrs, Shape::Ebpf, "/elsewhere/prog");
    let r = data.resource_profiles[0].resource.as_mut().unwrap();
    r.attributes.push(KeyValue {
        key: "process.pid".into(),
        value: Some(AnyValue {
            value: Some(A::IntValue(pid.into())),
        }),
        ..Default::default()
    });
    data
}

/// With `process_files`, a mapping named by base name is found in the
/// process its samples came from (`process.pid`): the path its
/// `/proc/<pid>/maps` names, opened through `/proc/<pid>/root`, with no
/// directory allowed at all. Without it, nothing is read.
#[test]
fn process_files_find_the_mapping_in_its_process() {
    let dir = tempfile::tempdir().unwrap();
    let (exe, bin, addrs) = sleeping_program(dir.path());
    let mut child = run_mapped(&exe);
    let mut off = symbolizer("debug_directories: []\ntimeout: 30s");
    let unnamed = symbolized(&process(
        &mut off,
        ebpf_profile_of(&bin, &addrs, child.id()),
    ));
    let mut on = symbolizer("process_files: true\ndebug_directories: []\ntimeout: 30s");
    let named = symbolized(&process(&mut on, ebpf_profile_of(&bin, &addrs, child.id())));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(unnamed.iter().all(|f| f.is_empty()));
    assert_matches_oracle(&bin, &addrs, &named);
}

/// A binary deleted under its running process (a deploy replaced it) is
/// read as the process maps it, `/proc/<pid>/map_files`.
#[test]
fn process_files_read_a_binary_deleted_since_it_started() {
    let dir = tempfile::tempdir().unwrap();
    let (exe, bin, addrs) = sleeping_program(dir.path());
    let running = dir.path().join("run/prog");
    std::fs::create_dir(running.parent().unwrap()).unwrap();
    std::fs::copy(&exe, &running).unwrap();
    let mut child = run_mapped(&running);
    std::fs::remove_file(&running).unwrap();
    let mut on = symbolizer("process_files: true\ndebug_directories: []\ntimeout: 30s");
    let named = symbolized(&process(&mut on, ebpf_profile_of(&bin, &addrs, child.id())));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_matches_oracle(&bin, &addrs, &named);
}

/// The eBPF profiler's native frames sent on to Sentry and read back as
/// Sentry reads them. Its addresses are in each file's own space, where a
/// process's files overlap; each file is placed in a region of its own, so
/// that a frame falls in its own image's range and `instruction_addr`
/// less `image_addr` is its address in the file. profcol's own sentry
/// receiver and symbolizer stand in for Relay and symbolicator.
#[test]
fn the_ebpf_profilers_frames_are_named_after_a_trip_through_sentry() {
    let (dir, data) = ebpf_recording();
    let chunks = profcol_sentry::otlp_to_chunks(&data, &Default::default());
    let burn = chunks
        .iter()
        .filter_map(|c| c.chunk.as_ref().map(|ch| (ch, &c.payload)))
        .find(|(ch, _)| {
            ch.debug_meta
                .as_ref()
                .is_some_and(|m| m.images.iter().any(|i| i["code_file"] == "burn"))
        })
        .map(|(_, payload)| payload)
        .expect("a chunk of burn");
    let back = profcol_sentry::chunk_to_otlp(burn, Some("native"), &Default::default())
        .unwrap()
        .data;
    let mut p = symbolizer(&format!(
        "allow_mapping_paths: [{}]\ndebug_directories: []\ntimeout: 10s",
        dir.display()
    ));
    let out = process(&mut p, back);
    let l = Lookup::of(&out);
    let named: Vec<String> = out.dictionary.as_ref().unwrap().location_table[1..]
        .iter()
        .filter(|loc| l.string(l.mapping(loc.mapping_index).filename_strindex) == "burn")
        .flat_map(|loc| frames_of(&l, loc))
        .map(|f| f.0)
        .collect();
    for f in ["leaf_hash", "middle_work", "main", "_start"] {
        assert!(named.iter().any(|n| n == f), "{f}: {named:?}");
    }
}
