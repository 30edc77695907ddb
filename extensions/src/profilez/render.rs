//! Folded stacks to SVG with `inferno`: its flame graph, and its
//! differential graph, which colours what grew red and what shrank blue.
//! What runs in the page is our own script (`flamegraph.js`, next to this
//! file) in place of inferno's: search (also from the page's `?s=term`),
//! zoom, and the details line.
//!
//! What keeps a large graph quick to show (a 10k-frame graph took 2.5-3 s
//! more than a small one in Chromium with inferno's SVG and script as
//! they are): frames narrower than a pixel are not drawn
//! ([`MIN_WIDTH_PCT`]), and zooming into a frame draws its subtree anew
//! ([`View::zoom`]), so they are when they have room; a frame too narrow
//! for a label has no `<text>`; and the script does no work per frame at
//! load.

use std::fmt::Write as _;

use inferno::flamegraph::{self, Options};

/// What a graph is titled and what its values count.
pub struct Labels<'a> {
    pub title: &'a str,
    pub subtitle: Option<String>,
    /// The unit of the values (`nanoseconds`, `samples`): the tooltip says
    /// `work (1,200 nanoseconds, 60.00% of all)`.
    pub unit: &'a str,
}

/// One pixel of the frames at inferno's default width (1200 pixels less
/// 10 of margin each side), in percent of the graph: what flame graph
/// tools leave out, as a frame narrower than that cannot be seen, pointed
/// at or labelled. Its samples still count in its parents' widths and
/// shares. inferno's default (0.01%) kept frames of 0.12 pixel.
pub const MIN_WIDTH_PCT: f64 = 100.0 / 1180.0;

/// The page's script, ours (Apache-2.0), in place of inferno's: inferno
/// writes only its settings (`fluiddrawing`, `searchcolor`..).
const SCRIPT: &str = include_str!("flamegraph.js");

fn options(l: &Labels<'_>, view: &View<'_>, text: &str, whole: u64) -> Options<'static> {
    let mut o = Options::default();
    o.min_width = MIN_WIDTH_PCT;
    o.title = l.title.to_owned();
    o.subtitle = l.subtitle.clone();
    if let Some(z) = view.zoom {
        // What the zoomed frame holds: the stacks drawn.
        let held: u64 = text
            .lines()
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum();
        let zoomed = format!("zoomed into {z}: {:.2}% of all", pct(held, whole));
        o.subtitle = Some(match o.subtitle.take() {
            Some(s) => format!("{s}; {zoomed}"),
            None => zoomed,
        });
    }
    // Our script in place of inferno's (see `flamegraph.js`).
    o.no_javascript = true;
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

/// What part of a graph to draw, and where it is shown.
#[derive(Debug, Default, Clone, Copy)]
pub struct View<'a> {
    /// A frame path (`main;module42`): only the stacks through it are
    /// drawn, so that its descendants get the whole width, including
    /// those too narrow to draw in the whole graph ([`MIN_WIDTH_PCT`]).
    /// Tooltips give shares of the whole graph and of this frame.
    pub zoom: Option<&'a str>,
    /// Served by profilez, which draws a zoom itself (`&zoom=`): a click
    /// asks for the subtree. A file (`profcol flamegraph`) zooms in place,
    /// among the frames it has.
    pub served: bool,
}

impl View<'_> {
    /// Whether `stack` goes through the frame zoomed into (all do when
    /// not zoomed).
    fn keeps(&self, stack: &str) -> bool {
        match self.zoom {
            None => true,
            Some(z) => {
                stack.starts_with(z) && matches!(stack.as_bytes().get(z.len()), None | Some(b';'))
            }
        }
    }

    /// The name of the frame zoomed into.
    fn leaf(&self) -> Option<&str> {
        self.zoom.map(|z| z.rsplit(';').next().unwrap_or(z))
    }
}

