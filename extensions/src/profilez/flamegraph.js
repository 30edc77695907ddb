// profcol: replaces inferno's load-time work, which touched every frame
// (reset every rect's position, then rewrote every label) and made a
// 10k-frame graph take seconds to show. Frames arrive laid out; only the
// labels of frames wide enough to hold one are written, and a frame with
// no room has no <text> at all until a zoom or a resize gives it some.
function init(evt) {
    details = document.getElementById("details").firstChild;
    searchbtn = document.getElementById("search");
    unzoombtn = document.getElementById("unzoom");
    matchedtxt = document.getElementById("matched");
    svg = document.getElementsByTagName("svg")[0];
    frames = document.getElementById("frames");
    total_samples = parseInt(frames.attributes.total_samples.value);
    searching = 0;
    known_font_width = text_width();
    if (fluiddrawing) {
        svg.removeAttribute("width");
        svg.removeAttribute("viewBox");
        window.addEventListener("resize", fit);
        fit();
    }
    var params = get_params();
    if (params.x && params.y)
        zoom(find_group(document.querySelector('[*|x="' + params.x + '"][y="' + params.y + '"]')));
    if (params.s)
        search(params.s);
}
// The width of a character of the frames' font (0 when not monospace).
function text_width() {
    var t = document.createElementNS("http://www.w3.org/2000/svg", "text");
    frames.appendChild(t);
    t.textContent = "!";
    var bang = t.getComputedTextLength();
    t.textContent = "W";
    var w = t.getComputedTextLength();
    frames.removeChild(t);
    return bang === w ? w : 0;
}
function fit() {
    frames.attributes.width.value = svg.width.baseVal.value - xpad * 2;
    update_text_for_elements(frames.children);
    var svgWidth = svg.width.baseVal.value;
    searchbtn.attributes.x.value = svgWidth - xpad;
    matchedtxt.attributes.x.value = svgWidth - xpad;
}
function update_text_for_elements(elements) {
    var fw = known_font_width || fontsize * fontwidth;
    var width = frames.attributes.width.value;
    var pad = 100 * 3 / width;
    // One pass reading, one writing: no layout between writes.
    var writes = [];
    for (var i = 0; i < elements.length; i++) {
        var e = elements[i];
        var r = e.querySelector("rect");
        var t = e.querySelector("text");
        var w = parseFloat(r.attributes.width.value) * width / 100 - 3;
        if (w < 2 * fw) {
            if (t && t.textContent !== "") writes.push([e, t, null, ""]);
            continue;
        }
        var txt = e.querySelector("title").textContent.replace(/\([^(]*\)$/, "");
        var x = format_percent(parseFloat(r.attributes.x.value) + pad);
        if (txt.length * fw >= w) {
            var n = Math.floor(w / fw) - 2;
            txt = truncate_text_right ? txt.substring(0, n) + ".." : ".." + txt.substring(txt.length - n);
        }
        writes.push([e, t, x, txt]);
    }
    for (var i = 0; i < writes.length; i++) {
        var e = writes[i][0], t = writes[i][1];
        if (!t) {
            t = document.createElementNS("http://www.w3.org/2000/svg", "text");
            t.setAttribute("y", parseFloat(e.querySelector("rect").attributes.y.value) + 10.5);
            e.appendChild(t);
        }
        if (writes[i][2] !== null) t.setAttribute("x", writes[i][2]);
        t.textContent = writes[i][3];
    }
}
