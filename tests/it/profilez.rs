//! The `profilez` extension seen in a real browser: headless Chromium
//! loads its pages while a producer (Pyroscope's folded-stack push) sends
//! profiles with known hot functions. The flame graph's tooltips carry
//! the functions' shares, its search (`?s=`) highlights them, and the
//! differential view shows a function added in the later window in red.
//! Through chromedriver, a click on a frame zooms into it, and the
//! browser's own clock says how long a 10k-frame graph takes to show.
//! Screenshots are kept under `target/profilez/`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::webdriver::{chromedriver, Browser, HEADLESS};
use crate::common::{profcol, Ports, Running};

/// Chromium, or `None` (skipped, a failure under CI) without one.
fn chromium() -> Option<PathBuf> {
    let candidates = std::env::var_os("PROFCOL_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(["chromium", "chromium-browser", "google-chrome"].map(PathBuf::from));
    for c in candidates {
        let ok = Command::new(&c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(c);
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "no chromium on PATH: CI must install it (.ci/run: apt-get install chromium)"
    );
    profcol_model::testing::skipped("no chromium on PATH (Debian package `chromium`)");
    None
}

/// Chromium headless with a profile of its own (a temporary directory
/// kept as long as the command), so that tests running at once do not
/// share one.
fn headless(chromium: &Path) -> (Command, tempfile::TempDir) {
    let profile = tempfile::tempdir().unwrap();
    let mut c = Command::new(chromium);
    c.args(HEADLESS)
        .arg(format!("--user-data-dir={}", profile.path().display()));
    (c, profile)
}

/// The DOM after the page's scripts ran on load.
fn dump_dom(chromium: &Path, url: &str) -> String {
    let (mut cmd, _profile) = headless(chromium);
    let out = cmd.arg("--dump-dom").arg(url).output().unwrap();
    assert!(
        out.status.success(),
        "chromium --dump-dom {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn screenshot(chromium: &Path, url: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/profilez");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let (mut cmd, _profile) = headless(chromium);
    let out = cmd
        .arg(format!("--screenshot={}", path.display()))
        .arg("--window-size=1200,600")
        .arg(url)
        .output()
        .unwrap();
    assert!(out.status.success() && path.exists(), "{out:?}");
    path
}

async fn collector() -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "receivers:\n  pyroscope: {endpoint: 127.0.0.1:0}\n\
         exporters:\n  debug: {}\n\
         extensions:\n  profilez: {endpoint: 127.0.0.1:0, window: 1s, windows: 60}\n\
         service:\n  extensions: [profilez]\n  telemetry: {metrics: {address: \"127.0.0.1:0\"}}\n  pipelines:\n    profiles: {receivers: [pyroscope], exporters: [debug]}\n",
    )
    .unwrap();
    let running = Running::ready(profcol().arg("--config").arg(&cfg)).await;
    (running, dir)
}

/// Pushes folded stacks as pyroscope-io's legacy clients do.
async fn push(port: u16, app: &str, folded: &str) {
    let r = reqwest::Client::new()
        .post(format!(
            "http://127.0.0.1:{port}/ingest?name={app}.cpu&format=folded&spyName=pyspy"
        ))
        .body(folded.to_owned())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
}

