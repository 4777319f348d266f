/* ctx ui: every page. Data comes from the server's api/ (live) or, in an export, from the
 * data/N.js files data.js lists (CTX_STATIC). Everything the store holds is anyone's text: it
 * is only ever set with textContent and attributes, never parsed as HTML. */
(function () {
  "use strict";
  var STATIC = window.CTX_STATIC || null;
  var main = document.getElementById("main");
  var page = document.body.dataset.page;

  // ---- DOM ------------------------------------------------------------------------------
  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (value === null || value === undefined || value === false) { return; }
      if (name === "text") { node.textContent = String(value); }
      else if (name.slice(0, 2) === "on") { node.addEventListener(name.slice(2), value); }
      else { node.setAttribute(name, value === true ? "" : String(value)); }
    });
    for (var i = 2; i < arguments.length; i++) { add(node, arguments[i]); }
    return node;
  }
  function add(parent, child) {
    if (child === null || child === undefined || child === false) { return; }
    if (Array.isArray(child)) { child.forEach(function (c) { add(parent, c); }); return; }
    parent.appendChild(typeof child === "string" || typeof child === "number"
      ? document.createTextNode(String(child)) : child);
  }
  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }
  function fill(node) { clear(node); for (var i = 1; i < arguments.length; i++) { add(node, arguments[i]); } }
  function badge(kind) { return el("span", { "class": "badge " + kind, text: kind }); }
  function chip(name, value) { return el("span", { "class": "chip" }, el("b", { text: name + ": " }), String(value)); }
  function note(text) { return el("div", { "class": "note", text: text }); }
  function errorBox(err) {
    var box = el("div", { "class": "error", role: "alert" });
    box.textContent = (err.code ? "error[" + err.code + "]: " : "") + err.message + (err.hint ? " (hint: " + err.hint + ")" : "");
    return box;
  }
  function when(ms) {
    if (ms === null || ms === undefined) { return "—"; }
    var d = new Date(ms);
    return isNaN(d.getTime()) ? "—" : d.toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }
  function firstLine(text, width) {
    var line = (String(text || "").split("\n").filter(function (l) { return l.trim(); })[0] || "").trim();
    width = width || 120;
    return line.length > width ? line.slice(0, width - 1) + "…" : line;
  }
  function hashParams() {
    var out = {};
    new URLSearchParams(location.hash.slice(1)).forEach(function (v, k) { out[k] = v; });
    return out;
  }
  function setHash(params) {
    var text = new URLSearchParams(params).toString();
    if (location.hash.slice(1) !== text) { history.replaceState(null, "", "#" + text); }
  }
  function nodeHref(kind, key) {
    return "node.html#" + encodeURIComponent(kind === "node" ? key : kind + ":" + key);
  }

  // ---- data -----------------------------------------------------------------------------
  var loaded = {}, waiting = {};
  window.CTX_LOADED = function (key, value) {
    loaded[key] = value;
    (waiting[key] || []).forEach(function (resolve) { resolve(value); });
    delete waiting[key];
  };
  function requestKey(name, params) {
    var keys = Object.keys(params).sort();
    return JSON.stringify([name, keys.map(function (k) { return [k, params[k]]; })]);
  }
  function checked(body) {
    if (body && body.error) { var err = new Error(body.error.message); Object.assign(err, body.error); throw err; }
    return body;
  }
  function api(name, params) {
    var clean = {};
    Object.keys(params || {}).forEach(function (k) {
      if (params[k] !== undefined && params[k] !== null && params[k] !== "") { clean[k] = String(params[k]); }
    });
    if (!STATIC) {
      return fetch("api/" + name + "?" + new URLSearchParams(clean).toString(), { credentials: "same-origin" })
        .then(function (r) { return r.json(); }).then(checked);
    }
    var key = requestKey(name, clean);
    if (Object.prototype.hasOwnProperty.call(loaded, key)) { return Promise.resolve(loaded[key]).then(checked); }
    var file = STATIC.files[key];
    if (!file) {
      var err = new Error("this export does not hold that page; run `ctx ui` to browse it live");
      return Promise.reject(err);
    }
    return new Promise(function (resolve, reject) {
      (waiting[key] = waiting[key] || []).push(resolve);
      var script = document.createElement("script");
      script.src = file;
      script.onerror = function () { reject(new Error("cannot read " + file + " of this export")); };
      document.head.appendChild(script);
    }).then(checked);
  }

  // ---- timeline -------------------------------------------------------------------------
  var timelineLimit = 500;
  function timelinePage() {
    api("timeline", STATIC ? {} : { limit: timelineLimit }).then(function (data) {
      var types = Object.keys(data.counts).sort();
      var shown = {};
      types.forEach(function (t) { shown[t] = true; });
      var search = el("input", { type: "search", placeholder: "filter text", "aria-label": "filter text" });
      var list = el("div", { id: "timeline" });
      function render() {
        clear(list);
        var words = search.value.toLowerCase().trim();
        var day = null, count = 0;
        data.entries.forEach(function (e) {
          if (!shown[e.type]) { return; }
          if (words && (e.title + "\n" + e.text + "\n" + e.tags.join(" ")).toLowerCase().indexOf(words) < 0) { return; }
          var date = when(e.at_ms).slice(0, 10);
          if (date !== day) { day = date; list.appendChild(el("div", { "class": "day", text: date })); }
          list.appendChild(entryRow(e));
          count++;
        });
        if (!count) { list.appendChild(el("p", { "class": "muted", text: "Nothing to show." })); }
      }
      var boxes = types.map(function (t) {
        var box = el("input", { type: "checkbox", checked: true, onchange: function () { shown[t] = box.checked; render(); } });
        return el("label", {}, box, " ", badge(t), String(data.counts[t]));
      });
      search.addEventListener("input", render);
      fill(main,
        el("h1", { text: "Timeline" }),
        el("div", { "class": "meta", text: data.store }),
        data.notes.map(note),
        el("div", { "class": "filters" }, boxes, search),
        list,
        data.more && !STATIC ? el("button", { text: "Show older entries", onclick: function () {
          timelineLimit *= 4; timelinePage();
        } }) : null);
      render();
    }).catch(function (err) { fill(main, el("h1", { text: "Timeline" }), errorBox(err)); });
  }

  function entryRow(e) {
    var title;
    if (e.kind === "node") { title = el("a", { href: nodeHref("node", e.id), text: e.title || e.id }); }
    else if (e.kind === "session") { title = el("a", { href: "memory.html#" + new URLSearchParams({ session: e.id }), text: e.title }); }
    else { title = el("span", { text: e.title }); }
    var body = el("div", {}, badge(e.type), el("span", { "class": "title" }, title));
    if (e.kind === "node") {
      if (e.text && e.text.trim() !== e.title.trim()) { body.appendChild(el("p", { "class": "excerpt", text: e.text.slice(0, 400) })); }
      if (e.tags.length) { body.appendChild(el("div", {}, e.tags.map(function (t) { return el("span", { "class": "chip", text: t }); }))); }
      if (e.superseded_by) { body.appendChild(el("div", { "class": "meta" }, "superseded by ", el("a", { href: nodeHref("node", e.superseded_by), text: e.superseded_by }))); }
    } else if (e.kind === "commit") {
      body.appendChild(el("div", { "class": "meta", text: "commit " + e.id.slice(0, 12) }));
      if (e.text.trim() !== e.title.trim()) { body.appendChild(el("details", {}, el("summary", { text: "message" }), el("pre", { text: e.text }))); }
    } else {
      body.appendChild(el("div", { "class": "meta", text: e.turns + " turns · session " + e.id }));
    }
    return el("div", { "class": "entry " + e.kind + (e.superseded_by ? " superseded" : "") },
      el("div", { "class": "time", text: when(e.at_ms).slice(11, 16) }), body);
  }

  // ---- node -------------------------------------------------------------------------------
  function nodePage() {
    var ref = decodeURIComponent(location.hash.slice(1));
    if (!ref) { fill(main, el("h1", { text: "Node" }), el("p", {}, "Choose a node on the ", el("a", { href: "index.html", text: "timeline" }), " or in the ", el("a", { href: "graph.html", text: "graph" }), ".")); return; }
    fill(main, el("p", { "class": "loading", text: "Loading " + ref + "…" }));
    api("node", { ref: ref }).then(function (p) {
      fill(main, p.page === "node" ? nodeView(p) : endpointView(p));
      document.title = "ctx · " + (p.page === "node" ? firstLine(p.content, 60) : p.key);
    }).catch(function (err) { fill(main, el("h1", { text: ref }), errorBox(err)); });
  }

  function edgeTable(edges, withSource) {
    if (!edges.length) { return el("p", { "class": "muted", text: "No edges." }); }
    return el("table", {},
      el("thead", {}, el("tr", {}, el("th", { text: "" }), el("th", { text: "type" }), el("th", { text: "other end" }),
        el("th", { text: withSource ? "source" : "evidence" }))),
      el("tbody", {}, edges.map(function (e) {
        var other = e.kind === "node"
          ? el("span", {}, e.other_type ? badge(e.other_type) : null, el("a", { href: nodeHref("node", e.key), text: e.other_title || e.key }))
          : el("span", {}, badge(e.kind), el("a", { href: nodeHref(e.kind, e.key), text: e.key }));
        var last = withSource ? el("span", { "class": "meta", text: e.source })
          : el("span", {}, e.evidence.map(function (pair) {
            return chip(pair[0], pair[0] === "blob" || pair[0] === "commit" ? String(pair[1]).slice(0, 12) : pair[1]);
          }), e.weight !== null && e.weight !== undefined ? chip("weight", e.weight) : null);
        return el("tr", {}, el("td", { "class": "dir", title: e.direction === "out" ? "outgoing" : "incoming", text: e.direction === "out" ? "→" : "←" }),
          el("td", { text: e.label }), el("td", {}, other), el("td", {}, last));
      })));
  }

  function nodeView(p) {
    var stale = p.stale.length ? el("div", {}, el("h2", { text: "Stale mentions" }), p.stale.map(function (m) {
      return note("mentions " + m.kind + " " + m.key + ", which " + m.reason + (m.since_ms ? " since " + when(m.since_ms) : ""));
    })) : null;
    var versions = p.versions.map(function (v) {
      return el("div", { "class": "version" + (v.removed ? " removed" : "") },
        el("div", { "class": "meta" }, when(v.at_ms) + " · version " + v.version.slice(0, 12) + (v.type ? " · " + v.type : "")),
        v.removed ? el("div", { text: "deleted" }) : el("pre", { text: v.content === null ? "(content kept as a blob)" : v.content }),
        v.summary ? el("div", { "class": "meta", text: "summary: " + v.summary }) : null,
        v.tags.length ? el("div", {}, v.tags.map(function (t) { return el("span", { "class": "chip", text: t }); })) : null);
    });
    return [
      el("h1", {}, badge(p.type), firstLine(p.content, 100) || p.id),
      el("div", { "class": "meta" }, "id " + p.id + " · short " + p.short_id + " · created " + when(p.created_ms)
        + " · updated " + when(p.updated_ms) + " · ~" + p.tokens + " tokens · " + p.status
        + (p.author ? " · by " + p.author : ""), " · ",
        el("a", { href: "graph.html#" + new URLSearchParams({ focus: "node:" + p.id }), text: "show in graph" })),
      p.superseded_by ? note("superseded by " + p.superseded_by) : null,
      p.tags.length ? el("div", {}, p.tags.map(function (t) { return el("span", { "class": "chip", text: t }); })) : null,
      el("pre", { "class": "content", text: p.content }),
      p.summary ? el("div", {}, el("h3", { text: "Summary" }), el("p", { text: p.summary })) : null,
      p.provenance.length ? el("div", {}, el("h3", { text: "Provenance" }), el("table", { "class": "provenance" }, el("tbody", {}, p.provenance.map(function (kv) {
        return el("tr", {}, el("th", { text: kv[0] }), el("td", { text: kv[1] }));
      })))) : null,
      p.metadata.length ? el("div", {}, el("h3", { text: "Metadata" }), el("table", {}, el("tbody", {}, p.metadata.map(function (kv) {
        return el("tr", {}, el("th", { text: kv[0] }), el("td", { text: kv[1] }));
      })))) : null,
      stale,
      el("h2", { text: "Edges (" + p.edges.length + ")" }), edgeTable(p.edges, false),
      el("h2", { text: "History (" + p.versions.length + " versions, oldest first)" }), versions
    ];
  }

  function endpointView(p) {
    return [
      el("h1", {}, badge(p.kind), p.key),
      el("div", { "class": "meta" }, el("a", { href: "graph.html#" + new URLSearchParams({ focus: p.kind + ":" + p.key }), text: "show in graph" })),
      p.path.length ? el("table", {}, el("tbody", {}, p.path.map(function (kv) {
        return el("tr", {}, el("th", { text: kv[0] }), el("td", { text: kv[1] }));
      }))) : null,
      el("h2", { text: "Mentioned by (" + p.mentioned_by.length + ")" }),
      p.mentioned_by.length ? el("ul", {}, p.mentioned_by.map(function (e) {
        return el("li", {}, e.other_type ? badge(e.other_type) : null, el("a", { href: nodeHref("node", e.key), text: e.other_title || e.key }), " ", el("span", { "class": "meta", text: e.label }));
      })) : el("p", { "class": "muted", text: "No knowledge node links here." }),
      el("h2", { text: "Edges (" + p.edges.length + ")" }), edgeTable(p.edges, true)
    ];
  }

  // ---- graph ------------------------------------------------------------------------------
  function graphPage() {
    main.classList.add("wide");
    var params = hashParams();
    var level = params.level === "all" ? "all" : "files";
    var focus = params.focus || "";
    var levelBox = el("select", { "aria-label": "level" },
      el("option", { value: "files", text: "files and knowledge", selected: level === "files" }),
      el("option", { value: "all", text: "every module and item", selected: level === "all" }));
    var focusBox = el("input", { type: "search", placeholder: "focus: node id or file:path", value: focus, size: 34, "aria-label": "focus" });
    function go() { setHash(focusBox.value.trim() ? { level: levelBox.value, focus: focusBox.value.trim() } : { level: levelBox.value }); graphPage(); }
    levelBox.addEventListener("change", go);
    focusBox.addEventListener("keydown", function (evt) { if (evt.key === "Enter") { go(); } });
    var controls = el("div", { "class": "filters" }, el("label", {}, "Level ", levelBox), focusBox,
      el("button", { text: "Focus", onclick: go }),
      focus ? el("button", { text: "Whole graph", onclick: function () { focusBox.value = ""; go(); } }) : null);
    var box = el("div", { id: "graph" });
    var summary = el("div", { "class": "meta", text: "Loading…" });
    var side = el("div", {});
    fill(main, el("h1", { text: "Graph" }), controls, summary, legend(), box, side);
    var asked = STATIC ? { level: level } : { level: level, focus: focus };
    api("graph", asked).then(function (data) {
      if (STATIC && focus) { data = neighbourhood(data, focus); }
      summary.textContent = "Showing " + data.nodes.length + " of " + data.total_nodes + " nodes and "
        + data.links.length + " of " + data.total_links + " links · " + data.cycles.length
        + (data.cycles.length === 1 ? " cycle" : " cycles") + (data.scc_view ? " (SCC view " + data.scc_view.slice(0, 12) + ")" : " (SCC view computed now)")
        + ". Drag to pan, wheel to zoom, click a node to open it.";
      window.CtxGraph.draw(box, data, { focus: data.focus, onOpen: function (node) {
        location.href = nodeHref(node.kind, node.key);
      } });
      fill(side, el("h2", { text: "Cycles (" + data.cycles.length + ")" }),
        data.cycles.length ? el("ol", { "class": "cycles" }, data.cycles.map(function (members) {
          return el("li", {}, badge("cycle"), members.map(function (name, i) {
            var cut = name.indexOf(":");
            return [i ? " → " : "", el("a", { href: nodeHref(name.slice(0, cut), name.slice(cut + 1)), text: name.slice(cut + 1) })];
          }));
        })) : el("p", { "class": "muted", text: "No cycles: the graph is a DAG at this level." }));
    }).catch(function (err) { summary.textContent = ""; fill(box, errorBox(err)); });
  }

  function legend() {
    var items = [["decision", "#8250df"], ["task", "#0969da"], ["observation (note)", "#1b7c83"], ["fact", "#1a7f37"],
      ["file", "#d4a72c"], ["module", "#8c959f"], ["item", "#afb8c1"], ["in a cycle", "#cf222e"]];
    return el("div", { "class": "legend" }, items.map(function (it) {
      var span = el("span", { text: it[0] }); span.style.setProperty("--dot", it[1]); return span;
    }));
  }

  function neighbourhood(data, focus) {  // an export: the focus's nodes within two links
    var start = data.nodes.findIndex(function (n) { return n.id === focus || n.key === focus; });
    if (start < 0) { throw new Error(focus + " is not drawn in this export's graph; run `ctx ui` to focus on it"); }
    var around = data.nodes.map(function () { return []; });
    data.links.forEach(function (l) { around[l.source].push(l.target); around[l.target].push(l.source); });
    var depth = {}; depth[start] = 0; var queue = [start];
    while (queue.length) {
      var at = queue.shift();
      if (depth[at] >= 2) { continue; }
      around[at].forEach(function (o) { if (!(o in depth)) { depth[o] = depth[at] + 1; queue.push(o); } });
    }
    var keep = Object.keys(depth).map(Number).sort(function (a, b) { return a - b; });
    var index = {}; keep.forEach(function (old, i) { index[old] = i; });
    return Object.assign({}, data, { focus: data.nodes[start].id,
      nodes: keep.map(function (i) { return data.nodes[i]; }),
      links: data.links.filter(function (l) { return l.source in index && l.target in index; })
        .map(function (l) { return Object.assign({}, l, { source: index[l.source], target: index[l.target] }); }) });
  }

  // ---- pack explorer -----------------------------------------------------------------------
  function packPage() {
    var params = hashParams();
    var result = el("div", { id: "pack-result" });
    if (STATIC) {
      var choose = el("select", { "aria-label": "task" }, el("option", { value: "", text: "choose an embedded pack" }),
        STATIC.packs.map(function (t) { return el("option", { value: t, text: firstLine(t, 90), selected: t === params.task }); }));
      choose.addEventListener("change", function () { setHash({ task: choose.value }); packPage(); });
      fill(main, el("h1", { text: "Pack explorer" }),
        STATIC.packs.length ? null : note("This export holds no pack: `ctx ui --export DIR --pack TASK` embeds one; `ctx ui` builds any."),
        el("div", { "class": "filters" }, choose), result);
      if (params.task) { showPack(result, { task: params.task }); }
      return;
    }
    var task = el("textarea", { id: "task", placeholder: "Type a task: fix the retry loop in the HTTP client", "aria-label": "task" });
    task.value = params.task || "";
    var budget = el("input", { type: "number", id: "budget", min: 1, placeholder: "default", value: params.budget || "", "aria-label": "budget" });
    var depth = el("input", { type: "number", id: "depth", min: 0, max: 16, placeholder: "default", value: params.depth || "", "aria-label": "depth" });
    var narrative = el("input", { type: "checkbox", id: "narrative", checked: params.narrative !== "0" });
    var graph = el("input", { type: "checkbox", id: "graph-expand", checked: params.graph !== "0" });
    var form = el("form", { id: "pack-form" }, task,
      el("div", { "class": "form-row" }, el("label", {}, "Budget (tokens) ", budget), el("label", {}, "Depth ", depth),
        el("label", {}, narrative, " decisions, tasks and notes"), el("label", {}, graph, " import-graph expansion"),
        el("button", { type: "submit", "class": "primary", text: "Build pack" })));
    form.addEventListener("submit", function (evt) {
      evt.preventDefault();
      var asked = { task: task.value, budget: budget.value, depth: depth.value,
        narrative: narrative.checked ? "1" : "0", graph: graph.checked ? "1" : "0" };
      setHash(asked);
      showPack(result, asked);
    });
    fill(main, el("h1", { text: "Pack explorer" }),
      el("p", { "class": "muted", text: "What `ctx pack TASK` would give an agent: the items, why each was chosen, and the budget. Nothing is written." }),
      form, result);
    if (params.task) { showPack(result, { task: params.task, budget: params.budget, depth: params.depth, narrative: params.narrative, graph: params.graph }); }
  }

  function whyChips(why) {
    var out = [];
    Object.keys(why || {}).forEach(function (key) {
      var value = why[key];
      if (key === "edge_path") { out.push(chip("via", value.join(" → "))); }
      else if (Array.isArray(value)) { out.push(chip(key.replace("_", " "), value.join(", "))); }
      else if (value === true) { out.push(el("span", { "class": "chip", text: key.replace("_", " ") })); }
      else { out.push(chip(key.replace("_", " "), value)); }
    });
    return out;
  }

  function showPack(box, asked) {
    fill(box, el("p", { "class": "loading", text: "Building the pack…" }));
    api("pack", asked).then(function (view) {
      var pack = view.pack, budget = pack.token_budget;
      var used = budget.used, reserve = budget.reserved_for_response, total = Math.max(budget.total, 1);
      var bar = el("div", { "class": "budget", title: used + " used, " + reserve + " reserved, of " + budget.total });
      var usedBar = el("div", { "class": "used" }); usedBar.style.width = (100 * used / total).toFixed(2) + "%";
      var reserveBar = el("div", { "class": "reserve" }); reserveBar.style.width = (100 * reserve / total).toFixed(2) + "%";
      bar.appendChild(usedBar); bar.appendChild(reserveBar);
      var ctx = pack.graph_context;
      fill(box,
        el("h2", { text: "Budget" }),
        el("div", { id: "budget-line", text: pack.retrieved.length + " items, " + used.toLocaleString("en") + " of "
          + budget.total.toLocaleString("en") + " tokens used, " + reserve.toLocaleString("en") + " reserved for the response" }),
        bar,
        view.notes.map(note),
        el("h2", { text: "Items (" + pack.retrieved.length + ")" }),
        pack.retrieved.length ? el("table", { id: "pack-items" },
          el("thead", {}, el("tr", {}, el("th", { text: "#" }), el("th", { text: "score" }), el("th", { text: "item" }),
            el("th", { text: "tokens" }), el("th", { text: "why" }))),
          el("tbody", {}, pack.retrieved.map(function (item, i) {
            var target = item.path ? el("a", { href: nodeHref("file", item.path), text: item.title })
              : item.node_type ? el("a", { href: nodeHref("node", item.object_id), text: item.title }) : el("span", { text: item.title });
            return el("tr", {}, el("td", { "class": "num", text: i + 1 }), el("td", { "class": "num", text: Number(item.relevance_score).toFixed(3) }),
              el("td", {}, badge(item.chunk_kind), target,
                (item.stale_mentions || []).map(function (m) { return note("stale: mentions " + m.kind + " " + m.key + ", which " + m.reason); }),
                el("details", {}, el("summary", { text: "snippet" }), el("pre", { text: item.snippet }))),
              el("td", { "class": "num", text: view.costs[i] }), el("td", {}, whyChips(item.why)));
          }))) : el("p", { "class": "muted", text: "No item: nothing matched, or the budget holds none." }),
        el("h2", { text: "Graph expansion" }),
        el("div", {}, chip("depth", ctx.expansion_depth), chip("SCC view used", ctx.scc_dag_used ? "yes" : "no")),
        el("div", {}, el("h3", { text: "Seeds" }), ctx.seed_nodes.length ? ctx.seed_nodes.map(function (s) { return el("span", { "class": "chip", text: s }); }) : el("span", { "class": "muted", text: "none" })),
        el("div", {}, el("h3", { text: "Reached through the graph" }), ctx.expanded_nodes.length ? ctx.expanded_nodes.map(function (s) { return el("span", { "class": "chip", text: s }); }) : el("span", { "class": "muted", text: "none" })),
        pack.recent_narrative ? el("div", {}, el("h2", { text: "Recent narrative" }), el("pre", { text: pack.recent_narrative })) : null,
        el("h2", { text: "Ranked files (" + pack.ranked_files.length + ")" }),
        pack.ranked_files.length ? el("ol", {}, pack.ranked_files.slice(0, 30).map(function (f) {
          return el("li", {}, el("a", { href: nodeHref("file", f), text: f }));
        })) : el("p", { "class": "muted", text: "No file matched." }));
    }).catch(function (err) { fill(box, errorBox(err)); });
  }

  // ---- transcripts ---------------------------------------------------------------------------
  function memoryPage() {
    var params = hashParams();
    var results = el("div", { id: "search-results" });
    var overview = el("div", { id: "topics" }, el("p", { "class": "loading", text: "Loading…" }));
    var search = null;
    if (!STATIC) {
      var q = el("input", { type: "search", id: "memory-q", size: 40, placeholder: "why sqlite for the cache last week", value: params.q || "", "aria-label": "search" });
      var since = el("input", { type: "text", size: 12, placeholder: "since", value: params.since || "", "aria-label": "since" });
      var until = el("input", { type: "text", size: 12, placeholder: "until", value: params.until || "", "aria-label": "until" });
      var intent = el("select", { "aria-label": "intent" }, el("option", { value: "", text: "any intent" }),
        ["decision", "conclusion", "question", "problem", "solution", "todo", "context"].map(function (i) {
          return el("option", { value: i, text: i, selected: params.intent === i });
        }));
      search = el("form", { id: "memory-form", "class": "form-row" }, q, since, until, intent,
        el("button", { type: "submit", "class": "primary", text: "Search" }));
      search.addEventListener("submit", function (evt) {
        evt.preventDefault();
        var asked = { q: q.value, since: since.value, until: until.value, intent: intent.value };
        if (params.session) { asked.session = params.session; }
        setHash(Object.assign({}, params, asked));
        showHits(results, asked);
      });
    }
    fill(main, el("h1", { text: "Transcripts" }),
      search || note("Searching transcripts needs `ctx ui`; this export shows their sessions and topics."),
      results, overview);
    if (params.q && !STATIC) { showHits(results, { q: params.q, since: params.since, until: params.until, intent: params.intent, session: params.session }); }
    api("transcripts", STATIC ? {} : { session: params.session }).then(function (data) {
      var topics = data.topics.filter(function (t) { return !params.session || t.session === params.session || t.session === data.session; });
      fill(overview,
        data.note ? note(data.note) : null,
        el("h2", { text: "Sessions (" + data.sessions.length + ")" }),
        data.sessions.length ? el("table", {}, el("thead", {}, el("tr", {}, el("th", { text: "session" }), el("th", { text: "first" }),
          el("th", { text: "last" }), el("th", { text: "turns" }), el("th", { text: "first topic" }))),
        el("tbody", {}, data.sessions.map(function (s) {
          return el("tr", {}, el("td", {}, el("a", { href: "memory.html#" + new URLSearchParams({ session: s.id }), text: s.id.slice(0, 8), title: s.id })),
            el("td", { text: when(s.first_ms) }), el("td", { text: when(s.last_ms) }), el("td", { "class": "num", text: s.turns }),
            el("td", { text: firstLine(s.topic || "", 90) }));
        }))) : null,
        el("h2", { text: params.session ? "Topics of session " + params.session.slice(0, 8) : "Topics" }),
        params.session ? el("p", {}, el("a", { href: "memory.html", text: "all sessions" })) : null,
        topics.length ? topics.map(function (t) {
          return el("div", { "class": "topic" + (t.depth ? " sub" : "") }, el("span", { "class": "meta", text: when(t.start_ms) + " · " }),
            t.name, el("span", { "class": "meta", text: " (turns " + t.first_turn + "–" + t.last_turn + ", " + t.ideas + " ideas)" }));
        }) : el("p", { "class": "muted", text: "No topics." }));
    }).catch(function (err) { fill(overview, errorBox(err)); });
  }

  function showHits(box, asked) {
    fill(box, el("p", { "class": "loading", text: "Searching…" }));
    api("search", asked).then(function (found) {
      if (found.note) { fill(box, note(found.note)); return; }
      var groups = [], byTopic = {};
      found.results.forEach(function (hit) {
        var key = hit.session + "\u0000" + (hit.topic || "");
        if (!byTopic[key]) { byTopic[key] = { session: hit.session, topic: hit.topic, hits: [] }; groups.push(byTopic[key]); }
        byTopic[key].hits.push(hit);
      });
      fill(box, el("h2", { text: "Results (" + found.results.length + ")" }),
        found.results.length ? groups.map(function (g) {
          return el("div", {}, el("h3", { text: (g.topic || "(no topic)") + " · session " + g.session.slice(0, 8) }),
            g.hits.map(function (hit) {
              return el("div", { "class": "hit" },
                el("div", { "class": "meta" }, (hit.timestamp || "—") + " · score " + Number(hit.score).toFixed(2), hit.intent ? [" ", badge(hit.intent)] : null),
                el("pre", { text: hit.text }),
                hit.provenance && (hit.provenance.branch || hit.provenance.commit) ? el("div", { "class": "meta provenance", text: "from: " + (hit.provenance.branch ? "branch " + hit.provenance.branch : "detached HEAD") + (hit.provenance.commit ? " at " + hit.provenance.commit.slice(0, 8) : "") + (hit.provenance.files.length ? " · files " + hit.provenance.files.join(", ") : "") }) : null,
                hit.history.map(function (old) { return el("div", { "class": "meta", text: "earlier (" + old.timestamp + ", " + old.intent + "): " + old.text }); }),
                hit.entities.length ? el("div", {}, hit.entities.map(function (ent) {
                  return ent.code && ent.code.path ? el("a", { "class": "chip", href: nodeHref("file", ent.code.path), text: ent.type + ": " + ent.name })
                    : el("span", { "class": "chip", text: ent.type + ": " + ent.name });
                })) : null);
            }));
        }) : el("p", { "class": "muted", text: "No matching turns." }));
    }).catch(function (err) { fill(box, errorBox(err)); });
  }

  // ---- start -------------------------------------------------------------------------------
  document.querySelectorAll("nav a").forEach(function (a) { a.classList.toggle("active", a.dataset.nav === page || (page === "node" && false)); });
  document.getElementById("mode").textContent = STATIC ? "static export (read-only)" : "live · read-only";
  var pages = { timeline: timelinePage, node: nodePage, graph: graphPage, pack: packPage, memory: memoryPage };
  window.addEventListener("hashchange", function () { if (page === "node") { nodePage(); } });
  pages[page]();
}());
