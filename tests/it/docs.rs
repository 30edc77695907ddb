//! The docs a user reads (README.md, docs/, CHANGELOG.md, CONTRIBUTING.md)
//! against the binary they describe:
//!
//! - every component `profcol components` lists has its page
//!   `docs/components/<kind>-<type>.md` (an alias is on the page of the type
//!   it names), and every page names a stability level and has a metrics
//!   section;
//! - every ```yaml example in README.md and docs/ passes `profcol validate`:
//!   a whole config (with `service:` and `pipelines:`) as written, a
//!   component page's fragment completed into a whole config as
//!   docs/components/README.md says, and a block marked
//!   `<!-- validate: skip (reason) -->` skipped and counted;
//! - relative links point at files that exist and anchors at headings that
//!   exist, and repository paths in inline code name files that exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn profcol() -> Command {
    Command::new(env!("CARGO_BIN_EXE_profcol"))
}

/// Every Markdown file under `dir`, sorted.
fn markdown_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// README.md and every page under docs/: where the examples are.
fn docs() -> Vec<PathBuf> {
    let mut out = vec![root().join("README.md")];
    out.extend(markdown_under(&root().join("docs")));
    out
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// A Markdown line: inside a fenced code block or not.
fn lines_outside_fences(text: &str) -> Vec<(usize, &str)> {
    let mut fence = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if !fence {
            out.push((i + 1, line));
        }
    }
    out
}

// ---------------------------------------------------------------------------
// (a) A page for every component.
// ---------------------------------------------------------------------------

/// `(kind, type)` for every type `profcol components` lists.
fn listed_components() -> Vec<(String, String)> {
    let out = profcol().arg("components").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut kind = None;
    let mut list = Vec::new();
    for line in text.lines() {
        if let Some(item) = line.trim_start().strip_prefix("- ") {
            let kind: &str = kind.expect("a kind before its types");
            list.push((kind.to_owned(), item.trim().to_owned()));
        } else if let Some(plural) = line.strip_suffix(':') {
            kind = Some(match plural {
                "receivers" => "receiver",
                "processors" => "processor",
                "exporters" => "exporter",
                "extensions" => "extension",
                "connectors" => "connector",
                other => panic!("unknown kind {other:?} in `profcol components`"),
            });
        }
    }
    assert!(list.len() > 15, "{text}");
    list
}

/// The component pages: `<kind>-<type>.md` under docs/components.
fn component_pages() -> Vec<PathBuf> {
    markdown_under(&root().join("docs/components"))
        .into_iter()
        .filter(|p| p.file_name().unwrap() != "README.md")
        .collect()
}

#[test]
fn every_component_has_a_page_with_its_stability_and_metrics() {
    let dir = root().join("docs/components");
    let pages = component_pages();
    let titles: BTreeMap<String, String> = pages
        .iter()
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, read(p).lines().next().unwrap_or("").to_owned())
        })
        .collect();
    let listed = listed_components();
    let mut missing = Vec::new();
    let mut documented = BTreeSet::new();
    for (kind, ty) in &listed {
        let own = format!("{kind}-{ty}");
        if titles.contains_key(&own) {
            documented.insert(own);
            continue;
        }
        // An alias: on the page of its kind whose title names it.
        let alias = format!("alias `{ty}`");
        match titles
            .iter()
            .find(|(stem, title)| stem.starts_with(&format!("{kind}-")) && title.contains(&alias))
        {
            Some((stem, _)) => {
                documented.insert(stem.clone());
            }
            None => missing.push(format!(
                "{kind} {ty}: no docs/components/{own}.md (nor a {kind} page whose title says {alias})"
            )),
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));

    let index = read(&dir.join("README.md"));

    let readme = read(&root().join("README.md"));
    let levels = ["development", "alpha", "beta", "stable"];
    let mut faults = Vec::new();
    for page in &pages {
        let stem = page.file_stem().unwrap().to_string_lossy().into_owned();
        let text = read(page);
        if !documented.contains(&stem) {
            faults.push(format!(
                "{stem}.md: `profcol components` lists no such component"
            ));
        }
        let level = text
            .lines()
            .find_map(|l| l.strip_prefix("**Stability:** "))
            .and_then(|rest| levels.iter().find(|lv| rest.starts_with(*lv)));
        if level.is_none() {
            faults.push(format!(
                "{stem}.md: no `**Stability:** <level>` line naming one of {levels:?}"
            ));
        }
        if !text.lines().any(|l| l == "## Metrics") {
            faults.push(format!("{stem}.md: no `## Metrics` section"));
        }
        if !text.lines().any(|l| l == "## Configuration") {
            faults.push(format!("{stem}.md: no `## Configuration` section"));
        }
        if !index.contains(&format!("]({stem}.md)")) {
            faults.push(format!(
                "{stem}.md: docs/components/README.md does not link it"
            ));
        }
        // The README's table is where a newcomer looks first.
        if !readme.contains(&format!("](docs/components/{stem}.md)")) {
            faults.push(format!(
                "{stem}.md: README.md's component table does not link it"
            ));
        }
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}