/// The pipeline page once it lists `service` (folding is asynchronous).
async fn page_listing(base: &str, service: &str) -> String {
    let started = Instant::now();
    loop {
        let r = reqwest::get(format!("{base}/pipeline?name=profiles"))
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        if text.contains(&format!("<td>{service}</td>")) {
            return text;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{service} never shown:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `href` of a link whose text is `text`, on the row of `service`.
fn link(page: &str, service: &str, text: &str) -> String {
    let row = page
        .lines()
        .find(|l| l.starts_with(&format!("<tr><td>{service}</td>")))
        .unwrap_or_else(|| panic!("no row for {service}:\n{page}"));
    let end = row.find(&format!("\">{text}</a>")).unwrap();
    let start = row[..end].rfind("href=\"").unwrap() + 6;
    row[start..end].replace("&amp;", "&")
}

/// `(name, share %, fill)` of every frame in a flame graph's DOM, from
/// its `<rect aria-label="name (N samples, S% of all)" .. fill=..>`.
fn frames(dom: &str) -> Vec<(String, f64, String)> {
    let mut out = Vec::new();
    for r in dom.split("<rect ").skip(1) {
        let Some(label) = r.strip_prefix("aria-label=\"") else {
            continue;
        };
        let title = &label[..label.find('"').unwrap()];
        let Some(open) = title.rfind(" (") else {
            continue;
        };
        let name = title[..open]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        // `(1,200 samples, 60.00% of all)`, or `(..., 60.00% of all;
        // +10.00%)` in a diff, or `(..., 1.00% of all, 5.00% of handle)`
        // zoomed into `handle`.
        let Some(pct) = title[open..].split(", ").nth(1) else {
            continue;
        };
        let share: f64 = pct
            .split('%')
            .next()
            .unwrap_or("")
            .parse()
            .unwrap_or(f64::NAN);
        let fill = r
            .split(" fill=\"")
            .nth(1)
            .and_then(|f| f.split('"').next())
            .unwrap_or("")
            .to_owned();
        out.push((name, share, fill));
    }
    out
}

fn rgb(fill: &str) -> (u8, u8, u8) {
    let v: Vec<u8> = fill
        .trim_start_matches("rgb(")
        .trim_end_matches(')')
        .split(',')
        .map(|c| c.trim().parse().unwrap())
        .collect();
    (v[0], v[1], v[2])
}

#[tokio::test(flavor = "multi_thread")]
async fn the_page_lists_the_service_and_its_flame_graph_finds_the_hot_function() {
    let Some(chromium) = chromium() else { return };
    let (running, _dir) = collector().await;
    let base = format!("http://{}", running.addr("extensions::profilez"));
    push(
        running.port("receivers::pyroscope"),
        "shop",
        "main;handle;work 600\nmain;handle;idle 300\nmain;gc 100\n",
    )
    .await;
    let page = page_listing(&base, "shop").await;

    // The pipeline page, as the browser shows it.
    let dom = dump_dom(&chromium, &format!("{base}/pipeline?name=profiles"));
    assert!(dom.contains("<td>shop</td>"), "{dom}");
    assert!(dom.contains("pyspy"), "the producer: {dom}");
    screenshot(
        &chromium,
        &format!("{base}/pipeline?name=profiles"),
        "pipeline.png",
    );

    // The flame graph: each function with its share in its tooltip.
    let graph = format!("{base}/{}", link(&page, "shop", "flame graph"));
    let dom = dump_dom(&chromium, &graph);
    let got = frames(&dom);
    let share = |name: &str| {
        got.iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("no frame {name}: {got:?}"))
            .1
    };
    assert_eq!(share("work"), 60.0, "{got:?}");
    assert_eq!(share("idle"), 30.0);
    assert_eq!(share("handle"), 90.0);
    assert_eq!(share("gc"), 10.0);

    // Searching (`?s=`, run by the page's script on load) paints the
    // matches in the search colour and says how much they cover.
    let dom = dump_dom(&chromium, &format!("{graph}&s=work"));
    let got = frames(&dom);
    let fill = |name: &str| got.iter().find(|(n, _, _)| n == name).unwrap().2.clone();
    assert_eq!(fill("work"), "rgb(230,0,230)", "{got:?}");
    assert_ne!(fill("idle"), "rgb(230,0,230)");
    assert!(dom.contains("Matched: 60.0%"), "{dom}");
    let png = screenshot(&chromium, &format!("{graph}&s=work"), "flamegraph.png");
    eprintln!("screenshot: {}", png.display());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_diff_view_shows_a_function_added_after_a_deploy_in_red() {
    let Some(chromium) = chromium() else { return };
    let (running, _dir) = collector().await;
    let base = format!("http://{}", running.addr("extensions::profilez"));
    let port = running.port("receivers::pyroscope");
    push(port, "shop", "main;handle;work 600\nmain;handle;idle 400\n").await;
    page_listing(&base, "shop").await;
    // The deploy: 8 windows later, a new function takes time.
    tokio::time::sleep(Duration::from_secs(8)).await;
    push(
        port,
        "shop",
        "main;handle;work 600\nmain;handle;idle 400\nmain;handle;regression 500\n",
    )
    .await;
    let pushed = Instant::now();
    let page = page_listing(&base, "shop").await;
    let diff = |ago: f64| {
        format!(
            "{base}/{}&ago={ago:.3}&secs=10",
            link(&page, "shop", "diff: last window vs the one before")
        )
    };
    // Once the second push is folded.
    while !reqwest::get(diff(1.0))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .contains("regression")
    {
        assert!(pushed.elapsed() < Duration::from_secs(20));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Split 4 s before the second push: the windows after it hold the
    // second push, those before it the first (Chromium has 4 s to start).
    let diff = diff(pushed.elapsed().as_secs_f64() + 4.0);
    let dom = dump_dom(&chromium, &diff);
    let got = frames(&dom);
    let frame = |name: &str| {
        got.iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("no frame {name}: {got:?}"))
            .clone()
    };
    // Its share of the later window: 500 of 1500.
    let (_, share, fill) = frame("regression");
    assert_eq!(share, 33.33, "{got:?}");
    let (r, g, b) = rgb(&fill);
    assert!(r == 255 && g < 255 && b < 255, "regression is red: {fill}");
    screenshot(&chromium, &diff, "diff.png");
}

/// What the browser's own clock says of showing a page, in ms from
/// asking for it: its last byte arrived (the server drew the SVG), its
/// `load` event ran (parsed, styled, scripts run), and the first frame
/// after that was painted (two animation frames later); and the DOM it
/// ended with.
struct Shown {
    response: f64,
    loaded: f64,
    painted: f64,
    dom: String,
}

/// Shows `url` in an iframe of the size of a window, on a page of the
/// same server (so that the two are one renderer, and the frame painted
/// after the iframe's load holds it); the browser's first page there is
/// loaded before.
async fn show(browser: &Browser, url: &str) -> Shown {
    const SCRIPT: &str = r#"
        var url = arguments[0], done = arguments[arguments.length - 1];
        document.querySelectorAll("iframe").forEach(function (f) { f.remove(); });
        var f = document.createElement("iframe");
        f.style.width = "1200px";
        f.style.height = "800px";
        var t0 = performance.now();
        f.onload = function () {
            var loaded = performance.now() - t0;
            requestAnimationFrame(function () { requestAnimationFrame(function () {
                var painted = performance.now() - t0;
                var nav = f.contentWindow.performance.getEntriesByType("navigation")[0];
                done({
                    response: nav.responseEnd - nav.startTime,
                    loaded: loaded,
                    painted: painted,
                    dom: new XMLSerializer().serializeToString(f.contentDocument),
                });
            }); });
        };
        f.src = url;
        document.body.appendChild(f);
    "#;
    let v = browser
        .eval_async(SCRIPT, &[serde_json::Value::from(url)])
        .await;
    Shown {
        response: v["response"].as_f64().unwrap(),
        loaded: v["loaded"].as_f64().unwrap(),
        painted: v["painted"].as_f64().unwrap(),
        dom: v["dom"].as_str().unwrap().to_owned(),
    }
}

/// A flame graph of 10k frames renders in the browser in under a second:
/// measured by the browser's clock and printed, not asserted (the
/// machine's load is not the test's). Two shapes: 10k frames each wide
/// enough to see (100 stacks 100 deep), all drawn; and 9,900 functions of
/// 0.12 pixel each under 99 modules, where what a user sees is the
/// modules: a frame narrower than a pixel cannot be seen, pointed at or
/// labelled, so it is not drawn (as flame graph tools do) and its samples
/// count in its module's share; zooming into the module draws them (see
/// `clicking_a_module_zooms_into_its_narrow_functions`).
#[tokio::test(flavor = "multi_thread")]
async fn a_ten_thousand_frame_graph_renders_in_the_browser() {
    let Some(chromium) = chromium() else { return };
    let Some(driver) = chromedriver() else { return };
    let (running, _dir) = collector().await;
    let base = format!("http://{}", running.addr("extensions::profilez"));
    let port = running.port("receivers::pyroscope");
    let mut deep = String::new();
    for i in 0..100 {
        deep.push_str("main");
        for j in 0..99 {
            deep.push_str(&format!(";s{i}f{j}"));
        }
        deep.push_str(" 5\n");
    }
    let mut wide = String::new();
    for i in 0..9_900 {
        wide.push_str(&format!("main;module{};function{i} 5\n", i % 99));
    }
    push(port, "deep", &deep).await;
    push(port, "wide", &wide).await;
    page_listing(&base, "deep").await;
    let page = page_listing(&base, "wide").await;
    let deep = format!("{base}/{}", link(&page, "deep", "flame graph"));
    let wide = format!("{base}/{}", link(&page, "wide", "flame graph"));
    let browser = Browser::start(driver, &chromium).await;
    browser.goto(&format!("{base}/")).await;

    let mut figures = Vec::new();
    for _ in 0..3 {
        let shown = show(&browser, &deep).await;
        let got = frames(&shown.dom);
        assert!(got.len() > 9_900, "{} frames drawn", got.len());
        assert!(
            got.iter().any(|(f, s, _)| f == "s99f98" && *s == 1.0),
            "{:?}",
            &got[..10]
        );
        figures.push(format!(
            "{:.0} ms (response {:.0} ms, load {:.0} ms)",
            shown.painted, shown.response, shown.loaded
        ));
    }
    eprintln!(
        "profilez: Chromium showed a 10,000-frame flame graph, painted after: {}",
        figures.join("; ")
    );

    let shown = show(&browser, &wide).await;
    let got = frames(&shown.dom);
    // all, main and the 99 modules, each 100 functions' samples: 1.01%.
    assert_eq!(got.len(), 101, "{got:?}");
    let module = got.iter().find(|(f, _, _)| f == "module42").unwrap();
    assert_eq!(module.1, 1.01, "{got:?}");
    assert!(!got.iter().any(|(f, _, _)| f.starts_with("function")));
    eprintln!(
        "profilez: 9,900 sub-pixel functions under 99 modules (101 frames drawn) painted after {:.0} ms",
        shown.painted
    );
}

/// Clicking a module of the "wide" graph, whose 100 functions are each
/// too narrow to draw in the whole graph, shows them: the page asks the
/// server for the module's subtree.
#[tokio::test(flavor = "multi_thread")]
async fn clicking_a_module_zooms_into_its_narrow_functions() {
    let Some(chromium) = chromium() else { return };
    let Some(driver) = chromedriver() else { return };
    let (running, _dir) = collector().await;
    let base = format!("http://{}", running.addr("extensions::profilez"));
    let mut wide = String::new();
    for i in 0..9_900 {
        wide.push_str(&format!("main;module{};function{i} 5\n", i % 99));
    }
    push(running.port("receivers::pyroscope"), "wide", &wide).await;
    let page = page_listing(&base, "wide").await;
    let graph = format!("{base}/{}", link(&page, "wide", "flame graph"));
    let browser = Browser::start(driver, &chromium).await;
    browser.goto(&graph).await;
    let dom = browser
        .eval("return new XMLSerializer().serializeToString(document)")
        .await;
    assert!(!frames(dom.as_str().unwrap())
        .iter()
        .any(|(f, _, _)| f.starts_with("function")));

    let clicked = Instant::now();
    browser.click("rect[aria-label^='module42 (']").await;
    browser
        .wait_for("return location.search.includes('zoom=') && document.readyState === 'complete'")
        .await;
    let took = clicked.elapsed();
    let dom = browser
        .eval("return new XMLSerializer().serializeToString(document)")
        .await;
    let dom = dom.as_str().unwrap();
    assert!(
        dom.contains("zoomed into main;module42: 1.01% of all"),
        "{dom}"
    );
    let got = frames(dom);
    let functions: Vec<_> = got
        .iter()
        .filter(|(f, _, _)| f.starts_with("function"))
        .collect();
    assert_eq!(functions.len(), 100, "{got:?}");
    // module42 holds functions 42, 141, ..., 9843: each 5 of 49,500
    // samples, and 1% of the module.
    assert!(functions.iter().all(|(f, share, _)| {
        let i: usize = f["function".len()..].parse().unwrap();
        i % 99 == 42 && *share == 0.01
    }));
    assert!(
        dom.contains("aria-label=\"function9843 (5 samples, 0.01% of all, 1.00% of module42)\""),
        "{dom}"
    );
    assert!(!got.iter().any(|(f, _, _)| f == "module41"));

    // Back to the whole graph by the page's own button.
    browser.click("#unzoom").await;
    browser
        .wait_for("return !location.search.includes('zoom=') && document.readyState === 'complete'")
        .await;
    let dom = browser
        .eval("return new XMLSerializer().serializeToString(document)")
        .await;
    assert_eq!(frames(dom.as_str().unwrap()).len(), 101);
    eprintln!(
        "profilez: clicked into module42 (100 functions), shown {:.0} ms after the click",
        took.as_secs_f64() * 1e3
    );
    screenshot(
        &chromium,
        &format!("{graph}&zoom=main;module42"),
        "zoomed.png",
    );
}

/// `profcol flamegraph FILE` renders a recorded pprof with its functions'
/// shares; a file it cannot read is an error that says why.
#[test]
fn the_command_line_renders_a_recorded_payload() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("go.svg");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/pprof/go-cpu.pb.gz"
    );
    let o = profcol()
        .args(["flamegraph", fixture, "--sample-type", "cpu", "-o"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(
        svg.contains("aria-label=\"crypto/sha256.(*digest).Write ("),
        "{}",
        &svg[..2000]
    );
    let bad = dir.path().join("bad.binpb");
    std::fs::write(&bad, b"\xff\xff\xff").unwrap();
    let o = profcol().arg("flamegraph").arg(&bad).output().unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not an OTLP protobuf request"),
        "{o:?}"
    );
}

/// `profcol test --flamegraph DIR`: a test whose snapshot differs writes
/// what the exporter got, what the snapshot holds, and their difference.
#[test]
fn a_failing_pipeline_test_writes_its_flame_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/otlp/go-cpu.otlp.bin"
    );
    std::fs::write(
        dir.path().join("snap.txt"),
        "profile sample_type=cpu/nanoseconds period_type=cpu/nanoseconds period=10000000\n  main;expected_only 5\n",
    )
    .unwrap();
    let spec = dir.path().join("t.yaml");
    std::fs::write(
        &spec,
        format!(
            "config:\n  receivers: {{otlp: {{protocols: {{grpc: {{endpoint: 127.0.0.1:0}}}}}}}}\n  exporters: {{debug: {{}}}}\n  service: {{pipelines: {{profiles: {{receivers: [otlp], exporters: [debug]}}}}}}\n\
             tests:\n  - name: go cpu\n    inputs: [{{receiver: otlp, file: {fixture}}}]\n    expect: {{debug: {{snapshot: snap.txt}}}}\n"
        ),
    )
    .unwrap();
    let graphs = dir.path().join("graphs");
    let o = profcol()
        .arg("test")
        .arg(&spec)
        .arg("--flamegraph")
        .arg(&graphs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{stdout}");
    assert!(stdout.contains("wrote flame graph"), "{stdout}");
    let read = |kind: &str| {
        std::fs::read_to_string(graphs.join(format!("go_cpu--debug--cpu_nanoseconds-{kind}.svg")))
            .unwrap_or_else(|e| panic!("{kind}: {e}\n{stdout}"))
    };
    assert!(read("expected").contains("aria-label=\"expected_only ("));
    assert!(read("actual").contains("aria-label=\"main.main ("));
    let diff = read("diff");
    assert!(diff.contains("aria-label=\"main.main ("), "{diff}");
}
