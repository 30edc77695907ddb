// profcol's flame graph script (Apache-2.0, as the rest of profcol),
// written for profcol and loaded instead of inferno's: inferno writes
// the SVG (its frames, buttons and settings such as `fluiddrawing`) and
// this script is all that runs on it.
//
// Why our own: inferno's script touched every frame at load (reset each
// rect, then measured and rewrote each label) and forced layouts while
// doing it, which took most of a second on a 10k-frame graph. Here the
// frames arrive laid out and labelled by the server; the load does no
// per-frame DOM work unless the window's width differs from the one the
// server labelled for, and then only reads one attribute per frame and
// writes the labels of the frames that have room for one. Widths of text
// are estimated from a fixed character width (no getComputedTextLength,
// so no layout is forced).
//
// Zooming: a page served by profilez asks the server for the subtree
// (`&zoom=main;module42`), which draws the frames that were too narrow to
// draw in the whole graph; a file (`profcol flamegraph`) zooms in place.
"use strict";

var pz = {
    frames: null, // the frames container, #frames
    total: 0, // the value of the graph's root frame
    width: 0, // the frames' width in pixels
    list: null, // per frame {el, rect, x, w, y}, read on first use
    focus: null, // the frame zoomed into in place, or null
    labelled: 0, // the width the labels were last written for
};

function init() {
    pz.frames = document.getElementById("frames");
    pz.total = Number(pz.frames.getAttribute("total_samples"));
    pz.width = Number(pz.frames.getAttribute("width"));
    // The server wrote the labels for this width.
    pz.labelled = pz.width;
    if (pz_zoomed) document.getElementById("unzoom").classList.remove("hide");
    if (fluiddrawing) {
        var root = document.documentElement;
        root.removeAttribute("width");
        root.removeAttribute("viewBox");
        window.addEventListener("resize", fit);
        fit();
    }
    var q = query();
    // A frame to zoom into, by where it is (`fg:x` and `y`, as a click
    // picks it): what a zoomed graph's address holds when zoomed in place.
    if (q.x && q.y) {
        var list = frame_list();
        for (var i = 0; i < list.length; i++) {
            if (list[i].x === Number(q.x) && list[i].y === Number(q.y)) {
                zoom(list[i]);
                if (pz_server_zoom) return;
                break;
            }
        }
    }
    if (q.s) search(q.s);
}

// The window's query parameters.
function query() {
    var out = {};
    new URLSearchParams(window.location.search).forEach(function (v, k) {
        out[k] = v;
    });
    return out;
}

function set_query(q) {
    var p = new URLSearchParams();
    for (var k in q) if (q[k] !== undefined) p.set(k, q[k]);
    var s = p.toString();
    return window.location.pathname + (s ? "?" + s : "");
}

// The frames as records, read from the DOM once (not at load: a graph
// only looked at never pays for it). A frame is a child of #frames: its
// rect (whose aria-label is `name (value, share)`), or a g of the rect
// and its label when it has room for one.
function frame_list() {
    if (pz.list) return pz.list;
    var out = [];
    var els = pz.frames.children;
    for (var i = 0; i < els.length; i++) {
        var el = els[i];
        var rect = el.tagName === "rect" ? el : el.querySelector("rect");
        if (!rect) continue;
        el.pz_frame = {
            el: el,
            rect: rect,
            x: Number(rect.getAttribute("fg:x")),
            w: Number(rect.getAttribute("fg:w")),
            y: Number(rect.getAttribute("y")),
        };
        out.push(el.pz_frame);
    }
    pz.list = out;
    return out;
}

// What the server says of a frame: `name (value unit, share of all)`.
function about(f) {
    return f.rect.getAttribute("aria-label") || "";
}

// A frame's name: `about` less the `(value, share)` that follows it.
function name_of(f) {
    var t = about(f);
    var i = t.lastIndexOf(" (");
    return i < 0 ? t : t.substring(0, i);
}

// The frame's label, or null.
function label_of(f) {
    return f.el === f.rect ? null : f.el.querySelector("text");
}

// The window's width, without asking for a layout (innerWidth is known
// without one).
function fit() {
    var w = window.innerWidth;
    if (!w) return;
    pz.width = w - xpad * 2;
    pz.frames.setAttribute("width", pz.width);
    document.getElementById("search").setAttribute("x", w - xpad);
    document.getElementById("matched").setAttribute("x", w - xpad);
    // A label is within a few pixels of right unless the width changed
    // by more than a character's worth.
    if (Math.abs(pz.width - pz.labelled) >= fontsize * fontwidth) label_all();
}

