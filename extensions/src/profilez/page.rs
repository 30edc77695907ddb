//! The HTML pages: one listing the pipelines, one per pipeline with its
//! services, sample types and producers, their rates, when each was last
//! seen, and the pipeline's refusals and skipped samples.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::store::Store;

/// Text for HTML (element content and quoted attributes).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A query string of `pairs`, percent-encoded.
pub fn query(pairs: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

const STYLE: &str = "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}td.n{text-align:right}";

fn head(title: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>\n",
        t = escape(title)
    )
}

/// `/`: the pipelines seen, each a link to its page.
pub fn index(store: &Store) -> String {
    let mut h = head("profilez");
    let _ = writeln!(
        h,
        "<p>Windows of {}, {} kept; stacks take {} bytes.</p><ul>",
        humantime::format_duration(store.window()),
        store.windows(),
        store.held_bytes()
    );
    if store.pipelines().is_empty() {
        h.push_str("<li>No data yet: nothing has passed a profiles pipeline.</li>");
    }
    for name in store.pipelines().keys() {
        let _ = writeln!(
            h,
            "<li><a href=\"pipeline?{}\">{}</a></li>",
            escape(&query(&[("name", name)])),
            escape(name)
        );
    }
    h.push_str("</ul></body></html>\n");
    h
}

fn ago(d: Duration) -> String {
    format!("{:.1} s ago", d.as_secs_f64())
}

/// `/pipeline?name=`: one pipeline's series with links to their graphs.
pub fn pipeline(store: &Store, name: &str, skipped: u64, now: Instant) -> Option<String> {
    let view = store.pipelines().get(name)?;
    let mut h = head(&format!("profilez: pipeline {name}"));
    h.push_str("<p><a href=\"./\">all pipelines</a></p>\n<table id=\"series\"><tr><th>service</th><th>sample type</th><th>producers</th><th>samples/s</th><th>bytes/s</th><th>samples kept</th><th>last seen</th><th>graphs</th></tr>\n");
    for (key, s) in &view.series {
        let r = store.rates(s, now);
        let q = query(&[
            ("pipeline", name),
            ("service", &key.service),
            ("sample_type", &key.sample_type),
        ]);
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.0}</td><td class=\"n\">{}</td><td>{}</td><td><a href=\"flamegraph?{q}\">flame graph</a> <a href=\"diff?{q}\">diff: last window vs the one before</a></td></tr>",
            escape(&key.service),
            escape(&key.sample_type),
            escape(&s.producers.join(", ")),
            r.samples_per_sec,
            r.bytes_per_sec,
            r.samples,
            ago(now.saturating_duration_since(s.last_seen)),
            q = escape(&q),
        );
    }
    h.push_str("</table>\n<h2>Refusals</h2>\n<table id=\"refusals\"><tr><th>reason</th><th>batches</th><th>samples</th><th>last</th></tr>\n");
    for (reason, r) in &view.refusals {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            escape(reason),
            r.batches,
            r.samples,
            ago(now.saturating_duration_since(r.last))
        );
    }
    let _ = writeln!(
        h,
        "</table>\n<p id=\"skipped\">Samples not folded into the graphs (the tap's queue was full, or folding them would pass its CPU budget): {skipped}.</p></body></html>"
    );
    Some(h)
}
