//! Folded stacks to SVG with `inferno`: its flame graph has search (also
//! from the page's `?s=term`), zoom, and a tooltip with each frame's value
//! and share; its differential graph colours what grew red and what shrank
//! blue.
//!
//! Two changes to what inferno writes keep a large graph quick to show
//! (a 10k-frame graph took 2.5-3 s more than a small one in Chromium):
//! frames narrower than a pixel are not drawn ([`MIN_WIDTH_PCT`]), and
//! the script in `flamegraph.js` (next to this file), loaded after
//! inferno's, replaces its load-time pass over every frame; the label of a
//! frame with no room for one is left out until a zoom gives it room.

use std::fmt::Write as _;

use inferno::flamegraph::{self, Options};

/// What a graph is titled and what its values count.
pub struct Labels<'a> {
    pub title: &'a str,
    pub subtitle: Option<String>,
    /// The unit of the values (`nanoseconds`, `samples`): the tooltip says
    /// `work (1200 nanoseconds, 60.00%)`.
    pub unit: &'a str,
}

/// One pixel of the frames at inferno's default width (1200 pixels less
/// 10 of margin each side), in percent of the graph: what flame graph
/// tools leave out, as a frame narrower than that cannot be seen, pointed
/// at or labelled. Its samples still count in its parents' widths and
/// shares. inferno's default (0.01%) kept frames of 0.12 pixel.
pub const MIN_WIDTH_PCT: f64 = 100.0 / 1180.0;

/// Loaded after inferno's script, whose functions it replaces.
const SCRIPT: &str = include_str!("flamegraph.js");

fn options(l: &Labels<'_>) -> Options<'static> {
    let mut o = Options::default();
    o.min_width = MIN_WIDTH_PCT;
    o.title = l.title.to_owned();
    o.subtitle = l.subtitle.clone();
    // A count of samples reads as samples.
    o.count_name = match l.unit {
        "" | "count" => "samples".into(),
        u => u.to_owned(),
    };
    // The same colours for the same page, so that two windows compare.
    o.hash = true;
    o.deterministic = true;
    o
}

/// Folded text, `stack value` a line, for stacks with a positive value
/// (inferno reads no other).
fn folded<'a>(stacks: impl IntoIterator<Item = (&'a str, i64)>) -> String {
    let mut text = String::new();
    for (stack, v) in stacks {
        if v > 0 {
            let _ = writeln!(text, "{stack} {v}");
        }
    }
    text
}

/// An SVG flame graph of `stacks` (root-first, `;`-separated); a graph
/// with no samples says so instead of failing.
pub fn flamegraph<'a>(
    stacks: impl IntoIterator<Item = (&'a str, i64)>,
    labels: &Labels<'_>,
) -> Vec<u8> {
    let text = folded(stacks);
    let mut out = Vec::new();
    let mut o = options(labels);
    match flamegraph::from_lines(&mut o, text.lines(), &mut out) {
        Ok(()) => slim(&out),
        Err(e) => {
            out.clear();
            empty(&mut out, labels.title, &e.to_string());
            out
        }
    }
}

/// A differential flame graph: the shape of `after`, each frame red when
/// it grew from `before` and blue when it shrank (by share, as
/// `difffolded.pl -n`: the two windows need not hold as many samples).
pub fn differential<'a, 'b>(
    before: impl IntoIterator<Item = (&'a str, i64)>,
    after: impl IntoIterator<Item = (&'b str, i64)>,
    labels: &Labels<'_>,
) -> Vec<u8> {
    let (before, after) = (folded(before), folded(after));
    let mut diff = Vec::new();
    let opt = inferno::differential::Options {
        normalize: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    let made =
        inferno::differential::from_readers(opt, before.as_bytes(), after.as_bytes(), &mut diff)
            .and_then(|()| {
                let diff = String::from_utf8_lossy(&diff);
                flamegraph::from_lines(&mut options(labels), diff.lines(), &mut out)
            });
    match made {
        Ok(()) => slim(&out),
        Err(e) => {
            out.clear();
            empty(&mut out, labels.title, &e.to_string());
            out
        }
    }
}

/// inferno's SVG with [`SCRIPT`] after inferno's script, and without the
/// empty label of each frame too narrow for one (`<text x=".." y="..">
/// </text>` before its `</g>`): most frames of a large graph, each an
/// element the browser would parse and lay out for nothing.
fn slim(svg: &[u8]) -> Vec<u8> {
    const EMPTY_END: &str = "\"></text></g>";
    const TEXT: &str = "<text x=\"";
    let Ok(mut rest) = std::str::from_utf8(svg) else {
        return svg.to_vec();
    };
    let mut out = String::with_capacity(svg.len() + SCRIPT.len() + 64);
    if let Some(i) = rest.find("</script>") {
        let i = i + "</script>".len();
        out.push_str(&rest[..i]);
        out.push_str("<script type=\"text/ecmascript\"><![CDATA[\n");
        out.push_str(SCRIPT);
        out.push_str("]]></script>");
        rest = &rest[i..];
    }
    while let Some(end) = rest.find(EMPTY_END) {
        let label = rest[..end]
            .rfind(TEXT)
            .filter(|&start| !rest[start..end].contains('>'));
        match label {
            Some(start) => {
                out.push_str(&rest[..start]);
                out.push_str("</g>");
            }
            None => out.push_str(&rest[..end + EMPTY_END.len()]),
        }
        rest = &rest[end + EMPTY_END.len()..];
    }
    out.push_str(rest);
    out.into_bytes()
}

/// A small SVG saying why there is no graph (no samples in the window).
fn empty(out: &mut Vec<u8>, title: &str, why: &str) {
    let text = format!(
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"1200\" height=\"60\" xmlns=\"http://www.w3.org/2000/svg\"><text x=\"600\" y=\"24\" text-anchor=\"middle\">{}</text><text id=\"no-data\" x=\"600\" y=\"48\" text-anchor=\"middle\">{}</text></svg>\n",
        super::page::escape(title),
        super::page::escape(why)
    );
    out.extend_from_slice(text.as_bytes());
}
