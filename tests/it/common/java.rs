//! The jars of a live Java test, fetched by tests/java/fetch.sh.

use std::path::PathBuf;
use std::process::Command;

/// The directory holding the jars of `tests/<pom_dir>/pom.xml`, cached as
/// `cache`, or `None` (the caller's test is skipped, naming `what`) without
/// `java`, `javac` or `mvn`, or when the fetch fails; under `CI` that fails
/// instead.
pub fn jars(pom_dir: &str, cache: &str, what: &str) -> Option<PathBuf> {
    let have = |tool: &str| Command::new(tool).arg("-version").output().is_ok();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let why = if !have("java") || !have("javac") {
        "no java/javac on PATH".to_owned()
    } else {
        match Command::new("bash")
            .arg(root.join("tests/java/fetch.sh"))
            .arg(root.join("tests").join(pom_dir))
            .arg(cache)
            .output()
        {
            Ok(out) if out.status.success() => {
                let dir = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim()
                    .to_owned();
                return Some(PathBuf::from(dir));
            }
            Ok(out) => format!("fetch.sh failed: {}", String::from_utf8_lossy(&out.stderr)),
            Err(e) => format!("fetch.sh: {e}"),
        }
    };
    assert!(
        std::env::var_os("CI").is_none(),
        "the {what} test cannot run under CI: {why}"
    );
    profcol_model::testing::skipped(&format!("{what}: {why}"));
    None
}

/// Runs `java` with `args` to its end (60 s at most; killed if the test
/// ends first) and gives what it said, stderr then stdout; a run that
/// fails fails the test.
pub async fn run(args: &[String]) -> String {
    let java = tokio::process::Command::new("java")
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), java)
        .await
        .expect("the program did not end within 60 s")
        .unwrap();
    let log =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{log}");
    log
}

/// `javac` of `tests/<src>` against the jars in `classpath`, into `out`.
pub fn compile(src: &str, classpath: &str, out: &std::path::Path) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(src);
    let javac = Command::new("javac")
        .arg("-cp")
        .arg(classpath)
        .arg("-d")
        .arg(out)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        javac.status.success(),
        "{}",
        String::from_utf8_lossy(&javac.stderr)
    );
}