// ---------------------------------------------------------------------------
// (b) Every YAML example validates.
// ---------------------------------------------------------------------------

/// A fenced ```yaml block, and the reason it is skipped, if it is.
struct Block {
    file: PathBuf,
    line: usize,
    text: String,
    skip: Option<String>,
}

fn yaml_blocks(file: &Path) -> Vec<Block> {
    let text = read(file);
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if !l.trim_start().starts_with("```") {
            i += 1;
            continue;
        }
        let lang = l.trim_start().trim_start_matches('`').trim();
        let start = i;
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            i += 1;
        }
        if lang == "yaml" || lang == "yml" {
            let skip = lines[..start]
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .and_then(|l| l.trim().strip_prefix("<!-- validate: skip"))
                .map(|rest| {
                    let reason = rest.trim_end_matches("-->").trim();
                    assert!(
                        reason.starts_with('(') && reason.ends_with(')') && reason.len() > 2,
                        "{}:{}: a skipped block gives its reason: <!-- validate: skip (reason) -->",
                        rel(file),
                        start + 1
                    );
                    reason[1..reason.len() - 1].to_owned()
                });
            out.push(Block {
                file: file.to_path_buf(),
                line: start + 1,
                text: lines[start + 1..i.min(lines.len())].join("\n") + "\n",
                skip,
            });
        }
        i += 1;
    }
    out
}

/// The variables the examples read, with values of the kind they expect.
const ENV: &[(&str, &str)] = &[
    ("SENTRY_PUBLIC_KEY", "abc123"),
    ("SENTRY_DSN", "https://abc123@o1.ingest.sentry.io/4507"),
    ("PROFCOL_GATEWAY", "gateway.example.com:4317"),
    ("PROFCOL_BACKEND", "backend.example.com:4317"),
    ("KAFKA_PASSWORD", "s3cret"),
];

/// `${env:NAME}` references without a default.
fn env_references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("${env:") {
        rest = &rest[i + 6..];
        let end = rest.find('}').unwrap_or(rest.len());
        let name = &rest[..end];
        if !name.contains(":-") {
            out.push(name.to_owned());
        }
        rest = &rest[end..];
    }
    out
}

/// Keys whose value is a file that `validate` reads.
const FILE_KEYS: &[&str] = &[
    "ca_file",
    "client_ca_file",
    "cert_file",
    "key_file",
    "filename",
];

/// Every `(key, value)` of `v` whose key is one of [`FILE_KEYS`] and whose
/// value is a string.
fn file_values(v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                match (k.as_str(), v.as_str()) {
                    (Some(k), Some(s)) if FILE_KEYS.contains(&k) => {
                        out.push((k.to_owned(), s.to_owned()))
                    }
                    _ => file_values(v, out),
                }
            }
        }
        Value::Sequence(s) => s.iter().for_each(|v| file_values(v, out)),
        Value::Tagged(t) => file_values(&t.value, out),
        _ => {}
    }
}

