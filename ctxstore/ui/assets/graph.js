/* ctx ui: the graph drawing. Plain SVG and a force layout of its own (Fruchterman-Reingold
 * with a grid for the repulsion, so a few thousand nodes lay out in well under a second),
 * deterministic (no random numbers: the same graph is drawn the same way). Pan by dragging the
 * background, zoom with the wheel, drag a node to move it, click a node to open its page.
 * Labels are text nodes (never HTML): a node's name is anyone's text. */
(function () {
  "use strict";
  var NS = "http://www.w3.org/2000/svg";
  var COLORS = {
    decision: "#8250df", task: "#0969da", observation: "#1b7c83", fact: "#1a7f37",
    pattern: "#bf3989", hypothesis: "#9a6700", summary: "#0550ae", source: "#6e7781",
    "open-question": "#bc4c00", file: "#d4a72c", module: "#8c959f", item: "#afb8c1",
    package: "#57606a", crate: "#57606a", target: "#57606a", diagnostic: "#cf222e"
  };

  function colorOf(node) {
    if (node.kind === "node") { return COLORS[node.type] || "#6e7781"; }
    return COLORS[node.kind] || "#8c959f";
  }

  function radiusOf(node) {
    return 5 + Math.min(7, Math.sqrt(node.degree || 0) * 1.5);
  }

  /* Positions for nodes[i] (x, y), from links [source, target] index pairs. */
  function layout(nodes, links, iterations) {
    var n = nodes.length;
    var k = 60;                       // the ideal distance between linked nodes
    var cell = 2.5 * k;               // repulsion beyond this distance is ignored
    var i, j, it;
    var x = new Float64Array(n), y = new Float64Array(n);
    var dx = new Float64Array(n), dy = new Float64Array(n);
    for (i = 0; i < n; i++) {         // a golden-angle spiral: spread, and the same every time
      var r = k * 0.9 * Math.sqrt(i + 0.5), a = i * 2.399963229728653;
      x[i] = r * Math.cos(a); y[i] = r * Math.sin(a);
    }
    var start = k * Math.max(2, Math.sqrt(n) / 2);
    for (it = 0; it < iterations; it++) {
      var temp = start * (1 - it / iterations) + 0.5;
      dx.fill(0); dy.fill(0);
      var grid = new Map();
      for (i = 0; i < n; i++) {
        var key = Math.floor(x[i] / cell) + "," + Math.floor(y[i] / cell);
        var bucket = grid.get(key);
        if (bucket) { bucket.push(i); } else { grid.set(key, [i]); }
      }
      for (i = 0; i < n; i++) {
        var cx = Math.floor(x[i] / cell), cy = Math.floor(y[i] / cell);
        for (var gx = cx - 1; gx <= cx + 1; gx++) {
          for (var gy = cy - 1; gy <= cy + 1; gy++) {
            var near = grid.get(gx + "," + gy);
            if (!near) { continue; }
            for (var m = 0; m < near.length; m++) {
              j = near[m];
              if (j === i) { continue; }
              var ex = x[i] - x[j], ey = y[i] - y[j];
              var d2 = ex * ex + ey * ey;
              if (d2 < 0.01) {        // on top of each other: part them by their indexes
                ex = (i - j) * 0.1; ey = (j % 7 - 3) * 0.1 + 0.05; d2 = ex * ex + ey * ey;
              }
              if (d2 > cell * cell) { continue; }
              var f = (k * k) / d2;   // k^2 / d, along the unit vector (ex, ey) / d
              dx[i] += ex * f; dy[i] += ey * f;
            }
          }
        }
      }
      for (m = 0; m < links.length; m++) {
        var s = links[m][0], t = links[m][1];
        if (s === t) { continue; }
        var lx = x[s] - x[t], ly = y[s] - y[t];
        var d = Math.sqrt(lx * lx + ly * ly) || 0.01;
        var pull = d / k;             // d^2 / k, along the unit vector
        dx[s] -= lx * pull; dy[s] -= ly * pull;
        dx[t] += lx * pull; dy[t] += ly * pull;
      }
      for (i = 0; i < n; i++) {
        dx[i] -= x[i] * 0.02; dy[i] -= y[i] * 0.02;   // gravity: parts stay together
        var len = Math.sqrt(dx[i] * dx[i] + dy[i] * dy[i]);
        if (len > 0) {
          var step = Math.min(len, temp) / len;
          x[i] += dx[i] * step; y[i] += dy[i] * step;
        }
      }
    }
    for (i = 0; i < n; i++) { nodes[i].x = x[i]; nodes[i].y = y[i]; }
  }

  function svgEl(tag, attrs) {
    var e = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (name) { e.setAttribute(name, attrs[name]); });
    return e;
  }

  /* Draw `data` (a GraphPage: nodes, links) into `container`. options.onOpen(node) is called
   * when a node is clicked; options.focus names a node to ring. Returns the svg element. */
  function draw(container, data, options) {
    options = options || {};
    while (container.firstChild) { container.removeChild(container.firstChild); }
    var nodes = data.nodes.map(function (n) { return Object.assign({}, n); });
    var pairs = data.links.map(function (l) { return [l.source, l.target]; });
    layout(nodes, pairs, nodes.length > 1200 ? 160 : 300);
    var width = container.clientWidth || 800, height = container.clientHeight || 500;
    var svg = svgEl("svg", { viewBox: "0 0 " + width + " " + height, role: "img",
      "aria-label": "graph of " + nodes.length + " nodes" });
    var defs = svgEl("defs");
    [["arrow", "#8c959f"], ["arrow-cycle", "#cf222e"]].forEach(function (m) {
      var marker = svgEl("marker", { id: m[0], viewBox: "0 0 10 10", refX: "9", refY: "5",
        markerWidth: "8", markerHeight: "8", markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" });
      marker.appendChild(svgEl("path", { d: "M0,0 L10,5 L0,10 z", fill: m[1] }));
      defs.appendChild(marker);
    });
    svg.appendChild(defs);
    var view = svgEl("g", { "class": "viewport" });
    svg.appendChild(view);
    var linkLayer = svgEl("g", { "class": "links" }), nodeLayer = svgEl("g", { "class": "nodes" });
    view.appendChild(linkLayer); view.appendChild(nodeLayer);

    // A link whose reverse is drawn too bends to its right, so the two stay apart.
    var pairsSeen = {};
    data.links.forEach(function (l) { pairsSeen[l.source + ">" + l.target] = true; });
    var lines = data.links.map(function (l) {
      var line = svgEl("path", { "class": l.cycle ? "link cycle" : "link", fill: "none",
        "marker-end": l.cycle ? "url(#arrow-cycle)" : "url(#arrow)" });
      var title = svgEl("title");
      title.textContent = nodes[l.source].id + " → " + nodes[l.target].id + " (" + l.labels.join(", ") + ")";
      line.appendChild(title);
      linkLayer.appendChild(line);
      return line;
    });
    function placeLink(index) {
      var l = data.links[index], a = nodes[l.source], b = nodes[l.target];
      var ex = b.x - a.x, ey = b.y - a.y, d = Math.sqrt(ex * ex + ey * ey) || 1;
      var bend = pairsSeen[l.target + ">" + l.source] ? Math.min(24, d / 3) : 0;
      var ux = ex / d, uy = ey / d, nx = -uy, ny = ux;   // along, and to the right of, the link
      var ra = radiusOf(a), rb = radiusOf(b) + 2;
      var x1 = a.x + ux * ra + nx * bend * 0.35, y1 = a.y + uy * ra + ny * bend * 0.35;
      var x2 = b.x - ux * rb + nx * bend * 0.35, y2 = b.y - uy * rb + ny * bend * 0.35;
      var cx = (a.x + b.x) / 2 + nx * bend, cy = (a.y + b.y) / 2 + ny * bend;
      lines[index].setAttribute("d", "M" + x1.toFixed(1) + "," + y1.toFixed(1) + " Q" + cx.toFixed(1) + ","
        + cy.toFixed(1) + " " + x2.toFixed(1) + "," + y2.toFixed(1));
    }
    var touching = nodes.map(function () { return []; });
    data.links.forEach(function (l, index) {
      touching[l.source].push(index); if (l.target !== l.source) { touching[l.target].push(index); }
      placeLink(index);
    });

    var groups = nodes.map(function (node) {
      var cls = "node" + (node.cycle !== null && node.cycle !== undefined ? " cycle" : "")
        + (options.focus && options.focus === node.id ? " focus" : "");
      var g = svgEl("g", { "class": cls, transform: "translate(" + node.x.toFixed(1) + "," + node.y.toFixed(1) + ")" });
      g.dataset.id = node.id;
      g.appendChild(svgEl("circle", { r: radiusOf(node).toFixed(1), fill: colorOf(node) }));
      var label = svgEl("text", { x: (radiusOf(node) + 3).toFixed(1), y: "3.5" });
      label.textContent = node.label;
      g.appendChild(label);
      var title = svgEl("title");
      title.textContent = node.title;
      g.appendChild(title);
      nodeLayer.appendChild(g);
      return g;
    });

    // Fit the drawing into the box, then pan and zoom from there.
    var minX = Infinity, minY = Infinity, maxX = -Infinity, maxY = -Infinity;
    nodes.forEach(function (n) {
      minX = Math.min(minX, n.x); minY = Math.min(minY, n.y);
      maxX = Math.max(maxX, n.x); maxY = Math.max(maxY, n.y);
    });
    if (!nodes.length) { minX = minY = 0; maxX = maxY = 1; }
    var pad = 60;
    var scale = Math.min(width / (maxX - minX + 2 * pad), height / (maxY - minY + 2 * pad), 1.6);
    var tx = width / 2 - scale * (minX + maxX) / 2, ty = height / 2 - scale * (minY + maxY) / 2;
    function apply() {
      view.setAttribute("transform", "translate(" + tx.toFixed(2) + "," + ty.toFixed(2) + ") scale(" + scale.toFixed(4) + ")");
      svg.classList.toggle("no-labels", nodes.length > 150 && scale < 1.4);
    }
    apply();

    function toGraph(evt) {           // client coordinates -> drawing coordinates
      var box = svg.getBoundingClientRect();
      var sx = (evt.clientX - box.left) * width / box.width, sy = (evt.clientY - box.top) * height / box.height;
      return { x: (sx - tx) / scale, y: (sy - ty) / scale, sx: sx, sy: sy };
    }
    svg.addEventListener("wheel", function (evt) {
      evt.preventDefault();
      var at = toGraph(evt);
      var factor = Math.exp(-evt.deltaY * 0.0015);
      scale = Math.max(0.05, Math.min(8, scale * factor));
      tx = at.sx - at.x * scale; ty = at.sy - at.y * scale;
      apply();
    }, { passive: false });

    var drag = null;
    svg.addEventListener("pointerdown", function (evt) {
      var target = evt.target.closest ? evt.target.closest("g.node") : null;
      var at = toGraph(evt);
      if (target) {
        var index = groups.indexOf(target);
        drag = { node: index, start: at, moved: 0 };
      } else {
        drag = { node: -1, start: at, tx: tx, ty: ty, moved: 0 };
        svg.classList.add("panning");
      }
      svg.setPointerCapture(evt.pointerId);
    });
    svg.addEventListener("pointermove", function (evt) {
      if (!drag) { return; }
      var at = toGraph(evt);
      drag.moved = Math.max(drag.moved, Math.abs(at.sx - drag.start.sx) + Math.abs(at.sy - drag.start.sy));
      if (drag.node >= 0) {
        var node = nodes[drag.node];
        node.x = at.x; node.y = at.y;
        groups[drag.node].setAttribute("transform", "translate(" + node.x.toFixed(1) + "," + node.y.toFixed(1) + ")");
        touching[drag.node].forEach(placeLink);
      } else {
        tx = drag.tx + (at.sx - drag.start.sx); ty = drag.ty + (at.sy - drag.start.sy);
        apply();
      }
    });
    function end(evt) {
      if (!drag) { return; }
      var clicked = drag.node >= 0 && drag.moved < 4 ? nodes[drag.node] : null;
      drag = null;
      svg.classList.remove("panning");
      if (evt.type === "pointerup" && clicked && options.onOpen) { options.onOpen(clicked); }
    }
    svg.addEventListener("pointerup", end);
    svg.addEventListener("pointercancel", end);

    svg.dataset.nodes = String(nodes.length);
    svg.dataset.links = String(data.links.length);
    svg.dataset.cycleLinks = String(data.links.filter(function (l) { return l.cycle; }).length);
    container.appendChild(svg);
    return svg;
  }

  window.CtxGraph = { draw: draw, layout: layout, colorOf: colorOf };
}());