// The visible range of values: the frame zoomed into, or all.
function range() {
    return pz.focus ? { x: pz.focus.x, w: pz.focus.w } : { x: 0, w: pz.total };
}

// Writes the label of every visible frame wide enough for one and clears
// the others': all reads first, then the writes.
function label_all() {
    var list = frame_list();
    var r = range();
    var cw = fontsize * fontwidth;
    var writes = [];
    for (var i = 0; i < list.length; i++) {
        var f = list[i];
        var inside = f.x >= r.x && f.x + f.w <= r.x + r.w;
        var px = inside ? (f.w / r.w) * pz.width - 3 : pz.width - 3;
        var text = label_of(f);
        if (px < 3 * cw) {
            if (text && text.textContent !== "") writes.push([f, text, ""]);
            continue;
        }
        var n = name_of(f);
        var fits = Math.floor(px / cw);
        if (n.length > fits) {
            n = truncate_text_right
                ? n.substring(0, fits - 2) + ".."
                : ".." + n.substring(n.length - (fits - 2));
        }
        writes.push([f, text, n]);
    }
    for (var j = 0; j < writes.length; j++) {
        var f = writes[j][0];
        var t = writes[j][1];
        if (!t) {
            // A g for the rect and its new label.
            var g = document.createElementNS("http://www.w3.org/2000/svg", "g");
            t = document.createElementNS("http://www.w3.org/2000/svg", "text");
            t.setAttribute("y", f.y + 10.5);
            pz.frames.replaceChild(g, f.rect);
            g.appendChild(f.rect);
            g.appendChild(t);
            g.setAttribute("class", f.rect.getAttribute("class") || "");
            f.rect.removeAttribute("class");
            g.pz_frame = f;
            f.el = g;
        }
        var x = parseFloat(f.rect.getAttribute("x")) + (100 * 3) / pz.width;
        t.setAttribute("x", x.toFixed(4) + "%");
        t.textContent = writes[j][2];
    }
    pz.labelled = pz.width;
}

// The frame that `node` is in (or is).
function frame_of(node) {
    while (node && node.parentNode) {
        if (node.parentNode === pz.frames) {
            frame_list();
            return node.pz_frame || null;
        }
        node = node.parentNode;
    }
    return null;
}

// Whether `a` holds `b` (is below it in the graph, spanning it).
function holds(a, b) {
    var below = inverted ? a.y < b.y : a.y > b.y;
    return below && a.x <= b.x && a.x + a.w >= b.x + b.w;
}

// The names from the root's child to `f`: the frame path the server
// zooms into. The root (`all`) is the frame below all others.
function path_of(f) {
    var list = frame_list();
    var chain = [f];
    for (var i = 0; i < list.length; i++) if (holds(list[i], f)) chain.push(list[i]);
    chain.sort(function (a, b) {
        return inverted ? a.y - b.y : b.y - a.y;
    });
    return chain.slice(1).map(name_of).join(";");
}

function zoom(f) {
    var q = query();
    if (pz_server_zoom) {
        q.zoom = path_of(f) || undefined;
        delete q.x;
        delete q.y;
        window.location.assign(set_query(q));
        return;
    }
    q.x = f.x;
    q.y = f.y;
    history.replaceState(null, "", set_query(q));
    pz.focus = f;
    var list = frame_list();
    for (var i = 0; i < list.length; i++) {
        var e = list[i];
        var under = e === f || holds(f, e);
        var above = holds(e, f);
        e.el.classList.toggle("hide", !under && !above);
        e.el.classList.toggle("parent", above);
        var x = above ? 0 : ((e.x - f.x) / f.w) * 100;
        var w = above ? 100 : (e.w / f.w) * 100;
        e.rect.setAttribute("x", x.toFixed(4) + "%");
        e.rect.setAttribute("width", w.toFixed(4) + "%");
    }
    document.getElementById("unzoom").classList.remove("hide");
    label_all();
}

