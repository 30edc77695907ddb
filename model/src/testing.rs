//! Test support shared by every crate of the workspace: where the recorded
//! payloads are, and Go's own pprof tool as the judge of the files we write.

use std::path::{Path, PathBuf};
use std::process::Command;

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
        eprintln!("skipping: `go` is not installed (apt-get install golang-go)");
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
    eprintln!(
        "skipping: no Python with {modules:?} (python3 -m venv target/py && target/py/bin/pip install -r tests/python/requirements.txt)"
    );
    None
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
