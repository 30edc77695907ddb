//! Test support shared by every crate of the workspace: where the recorded
//! payloads are, and Go's own pprof tool as the judge of the files we write.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `data` as a receiver holds a request valid as it is: its protobuf
/// bytes, checked on the wire and not decoded.
pub fn as_received(data: &crate::proto::ProfilesData) -> crate::ProfileBatch {
    let bytes = bytes::Bytes::from(prost::Message::encode_to_vec(data));
    let clean = crate::wire_check::check(&bytes).expect("the request is valid as it is");
    crate::ProfileBatch::checked(bytes, clean)
}

/// `tests/fixtures` of the workspace.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

/// The bytes of `tests/fixtures/REL`; panics naming the path if unreadable.
pub fn fixture(rel: &str) -> Vec<u8> {
    let p = fixtures_dir().join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Whether `go` is on PATH. Without it the caller skips its test locally;
/// under CI (`CI` set) this fails instead, so CI cannot pass without
/// running the `go tool pprof` checks.
pub fn go_available() -> bool {
    let found = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "`go` is not installed: CI must install golang-go to run the go tool pprof tests"
        );
        skipped("no `go` on PATH (apt-get install golang-go)");
    }
    found
}

/// A Python interpreter that imports `modules`: `PROFCOL_PYTHON`, else the
/// virtualenv `.ci/run` makes from `tests/python/requirements.txt`
/// (`target/py`), else `python3`. `None` skips the caller's test locally;
/// under CI (`CI` set) a missing one fails instead, as [`go_available`].
pub fn python(modules: &[&str]) -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidates = std::env::var_os("PROFCOL_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([root.join("target/py/bin/python"), PathBuf::from("python3")]);
    let check = format!("import {}", modules.join(", "));
    for py in candidates {
        let ok = Command::new(&py)
            .args(["-c", &check])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no Python with {modules:?}: CI must install tests/python/requirements.txt into target/py"
    );
    skipped(&format!(
        "no Python with {} (python3 -m venv target/py && target/py/bin/pip install -r tests/python/requirements.txt)",
        modules.join(", ")
    ));
    None
}

/// Records that the running test skips its checks for `why` (a missing
/// tool) and says so twice: at once on stderr (shown with `--nocapture`),
/// and when the test binary exits, as one summary line after libtest's
/// `test result` (`2 tests skipped ... : no go on PATH (...)`), so that a
/// pass that skipped is not read as a pass that checked. The caller fails
/// instead under CI.
pub fn skipped(why: &str) {
    use std::sync::{Mutex, Once};
    static SKIPPED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
    static AT_EXIT: Once = Once::new();

    extern "C" fn summary() {
        use std::io::Write;
        let skipped = SKIPPED.lock().unwrap_or_else(|e| e.into_inner());
        let mut by_why: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (test, why) in skipped.iter() {
            let tests = by_why.entry(why).or_default();
            if !tests.contains(&test.as_str()) {
                tests.push(test);
            }
        }
        let n: usize = by_why.values().map(Vec::len).sum();
        let binary = std::env::current_exe()
            .ok()
            .and_then(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
            .map(|s| {
                s.rsplit_once('-')
                    .map_or(s.clone(), |(name, _hash)| name.to_owned())
            })
            .unwrap_or_default();
        let reasons: Vec<String> = by_why
            .iter()
            .map(|(why, tests)| format!("{why}: {}", tests.join(", ")))
            .collect();
        // At exit nothing can be reported any more: a failed write is dropped.
        let _ = writeln!(
            std::io::stderr(),
            "\n{n} {} of {binary} skipped (counted as passed; CI=1 fails them instead): {}\n",
            if n == 1 { "test" } else { "tests" },
            reasons.join("; ")
        );
    }

    eprintln!("skipping: {why}");
    let test = std::thread::current()
        .name()
        .unwrap_or("a test off its thread")
        .to_owned();
    SKIPPED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((test, why.to_owned()));
    AT_EXIT.call_once(|| {
        // SAFETY: `summary` is an `extern "C" fn()` that neither unwinds
        // nor needs anything atexit handlers may not use.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(summary);
        }
    });
}

/// Stdout of `go tool pprof ARGS FILE`, which must succeed. `tmp` keeps
/// pprof's own files (and its symbol lookups) out of the user's home.
pub fn go_tool_pprof(args: &[&str], file: &Path, tmp: &Path) -> String {
    let out = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("PPROF_TMPDIR", tmp)
        .env("PPROF_BINARY_PATH", tmp)
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "go tool pprof {args:?} {file:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The shortest of `runs` timings of `f`: what a bench's summary reports,
/// the run least disturbed by the rest of the machine.
pub fn best_of(runs: usize, mut f: impl FnMut()) -> std::time::Duration {
    (0..runs)
        .map(|_| {
            let t = std::time::Instant::now();
            f();
            t.elapsed()
        })
        .min()
        .expect("at least one run")
}

/// The four processors of `profcol-bench`'s `processors` cases, in chain
/// order, each with its YAML config: also what `processors/benches/chain.rs`
/// runs in process, so the two stay comparable.
pub const BENCH_PROCESSORS: [(&str, &str); 4] = [
    ("dictionary_dedup", "{}"),
    ("unit_normalization", "{target: ucum}"),
    (
        "thread_pruning",
        r"{rename_threads: [{pattern: 'worker-\d+', replacement: 'worker-*'}]}",
    ),
    ("sampling", "{sampling_percentage: 100, mode: session}"),
];