function unzoom() {
    if (pz_zoomed) {
        var q = query();
        delete q.zoom;
        window.location.assign(set_query(q));
        return;
    }
    var q = query();
    delete q.x;
    delete q.y;
    history.replaceState(null, "", set_query(q));
    pz.focus = null;
    var list = frame_list();
    for (var i = 0; i < list.length; i++) {
        var e = list[i];
        e.el.classList.remove("hide", "parent");
        e.rect.setAttribute("x", ((e.x / pz.total) * 100).toFixed(4) + "%");
        e.rect.setAttribute("width", ((e.w / pz.total) * 100).toFixed(4) + "%");
    }
    document.getElementById("unzoom").classList.add("hide");
    label_all();
}

// What a frame's tooltip says: its value and share of the whole (and of
// the frame zoomed into on the server), and its share of the frame
// zoomed into in place.
function describe(f) {
    var t = about(f);
    if (pz.focus && pz.focus !== f && !holds(f, pz.focus)) {
        t += " " + ((100 * f.w) / pz.focus.w).toFixed(2) + "% of " + name_of(pz.focus);
    }
    return t;
}

// Paints the frames whose name matches `term` (a regular expression) and
// says how much of the visible graph they cover, a frame inside another
// match counted once.
function search(term) {
    var re;
    try {
        re = new RegExp(term);
    } catch (e) {
        return;
    }
    reset_search();
    var list = frame_list();
    var r = range();
    var hits = [];
    for (var i = 0; i < list.length; i++) {
        var f = list[i];
        if (f.el.classList.contains("hide") || f.el.classList.contains("parent")) continue;
        if (!re.test(name_of(f))) continue;
        f.rect.setAttribute("fg:orig_fill", f.rect.getAttribute("fill"));
        f.rect.setAttribute("fill", searchcolor);
        hits.push(f);
    }
    if (!hits.length) return;
    hits.sort(function (a, b) {
        return a.x - b.x || b.w - a.w;
    });
    var covered = 0;
    var end = -1;
    for (var j = 0; j < hits.length; j++) {
        if (hits[j].x >= end) {
            covered += hits[j].w;
            end = hits[j].x + hits[j].w;
        }
    }
    var pct = (100 * covered) / r.w;
    var q = query();
    q.s = term;
    history.replaceState(null, "", set_query(q));
    var btn = document.getElementById("search");
    btn.classList.add("show");
    btn.firstChild.nodeValue = "Reset Search";
    var m = document.getElementById("matched");
    m.classList.remove("hide");
    m.firstChild.nodeValue = "Matched: " + (pct === 100 ? "100" : pct.toFixed(1)) + "%";
}

function reset_search() {
    var list = frame_list();
    for (var i = 0; i < list.length; i++) {
        var r = list[i].rect;
        var orig = r.getAttribute("fg:orig_fill");
        if (orig !== null) {
            r.setAttribute("fill", orig);
            r.removeAttribute("fg:orig_fill");
        }
    }
    var btn = document.getElementById("search");
    btn.classList.remove("show");
    btn.firstChild.nodeValue = "Search";
    var m = document.getElementById("matched");
    m.classList.add("hide");
    m.firstChild.nodeValue = "";
}

function search_prompt() {
    if (document.getElementById("search").classList.contains("show")) {
        reset_search();
        var q = query();
        delete q.s;
        history.replaceState(null, "", set_query(q));
        return;
    }
    var term = prompt("Search for (a regular expression, e.g. ^ext4_)", "");
    if (term) search(term);
}

window.addEventListener("click", function (e) {
    var f = frame_of(e.target);
    if (f) {
        if (f.el.classList.contains("parent") && !pz_server_zoom) unzoom();
        zoom(f);
    } else if (e.target.id === "unzoom") {
        unzoom();
    } else if (e.target.id === "search") {
        search_prompt();
    }
});

window.addEventListener("mouseover", function (e) {
    var f = frame_of(e.target);
    if (!f) return;
    var t = describe(f);
    document.getElementById("details").firstChild.nodeValue = nametype + " " + t;
    // The browser's tooltip, made when pointed at rather than sent for
    // every frame.
    var title = f.rect.querySelector("title");
    if (!title) {
        title = document.createElementNS("http://www.w3.org/2000/svg", "title");
        f.rect.appendChild(title);
    }
    title.textContent = t;
});

window.addEventListener("mouseout", function (e) {
    if (frame_of(e.target)) document.getElementById("details").firstChild.nodeValue = " ";
});

window.addEventListener("keydown", function (e) {
    if (e.key === "F3" || (e.ctrlKey && e.key === "f")) {
        e.preventDefault();
        search_prompt();
    }
});