/// The ids a section (`receivers`, ...) of `v` defines, in order.
fn ids(v: &Value, section: &str) -> Vec<String> {
    v.get(section)
        .and_then(Value::as_mapping)
        .map(|m| {
            m.keys()
                .filter_map(|k| k.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `v` is a whole config: `service:` with `pipelines:`.
fn whole(v: &Value) -> bool {
    v.get("service").and_then(|s| s.get("pipelines")).is_some()
}

/// The document that completes a component page's fragment (given to
/// `validate` as a second `--config`, merged over it): one `profiles`
/// pipeline of everything it defines, an `otlp` receiver or a `debug`
/// exporter when it defines none, and its extensions in
/// `service.extensions` unless it lists them itself.
fn completion(v: &Value) -> String {
    let list = |ids: &[String]| format!("[{}]", ids.join(", "));
    let mut receivers = ids(v, "receivers");
    let processors = ids(v, "processors");
    let mut exporters = ids(v, "exporters");
    let extensions = ids(v, "extensions");
    let mut doc = String::new();
    if receivers.is_empty() {
        doc.push_str("receivers:\n  otlp:\n");
        receivers.push("otlp".into());
    }
    if exporters.is_empty() {
        doc.push_str("exporters:\n  debug:\n");
        exporters.push("debug".into());
    }
    doc.push_str("service:\n");
    let listed = v.get("service").and_then(|s| s.get("extensions")).is_some();
    if !listed && !extensions.is_empty() {
        doc.push_str(&format!("  extensions: {}\n", list(&extensions)));
    }
    doc.push_str(&format!(
        "  pipelines:\n    profiles:\n      receivers: {}\n      processors: {}\n      exporters: {}\n",
        list(&receivers),
        list(&processors),
        list(&exporters)
    ));
    doc
}

/// A certificate and its key, for every TLS file an example names.
fn certificate() -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    (cert.pem(), key.serialize_pem())
}

#[test]
fn every_yaml_example_validates() {
    let (cert, key) = certificate();
    let mut validated = Vec::new();
    let mut skipped = Vec::new();
    let mut faults = Vec::new();
    for file in docs() {
        let on_component_page = file.starts_with(root().join("docs/components"));
        for block in yaml_blocks(&file) {
            let at = format!("{}:{}", rel(&block.file), block.line);
            if let Some(reason) = &block.skip {
                skipped.push(format!("{at} ({reason})"));
                continue;
            }
            let value: Value = match serde_yaml_ng::from_str(&block.text) {
                Ok(v) => v,
                Err(e) => {
                    faults.push(format!(
                        "{at}: not YAML ({e}); fix it or mark it <!-- validate: skip (reason) -->"
                    ));
                    continue;
                }
            };
            let is_whole = whole(&value);
            if !is_whole && !on_component_page {
                faults.push(format!(
                    "{at}: not a whole config (`service:` with `pipelines:`), and fragments are \
                     completed only on component pages; make it whole or mark it \
                     <!-- validate: skip (reason) -->"
                ));
                continue;
            }
            let dir = tempfile::tempdir().unwrap();
            // The files it names, written here, and the example pointed at them.
            let mut text = block.text.clone();
            let mut files = Vec::new();
            file_values(&value, &mut files);
            for (n, (k, path)) in files.iter().enumerate() {
                if path.contains("${") {
                    continue;
                }
                let name = Path::new(path).file_name().unwrap().to_string_lossy();
                let here = dir.path().join(format!("{n}-{name}"));
                let content = match k.as_str() {
                    "key_file" => key.clone(),
                    "filename" => "example-token\n".to_owned(),
                    _ => cert.clone(),
                };
                std::fs::write(&here, content).unwrap();
                text = text.replace(path.as_str(), &here.display().to_string());
            }
            let config = dir.path().join("config.yaml");
            std::fs::write(&config, &text).unwrap();
            let mut cmd = profcol();
            cmd.current_dir(dir.path())
                .arg("validate")
                .arg(format!("--config=file:{}", config.display()));
            if !is_whole {
                let rest = dir.path().join("completion.yaml");
                std::fs::write(&rest, completion(&value)).unwrap();
                cmd.arg(format!("--config=file:{}", rest.display()));
            }
            for name in env_references(&block.text) {
                match ENV.iter().find(|(n, _)| *n == name) {
                    Some((n, v)) => {
                        cmd.env(n, v);
                    }
                    None => faults.push(format!(
                        "{at}: reads ${{env:{name}}}, which tests/it/docs.rs does not provide (add it to ENV)"
                    )),
                }
            }
            let out = cmd.output().unwrap();
            if out.status.success() {
                validated.push(at);
            } else {
                faults.push(format!(
                    "{at}: profcol validate fails:\n{}{}",
                    String::from_utf8_lossy(&out.stderr),
                    if is_whole {
                        String::new()
                    } else {
                        format!("--- completed with:\n{}", completion(&value))
                    }
                ));
            }
        }
    }
    println!(
        "validated {} YAML examples, skipped {}:\n  {}",
        validated.len(),
        skipped.len(),
        skipped.join("\n  ")
    );
    assert!(faults.is_empty(), "{}", faults.join("\n\n"));
    // Every component page has at least its example.
    assert!(validated.len() >= component_pages().len(), "{validated:?}");
}

// ---------------------------------------------------------------------------
// (c) Links and paths.
// ---------------------------------------------------------------------------

/// GitHub's anchor for a heading: lower case, punctuation but `-` and `_`
/// dropped, spaces as `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (a repeated one gets `-1`,
/// `-2`, ... as on GitHub).
fn anchors(file: &Path) -> BTreeSet<String> {
    let text = read(file);
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in lines_outside_fences(&text) {
        let Some(h) = line.strip_prefix('#') else {
            continue;
        };
        let h = h.trim_start_matches('#');
        if !h.starts_with(' ') {
            continue;
        }
        let s = slug(h);
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// The `[text](target)` link targets of a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

/// Inline code spans of a line.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The files whose links are checked: the docs and the two guides.
fn linked_files() -> Vec<PathBuf> {
    let mut out = docs();
    out.push(root().join("CHANGELOG.md"));
    out.push(root().join("CONTRIBUTING.md"));
    out
}

#[test]
fn links_and_paths_in_the_docs_exist() {
    let mut faults = Vec::new();
    let mut checked = 0;
    for file in linked_files() {
        let text = read(&file);
        for (n, line) in lines_outside_fences(&text) {
            let at = format!("{}:{n}", rel(&file));
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = match target.split_once('#') {
                    Some((p, a)) => (p, Some(a)),
                    None => (target.as_str(), None),
                };
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                if !dest.exists() {
                    faults.push(format!("{at}: {target}: no such file"));
                    continue;
                }
                if let Some(anchor) = anchor {
                    if dest.extension().is_some_and(|e| e == "md")
                        && !anchors(&dest).contains(anchor)
                    {
                        faults.push(format!(
                            "{at}: {target}: no heading #{anchor} in {}",
                            rel(&dest)
                        ));
                    }
                }
            }
            // A repository path in inline code (`tests/it/docs.rs`) names a
            // file or directory that exists.
            for span in code_spans(line) {
                let top = span.split('/').next().unwrap_or("");
                let repo_path = span.contains('/')
                    && [
                        "src",
                        "tests",
                        "pipeline",
                        "receivers",
                        "processors",
                        "exporters",
                        "extensions",
                        "benches",
                        "deploy",
                        "fuzz",
                        "docs",
                        ".ci",
                        "model",
                        "formats",
                        "queue",
                    ]
                    .contains(&top)
                    && root().join(top).exists()
                    && !span.contains(|c: char| c.is_whitespace() || "<>*{}$".contains(c));
                if !repo_path {
                    continue;
                }
                checked += 1;
                if !root().join(span.trim_end_matches('/')).exists() {
                    faults.push(format!("{at}: `{span}`: no such file in the repository"));
                }
            }
        }
    }
    println!("checked {checked} links and paths");
    assert!(faults.is_empty(), "{}", faults.join("\n"));
}
