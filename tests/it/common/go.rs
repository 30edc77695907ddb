//! Go programs the tests build from source under `tests/` (`go` on PATH).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Builds the Go module in `tests/<dir>` into `out`, fetching its modules
/// through the module proxy when its `go.sum` names any (`-mod=mod`);
/// `None` when `go` is missing ([`go_available`] skips locally, fails
/// under CI).
///
/// [`go_available`]: profcol_model::testing::go_available
pub fn build(dir: &str, out: &Path) -> Option<PathBuf> {
    if !profcol_model::testing::go_available() {
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    let bin = out.join(dir);
    let o = Command::new("go")
        .args(["build", "-mod=mod", "-o"])
        .arg(&bin)
        .arg(".")
        .current_dir(&src)
        .output()
        .expect("run go build");
    assert!(
        o.status.success(),
        "go build in {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    Some(bin)
}