/// Folded text, `stack value` a line, for the stacks of `view` with a
/// positive value (inferno reads no other), and the total of all stacks
/// (the whole graph's, what shares are of).
fn folded<'a>(stacks: impl IntoIterator<Item = (&'a str, i64)>, view: &View<'_>) -> (String, u64) {
    let mut text = String::new();
    let mut whole = 0u64;
    for (stack, v) in stacks {
        if v > 0 {
            whole = whole.saturating_add(v.unsigned_abs());
            if view.keeps(stack) {
                let _ = writeln!(text, "{stack} {v}");
            }
        }
    }
    (text, whole)
}

/// An SVG flame graph of `stacks` (root-first, `;`-separated); a graph
/// with no samples says so instead of failing.
pub fn flamegraph<'a>(
    stacks: impl IntoIterator<Item = (&'a str, i64)>,
    labels: &Labels<'_>,
) -> Vec<u8> {
    flamegraph_view(stacks, labels, &View::default())
}

/// [`flamegraph`] of a part of the graph ([`View`]).
pub fn flamegraph_view<'a>(
    stacks: impl IntoIterator<Item = (&'a str, i64)>,
    labels: &Labels<'_>,
    view: &View<'_>,
) -> Vec<u8> {
    let (text, whole) = folded(stacks, view);
    let mut out = Vec::new();
    let mut o = options(labels, view, &text, whole);
    match flamegraph::from_lines(&mut o, text.lines(), &mut out) {
        Ok(()) => slim(&out, whole, view),
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
    differential_view(before, after, labels, &View::default())
}

/// [`differential`] of a part of the graph ([`View`]): the windows are
/// compared whole (so that a share's change is of the whole window), and
/// then the stacks through the zoomed frame drawn.
pub fn differential_view<'a, 'b>(
    before: impl IntoIterator<Item = (&'a str, i64)>,
    after: impl IntoIterator<Item = (&'b str, i64)>,
    labels: &Labels<'_>,
    view: &View<'_>,
) -> Vec<u8> {
    let all = View::default();
    let (before, after) = (folded(before, &all).0, folded(after, &all));
    let (after, whole) = after;
    let mut diff = Vec::new();
    let opt = inferno::differential::Options {
        normalize: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    let made =
        inferno::differential::from_readers(opt, before.as_bytes(), after.as_bytes(), &mut diff)
            .and_then(|()| {
                // `stack before after` a line.
                let diff = String::from_utf8_lossy(&diff);
                let lines: Vec<&str> = diff
                    .lines()
                    .filter(|l| view.keeps(l.split(' ').next().unwrap_or("")))
                    .collect();
                let text = lines.join("\n");
                let mut o = options(labels, view, &text, whole);
                flamegraph::from_lines(&mut o, lines, &mut out)
            });
    match made {
        Ok(()) => slim(&out, whole, view),
        Err(e) => {
            out.clear();
            empty(&mut out, labels.title, &e.to_string());
            out
        }
    }
}

/// The share of `part` in `whole`, in percent.
fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// inferno's SVG with [`SCRIPT`] in place of inferno's script, and each
/// frame as one element where inferno writes four (`<g><title>T</title>
/// <rect ../><text ..>L</text></g>`): `<rect aria-label="T" ../>`, its
/// accessible name and the details line's text (the script makes a
/// `<title>` of it on hover, for the browser's tooltip), in a `<g>` with
/// its label only when it has room for one. Parsing and styling the
/// elements was most of the time a large graph took to show (a 10k-frame
/// graph: 40% less time parsing without the titles). Each tooltip gives
/// the frame's share of the whole graph (and of the frame zoomed into).
fn slim(svg: &[u8], whole: u64, view: &View<'_>) -> Vec<u8> {
    const FRAMES: &str = "<svg id=\"frames\"";
    let Ok(text) = std::str::from_utf8(svg) else {
        return svg.to_vec();
    };
    let mut out = String::with_capacity(svg.len() + SCRIPT.len() + 256);
    let mut rest = text;
    if let Some(i) = rest.find("</script>") {
        let i = i + "</script>".len();
        out.push_str(&rest[..i]);
        let _ = write!(
            out,
            "<script type=\"text/ecmascript\"><![CDATA[\nvar pz_server_zoom = {};\nvar pz_zoomed = {};\n",
            view.served,
            view.zoom.is_some()
        );
        out.push_str(SCRIPT);
        out.push_str("]]></script>");
        rest = &rest[i..];
    }
    let Some(frames) = rest.find(FRAMES) else {
        out.push_str(rest);
        return out.into_bytes();
    };
    // Through the frames' container's opening tag.
    let frames = frames + rest[frames..].find('>').map_or(0, |i| i + 1);
    out.push_str(&rest[..frames]);
    rest = &rest[frames..];
    let leaf = view.leaf().map(super::page::escape);
    let mut title = String::new();
    // inferno writes a frame as `<g><title>T</title><rect ../>` and a
    // label (`<text ..>L</text>`, empty when it has no room), then `</g>`.
    while let Some(end) = rest.find("</g>") {
        let g = &rest[..end];
        rest = &rest[end + "</g>".len()..];
        let parts = g.strip_prefix("<g><title>").and_then(|g| {
            let (t, after) = g.split_once("</title>")?;
            let close = after.strip_prefix("<rect")?.find("/>")? + "<rect".len();
            Some((t, &after[..close], &after[close + 2..]))
        });
        let Some((t, rect, label)) = parts else {
            // Not a frame as above: as inferno wrote it.
            out.push_str(g);
            out.push_str("</g>");
            continue;
        };
        title.clear();
        match attr(rect, "fg:w=\"").and_then(|w| w.parse::<u64>().ok()) {
            Some(w) => retitle(&mut title, t, w, whole, leaf.as_deref()),
            None => title.push_str(t),
        }
        // Text escaped as element content may hold a `"`.
        let title = title.replace('"', "&quot;");
        // inferno leaves the root's label empty (its name is ""): "all".
        let root;
        let label = if t.starts_with("all (")
            && rect.contains("width=\"100.0000%\"")
            && label.ends_with("\"></text>")
        {
            root = label.replace("\"></text>", "\">all</text>");
            &root
        } else {
            label
        };
        let empty = label.is_empty()
            || (label.starts_with("<text") && label.ends_with("\"></text>") && {
                let open = &label[..label.len() - "</text>".len()];
                !open[..open.len() - 1].contains('>')
            });
        if !empty {
            out.push_str("<g>");
        }
        let _ = write!(
            out,
            "<rect aria-label=\"{title}\"{}/>",
            &rect["<rect".len()..]
        );
        if !empty {
            out.push_str(label);
            out.push_str("</g>");
        }
    }
    out.push_str(rest);
    out.into_bytes()
}

/// The value of the attribute that `name` (`fg:w="`) opens in `tag`.
fn attr<'t>(tag: &'t str, name: &str) -> Option<&'t str> {
    let i = tag.find(name)? + name.len();
    tag[i..].split('"').next()
}

/// inferno's tooltip, `name (1,200 samples, 60.00%)` (or `..., 60.00%;
/// +10.00%)` in a diff), with the share of the whole graph (`60.00% of
/// all`) and, zoomed, of the frame zoomed into (`, 75.00% of handle`).
fn retitle(out: &mut String, title: &str, w: u64, whole: u64, leaf: Option<&str>) {
    let shares = title.rfind(" (").and_then(|open| {
        let comma = open + title[open..].find(", ")? + 2;
        let end = comma + title[comma..].find('%')? + 1;
        Some((comma, end))
    });
    let Some((start, end)) = shares else {
        out.push_str(title);
        return;
    };
    out.push_str(&title[..start]);
    let _ = write!(out, "{:.2}% of all", pct(w, whole));
    if let Some(leaf) = leaf {
        // The zoomed frame holds all of this graph's samples.
        let _ = write!(out, ", {}% of {leaf}", &title[start..end - 1]);
    }
    out.push_str(&title[end..]);
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
