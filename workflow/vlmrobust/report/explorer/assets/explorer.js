/* The explorer: the browser app of results/explorer/ (issue 48; docs/explorer.md).
 *
 * Opens from the file system (file://): no server, no network, no library. Every data
 * file is a script `EXPLORER.put(key, payload)` loaded on demand by inserting a
 * <script src> element (fetch and XHR do not work on file://): index.js, then per cell
 * rows.js (+ rows<r>.js when the cell's row_parts > 1) and text<k>.js, per (dataset,
 * condition) the variants part<k>.js, per (dataset, condition, prompt) the agreement
 * file. Paths are relative to index.html; a part is chunkOf(key, parts) = FNV-1a 32-bit
 * of the key's UTF-8 bytes mod parts (data.py key_chunk).
 *
 * State lives in the URL fragment (URLSearchParams), so back/forward and links work:
 *   cell facets   study, model, pair, dataset, condition, prompt   (comma lists; none = all)
 *   unit facets   flip (absent = lost,gained; empty = all), method, severity, agree
 *   listing       open=<cell id> (one cell's units), units=1 (the units of every matching
 *                 cell), sort=file|agree-desc|agree-asc, filter.<param>=<value>,
 *                 errors=exclude|include
 *   sample view   sample=<key>, at=<dataset>/<condition>/<prompt>, smodel=<model>
 *   table cell    cell=1&table=&metric=&model=&bench=&condition=&shown= (+ filter.*, errors):
 *                 "table: <shown> · from these rows: <computed>", the metric recomputed
 *                 here from the rows with the definitions of vlmrobust.metrics.core:
 *                 accuracy (mean_score) per cell, a dataset's prompts averaged, then the
 *                 datasets (macro); rr = perturbed / clean, drop_pp = clean - perturbed;
 *                 failed requests (error) left out unless errors=include; filter.<param>
 *                 keeps the rows whose variant params match (Idis: clean = kind none,
 *                 n 0; semantics=all pools); a scope dataset with correct_from
 *                 "mathverse" (or the fragment's correct_from=mathverse) takes correctness
 *                 from the MathVerse judge's verdict, rows without one left out.
 */
(function () {
  "use strict";

  // ------------------------------------------------------------------ constants

  var PAGE = 200; // rows per page of the cells table and the units list
  var DASH = "\u2013";
  var FLIPS = ["lost", "gained", "right", "wrong", "unpaired", "failed", "clean"];
  var DEFAULT_FLIPS = ["lost", "gained"];
  var FLIP_LABEL = {
    lost: "lost (right \u2192 wrong)",
    gained: "gained (wrong \u2192 right)",
    right: "right \u2192 right",
    wrong: "wrong \u2192 wrong",
    unpaired: "unpaired (no clean row)",
    failed: "failed request (no answer)",
    clean: "clean condition rows",
  };
  var CELL_FACETS = ["study", "model", "pair", "dataset", "condition", "prompt"];
  var UNIT_FACETS = ["flip", "method", "severity", "agree"];
  var FACET_LABEL = {
    study: "Study",
    model: "Model",
    pair: "Base \u2194 reasoning pair",
    dataset: "Benchmark",
    condition: "Condition",
    prompt: "Prompt",
    flip: "Flip direction",
    method: "Method",
    severity: "Severity",
    agree: "Models that flipped the unit",
  };
  var MAX_LIST_CELLS = 80; // "list the units of these cells" up to this many cells
  var MAX_LIST_ROWS = 300000; // ... and this many rows in all
  // Idis: the clean condition is kind "none" with 0 distractors (metrics/idis.py).
  var CLEAN_PARAM_DEFAULTS = { kind: "none", n: "0" };

  // ------------------------------------------------------------------ data files

  var store = new Map(); // key -> payload, oldest first (a Map keeps insertion order)
  var pending = new Map();
  // At most this many payloads of a kind stay in memory (a long session opens many cells);
  // an evicted one is loaded again when needed.
  var KEEP = { rows: 48, text: 32, variants: 96, agree: 32 };

  function remember(key, payload) {
    store.delete(key);
    store.set(key, payload);
    var kind = key.slice(0, key.indexOf("/"));
    var cap = KEEP[kind];
    if (!cap) return;
    var same = [];
    store.forEach(function (_, k) { if (k.slice(0, k.indexOf("/")) === kind) same.push(k); });
    for (var i = 0; i < same.length - cap; i++) store.delete(same[i]);
  }

  window.EXPLORER = Object.freeze({
    put: function (key, payload) {
      remember(String(key), payload);
    },
  });

  /** The payload of `key`, loading the script `src` (relative to index.html) once. */
  function load(key, src) {
    if (store.has(key)) {
      var hit = store.get(key);
      remember(key, hit); // most recently used
      return Promise.resolve(hit);
    }
    var p = pending.get(key);
    if (p) return p;
    p = new Promise(function (resolve, reject) {
      var s = document.createElement("script");
      s.src = src;
      s.async = true;
      s.onload = function () {
        s.remove();
        pending.delete(key);
        if (store.has(key)) resolve(store.get(key));
        else reject(new Error(src + " did not define " + key));
      };
      s.onerror = function () {
        s.remove();
        pending.delete(key);
        reject(new Error("cannot load " + src + " (file missing?)"));
      };
      document.head.appendChild(s);
    });
    pending.set(key, p);
    return p;
  }

  var encoder = new TextEncoder();

  /** FNV-1a 32-bit of the UTF-8 bytes of `text` (data.py key_chunk computes the same). */
  function fnv1a(text) {
    var bytes = encoder.encode(String(text));
    var h = 0x811c9dc5;
    for (var i = 0; i < bytes.length; i++) {
      h ^= bytes[i];
      h = Math.imul(h, 0x01000193);
    }
    return h >>> 0;
  }

  /** The part (0..n-1) a key lives in. */
  function chunkOf(key, n) {
    n = Number(n) || 1;
    return n <= 1 ? 0 : fnv1a(key) % n;
  }

  /** A relative path with each segment URL-encoded (names may hold "#", "?" or "%"). */
  function relUrl(path) {
    return String(path)
      .split("/")
      .map(function (s) {
        return s === ".." || s === "." ? s : encodeURIComponent(s);
      })
      .join("/");
  }

  function isRelative(path) {
    return typeof path === "string" && path !== "" && !/^[a-z][a-z0-9+.-]*:/i.test(path) && path[0] !== "/";
  }

  function cellDir(c) {
    return relUrl(["cells", c.model, c.dataset, c.condition, c.prompt].join("/"));
  }

  /** A cell's rows payload, with `ci` (column -> index) and `byKey` (key -> row index).
   * A cell too large for one file continues in rows<r>.js (r = 1 .. row_parts - 1, key
   * "rows/<model>/<dataset>/<condition>/<prompt>/<r>"): their rows are appended in order. */
  function loadRows(c) {
    var key = "rows/" + c.model + "/" + c.dataset + "/" + c.condition + "/" + c.prompt;
    return load(key, cellDir(c) + "/rows.js").then(function (payload) {
      if (!payload.ready) payload.ready = completeRows(c, key, payload);
      return payload.ready;
    });
  }

  function completeRows(c, key, payload) {
    var parts = Number(payload.row_parts) || 1;
    var loads = [];
    for (var r = 1; r < parts; r++) loads.push(load(key + "/" + r, cellDir(c) + "/rows" + r + ".js"));
    return Promise.all(loads).then(function (more) {
      var rows = payload.rows || (payload.rows = []);
      more.forEach(function (part, i) {
        var extra = part.rows || [];
        for (var j = 0; j < extra.length; j++) rows.push(extra[j]);
        store.delete(key + "/" + (i + 1)); // merged into the cell's payload
      });
      var ci = {};
      (payload.columns || []).forEach(function (name, i) {
        ci[name] = i;
      });
      payload.ci = ci;
      var byKey = new Map();
      var k = ci.key;
      for (var i = 0; i < rows.length; i++) byKey.set(String(rows[i][k]), i);
      payload.byKey = byKey;
      return payload;
    }, function (e) {
      payload.ready = null; // try again next time
      throw e;
    });
  }

  function loadText(c, rowKey, chunks) {
    var k = chunkOf(rowKey, chunks);
    var key = "text/" + c.model + "/" + c.dataset + "/" + c.condition + "/" + c.prompt + "/" + k;
    return load(key, cellDir(c) + "/text" + k + ".js");
  }

  function variantsInfo(d, c) {
    return (INDEX.variants || {})[d + "/" + c] || null;
  }

  function loadVariantPart(d, c, k) {
    return load("variants/" + d + "/" + c + "/" + k, relUrl("variants/" + d + "/" + c + "/part" + k + ".js"));
  }

  /** One variant (null when the (dataset, condition) has no variants folder or lacks it). */
  function getVariant(d, c, vid) {
    var info = variantsInfo(d, c);
    if (!info || vid === null || vid === undefined) return Promise.resolve(null);
    return loadVariantPart(d, c, chunkOf(vid, info.parts)).then(function (p) {
      return (p.variants || {})[vid] || null;
    });
  }

  /** Every variant of a (dataset, condition): all its parts, merged into one map. */
  var allVariantsCache = new Map();
  function allVariants(d, c) {
    var id = d + "/" + c;
    if (allVariantsCache.has(id)) return allVariantsCache.get(id);
    if (allVariantsCache.size >= 16) allVariantsCache.delete(allVariantsCache.keys().next().value);
    var info = variantsInfo(d, c);
    var p;
    if (!info) p = Promise.resolve(null);
    else {
      var loads = [];
      for (var k = 0; k < (info.parts || 1); k++) loads.push(loadVariantPart(d, c, k));
      p = Promise.all(loads).then(function (parts) {
        var all = Object.create(null);
        parts.forEach(function (part) {
          var vs = part.variants || {};
          for (var vid in vs) all[vid] = vs[vid];
        });
        return all;
      });
    }
    allVariantsCache.set(id, p);
    return p;
  }

  var agreeSet = null;
  function loadAgree(d, c, p) {
    var id = d + "/" + c + "/" + p;
    if (!agreeSet) agreeSet = new Set(INDEX.agree || []);
    if (!agreeSet.has(id)) return Promise.resolve(null);
    return load("agree/" + id, relUrl("agree/" + id + ".js"));
  }

  // ------------------------------------------------------------------ small helpers

  var SVG_NS = (function () {
    var d = document.createElement("div");
    d.innerHTML = "<svg></svg>"; // the parser gives the SVG namespace (no URL in this file)
    return d.firstChild.namespaceURI;
  })();

  /** An element: h("td", {class: "n", "data-x": 1}, child, "text", ...). Text is text. */
  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      for (var name in attrs) {
        var v = attrs[name];
        if (v === null || v === undefined || v === false) continue;
        if (name === "text") el.textContent = String(v);
        else if (name === "class") el.className = v;
        else el.setAttribute(name, v === true ? "" : String(v));
      }
    }
    for (var i = 2; i < arguments.length; i++) append(el, arguments[i]);
    return el;
  }

  function append(el, kid) {
    if (kid === null || kid === undefined || kid === false) return;
    if (Array.isArray(kid)) kid.forEach(function (k) { append(el, k); });
    else el.append(kid instanceof Node ? kid : String(kid));
  }

  function svg(tag, attrs) {
    var el = document.createElementNS(SVG_NS, tag);
    for (var name in attrs || {}) el.setAttribute(name, String(attrs[name]));
    return el;
  }

  function $(sel) {
    return document.querySelector(sel);
  }

  function clear(el) {
    while (el.firstChild) el.removeChild(el.firstChild);
    return el;
  }

  function cssEscape(v) {
    return window.CSS && CSS.escape ? CSS.escape(v) : String(v).replace(/["\\]/g, "\\$&");
  }

  function splitList(v) {
    if (v === null || v === undefined) return null;
    return String(v)
      .split(",")
      .map(function (s) { return s.trim(); })
      .filter(function (s) { return s !== ""; });
  }

  function setStatus(text, isError) {
    var el = $("#status");
    el.textContent = text || "";
    el.classList.toggle("error", !!isError);
  }

  function reportError(err) {
    var msg = err && err.message ? err.message : String(err);
    setStatus(msg, true);
    if (window.console) console.error(err);
  }

  function clip(text, n) {
    text = text === null || text === undefined ? "" : String(text);
    return text.length > n ? text.slice(0, n - 1) + "\u2026" : text;
  }

  /** Python's str() of a manifest value (metrics/idis.py text_value). */
  function paramText(v) {
    if (v === null || v === undefined) return "";
    if (typeof v === "boolean") return v ? "True" : "False";
    if (typeof v === "object") return JSON.stringify(v);
    return String(v);
  }

  // ------------------------------------------------------------------ number format

  /** Round half away from zero with a tiny relative nudge (report/tables/render.py). */
  function roundHalfAway(x, digits) {
    var scale = Math.pow(10, digits);
    var v = Math.floor(Math.abs(x) * scale * (1 + 1e-12) + 0.5) / scale;
    return x < 0 || Object.is(x, -0) ? -v : v;
  }

  function fmtFixed(v, digits) {
    // Python's f"{v:.1f}" keeps the sign of -0.0
    var s = Math.abs(v).toFixed(digits);
    return (v < 0 || Object.is(v, -0) ? "-" : "") + s;
  }

  /** A fraction as a percentage with one decimal: 0.4665 -> "46.7"; undefined -> "–". */
  function fmtPct(v) {
    if (v === null || v === undefined || !isFinite(v)) return DASH;
    return fmtFixed(roundHalfAway(v * 100, 1), 1);
  }

  /** A fractional difference as signed percentage points: 0.058 -> "+5.8". */
  function fmtSignedPct(v) {
    if (v === null || v === undefined || !isFinite(v)) return DASH;
    var x = roundHalfAway(v * 100, 1);
    if (x === 0) x = 0;
    return (x >= 0 ? "+" : "-") + Math.abs(x).toFixed(1);
  }

  function fmtCount(n) {
    return n === null || n === undefined ? DASH : String(n);
  }

  // ------------------------------------------------------------------ index

  var INDEX = null;
  var CELLS = []; // INDEX.cells with .vals (facet values)
  var CELL_BY_ID = new Map();
  var PAIRS = []; // [{id, base, reasoning}]
  var PAIRS_OF = Object.create(null); // model -> [pair id]
  var STUDY_BY_FOLDER = new Map();

  function prepareIndex(index) {
    INDEX = index;
    if (index.version !== 1) setStatus("index.js version " + index.version + " (the app knows version 1)", true);
    INDEX.models = INDEX.models || {};
    INDEX.model_order = INDEX.model_order || Object.keys(INDEX.models);
    INDEX.datasets = INDEX.datasets || {};
    INDEX.conditions = INDEX.conditions || {};
    INDEX.studies = INDEX.studies || [];
    INDEX.clean = INDEX.clean || "clean";
    INDEX.studies.forEach(function (s) {
      STUDY_BY_FOLDER.set(s.folder, s);
    });
    var present = new Set(INDEX.model_order);
    INDEX.model_order.forEach(function (m) {
      var info = INDEX.models[m] || {};
      if (info.role === "reasoning" && info.base && present.has(info.base)) {
        var id = info.base + "~" + m;
        PAIRS.push({ id: id, base: info.base, reasoning: m });
        (PAIRS_OF[m] = PAIRS_OF[m] || []).push(id);
        (PAIRS_OF[info.base] = PAIRS_OF[info.base] || []).push(id);
      }
    });
    CELLS = INDEX.cells || [];
    CELLS.forEach(function (c) {
      c.vals = {
        study: c.studies || [],
        model: [c.model],
        pair: PAIRS_OF[c.model] || [],
        dataset: [c.dataset],
        condition: [c.condition],
        prompt: [c.prompt],
      };
      CELL_BY_ID.set(c.id, c);
    });
  }

  function modelName(m) {
    var info = INDEX.models[m];
    return info && info.name ? info.name : m;
  }

  function datasetName(d) {
    var info = INDEX.datasets[d];
    return info && info.display ? info.display : d;
  }

  function isClean(c) {
    return c === INDEX.clean;
  }

  function optionOrder(facet) {
    switch (facet) {
      case "study":
        return INDEX.studies.map(function (s) { return s.folder; });
      case "model":
        return INDEX.model_order.slice();
      case "pair":
        return PAIRS.map(function (p) { return p.id; });
      case "dataset":
        return (INDEX.dataset_order || Object.keys(INDEX.datasets)).slice();
      case "condition":
        return (INDEX.condition_order || Object.keys(INDEX.conditions)).slice();
      case "flip":
        return FLIPS.slice();
      default:
        return [];
    }
  }

  function optionLabel(facet, v) {
    switch (facet) {
      case "study": {
        var s = STUDY_BY_FOLDER.get(v);
        return s && s.title ? s.title : v;
      }
      case "model":
        return modelName(v);
      case "pair": {
        var parts = v.split("~");
        return modelName(parts[0]) + " \u2194 " + modelName(parts[1]);
      }
      case "dataset":
        return datasetName(v);
      case "condition": {
        var info = INDEX.conditions[v];
        return info && info.perturbation && info.perturbation !== v ? v + " (" + info.perturbation + ")" : v;
      }
      case "flip":
        return FLIP_LABEL[v] || v;
      case "agree":
        if (v === "?") return "unknown (no agreement file)";
        if (v === "n/a") return "not applicable (clean rows)";
        return v === "1" ? "1 model" : v + " models";
      case "method":
      case "severity":
        return v === "" ? "none" : v;
      default:
        return v;
    }
  }

  // ------------------------------------------------------------------ URL state

  function readState() {
    var q = new URLSearchParams(location.hash.replace(/^#/, ""));
    var st = { q: q, sel: {} };
    CELL_FACETS.concat(UNIT_FACETS).forEach(function (f) {
      var list = q.has(f) ? splitList(q.get(f)) : null;
      if (f === "flip" && list === null) list = DEFAULT_FLIPS.slice();
      st.sel[f] = list && list.length ? new Set(list) : null;
    });
    st.paramFilters = [];
    q.forEach(function (value, key) {
      if (key.indexOf("filter.") === 0) st.paramFilters.push([key.slice(7), value]);
    });
    st.excludeErrors = q.get("errors") !== "include";
    st.sort = q.get("sort") || "file";
    st.open = q.get("open");
    st.units = q.get("units") === "1";
    st.sample = q.get("sample");
    st.at = q.get("at");
    st.smodel = q.get("smodel");
    st.cell = q.get("cell") === "1";
    return st;
  }

  /** Change the fragment (null deletes a parameter); push a history entry unless `replace`. */
  function navigate(changes, replace) {
    var q = new URLSearchParams(location.hash.replace(/^#/, ""));
    Object.keys(changes).forEach(function (k) {
      var v = changes[k];
      if (v === null || v === undefined) q.delete(k);
      else q.set(k, Array.isArray(v) ? v.join(",") : String(v));
    });
    var hash = "#" + q.toString();
    if (hash === location.hash || (hash === "#" && location.hash === "")) return;
    if (replace) {
      history.replaceState(null, "", hash);
      route();
    } else {
      location.hash = hash; // hashchange -> route()
    }
  }

  // ------------------------------------------------------------------ faceting

  /** One pass over `items`: the items passing every facet, and per facet the counts of its
   * values among the items passing every OTHER facet (weighted by `weightOf`). */
  function facetPass(items, facets, valuesOf, weightOf, sel) {
    var counts = {};
    facets.forEach(function (f) { counts[f] = new Map(); });
    var matched = [];
    var active = facets.filter(function (f) { return sel[f]; });
    for (var i = 0; i < items.length; i++) {
      var it = items[i];
      var vals = valuesOf(it);
      var fails = 0;
      var failed = null;
      for (var j = 0; j < active.length; j++) {
        var f = active[j];
        var s = sel[f];
        var vs = vals[f];
        var ok = false;
        for (var k = 0; k < vs.length; k++) if (s.has(vs[k])) { ok = true; break; }
        if (!ok) {
          fails++;
          failed = f;
          if (fails > 1) break;
        }
      }
      if (fails > 1) continue;
      var w = weightOf(it);
      if (fails === 0) {
        matched.push(it);
        for (var a = 0; a < facets.length; a++) addCounts(counts[facets[a]], vals[facets[a]], w);
      } else addCounts(counts[failed], vals[failed], w);
    }
    return { matched: matched, counts: counts };
  }

  function addCounts(map, values, w) {
    for (var i = 0; i < values.length; i++) map.set(values[i], (map.get(values[i]) || 0) + w);
  }

  /** The units of a cell in the chosen flip directions (all when none is chosen). */
  function flipWeight(c, flipSel) {
    if (isClean(c.condition)) return !flipSel || flipSel.has("clean") ? c.n || 0 : 0;
    if (!flipSel) return c.n || 0;
    var counts = c.counts || {};
    var w = 0;
    flipSel.forEach(function (f) { w += counts[f] || 0; });
    return w;
  }

  function renderFacet(container, facet, counts, sel, order, note) {
    var values = order.slice();
    var seen = new Set(values);
    counts.forEach(function (_, v) {
      if (!seen.has(v)) { values.push(v); seen.add(v); }
    });
    if (sel) sel.forEach(function (v) { if (!seen.has(v)) { values.push(v); seen.add(v); } });
    var box = h("fieldset", { class: "filter", "data-facet": facet }, h("legend", { text: FACET_LABEL[facet] }));
    if (note) box.append(h("p", { class: "note", text: note }));
    values.forEach(function (v) {
      var n = counts.get(v) || 0;
      var on = !!(sel && sel.has(v));
      box.append(
        h("button", {
          type: "button",
          class: "opt" + (n ? "" : " zero"),
          "data-value": v,
          "aria-pressed": on ? "true" : "false",
        }, h("span", { class: "label", text: optionLabel(facet, v) }), " ", h("span", { class: "count", text: String(n) }))
      );
    });
    box.append(h("button", { type: "button", class: "clear", "data-clear": facet, disabled: !sel }, "all"));
    container.append(box);
  }

  function sortOptions(values, numeric) {
    return values.sort(function (a, b) {
      if (numeric) {
        var x = parseFloat(String(a).replace(/^[^0-9.-]*/, ""));
        var y = parseFloat(String(b).replace(/^[^0-9.-]*/, ""));
        if (isFinite(x) && isFinite(y) && x !== y) return x - y;
      }
      return String(a) < String(b) ? -1 : String(a) > String(b) ? 1 : 0;
    });
  }

  // ------------------------------------------------------------------ filters + cells

  var cellView = { sig: null, matched: [], shown: 0 };

  function cellFacetSig(st) {
    return CELL_FACETS.concat(["flip"]).map(function (f) {
      return f + "=" + (st.sel[f] ? Array.from(st.sel[f]).join(",") : "*");
    }).join("&");
  }

  function renderCells(st) {
    var sig = cellFacetSig(st) + "|" + (st.open || "");
    var pass = facetPass(CELLS, CELL_FACETS, function (c) { return c.vals; }, function (c) {
      return flipWeight(c, st.sel.flip);
    }, st.sel);
    cellView.counts = pass.counts;
    var cellFilters = $("#filters-cells");
    clear(cellFilters);
    var prompts = sortOptions(Array.from(new Set(CELLS.map(function (c) { return c.prompt; }))));
    CELL_FACETS.forEach(function (f) {
      if (f === "pair" && !PAIRS.length) return;
      renderFacet(cellFilters, f, pass.counts[f], st.sel[f], f === "prompt" ? prompts : optionOrder(f));
    });
    if (sig === cellView.sig) return pass.matched;
    cellView.sig = sig;
    cellView.matched = pass.matched;
    cellView.shown = 0;
    var sums = { n: 0, lost: 0, gained: 0 };
    pass.matched.forEach(function (c) {
      sums.n += c.n || 0;
      sums.lost += (c.counts || {}).lost || 0;
      sums.gained += (c.counts || {}).gained || 0;
    });
    var listable = pass.matched.length > 0 && pass.matched.length <= MAX_LIST_CELLS && sums.n <= MAX_LIST_ROWS;
    var summary = clear($("#cells-summary"));
    summary.append(
      h("span", { text: pass.matched.length + " cells \u00b7 " + sums.n + " rows \u00b7 " + sums.lost + " lost \u00b7 " + sums.gained + " gained " }),
      h("button", {
        type: "button",
        id: "list-units",
        disabled: !listable,
        title: listable ? null : "narrow the filters (at most " + MAX_LIST_CELLS + " cells, " + MAX_LIST_ROWS + " rows)",
      }, "list the units of these " + pass.matched.length + " cells")
    );
    clear($("#cells tbody"));
    moreCells();
    return pass.matched;
  }

  function moreCells() {
    var tbody = $("#cells tbody");
    var frag = document.createDocumentFragment();
    var end = Math.min(cellView.matched.length, cellView.shown + PAGE);
    var open = readState().open;
    for (var i = cellView.shown; i < end; i++) {
      var c = cellView.matched[i];
      var counts = c.counts || {};
      var clean = isClean(c.condition);
      var tr = h("tr", { "data-cell": c.id, class: c.id === open ? "open" : null },
        h("td", { text: modelName(c.model) }),
        h("td", { text: datasetName(c.dataset) }),
        h("td", { text: c.condition }),
        h("td", { text: c.prompt }),
        h("td", { class: "num", text: fmtCount(c.n) }),
        h("td", { class: "num lost", text: clean ? DASH : fmtCount(counts.lost || 0) }),
        h("td", { class: "num gained", text: clean ? DASH : fmtCount(counts.gained || 0) }),
        h("td", { class: "num", text: clean ? DASH : fmtCount(counts.right || 0) }),
        h("td", { class: "num", text: clean ? DASH : fmtCount(counts.wrong || 0) }),
        h("td", { class: "num", text: clean ? DASH : fmtCount(counts.unpaired || 0) }),
        // failed requests are no answer: left out, as the metrics do
        h("td", { class: "num", text: c.n > (c.errors || 0) ? fmtPct((c.correct || 0) / (c.n - (c.errors || 0))) : DASH }),
        h("td", { class: "num", text: fmtCount(c.errors || 0) }),
        h("td", null, h("button", { type: "button", class: "open-cell", "data-open-cell": c.id, "aria-label": "units of " + c.id }, "units"))
      );
      frag.append(tr);
    }
    tbody.append(frag);
    cellView.shown = end;
    var more = $("#cells-more");
    more.hidden = end >= cellView.matched.length;
    more.textContent = "more (" + (cellView.matched.length - end) + " left)";
  }

  // ------------------------------------------------------------------ units

  var unitCache = { sig: null, promise: null };
  var view = { sig: null, units: [], shown: 0, sel: -1, cells: [] };

  function chosenCells(st, matched) {
    if (st.open) {
      var c = CELL_BY_ID.get(st.open);
      return c ? [c] : [];
    }
    if (st.units || matched.length === 1) {
      if (matched.length > MAX_LIST_CELLS) return null;
      return matched;
    }
    return [];
  }

  /** Every unit (row) of the cells, with its variant's facets and its agreement. */
  function buildUnits(cells) {
    var sig = cells.map(function (c) { return c.id; }).join("|");
    if (unitCache.sig === sig) return unitCache.promise;
    var problems = [];
    var note = function (e) { problems.push(e && e.message ? e.message : String(e)); return null; };
    var vkeys = [];
    var tkeys = [];
    cells.forEach(function (c) {
      var vk = c.dataset + "/" + c.condition;
      if (vkeys.indexOf(vk) < 0) vkeys.push(vk);
      var tk = c.dataset + "/" + c.condition + "/" + c.prompt;
      if (tkeys.indexOf(tk) < 0) tkeys.push(tk);
    });
    var rowsP = Promise.all(cells.map(function (c) { return loadRows(c).catch(note); }));
    var varsP = Promise.all(vkeys.map(function (vk) {
      var i = vk.indexOf("/");
      return allVariants(vk.slice(0, i), vk.slice(i + 1)).catch(note);
    }));
    var agreeP = Promise.all(tkeys.map(function (tk) {
      var p = tk.split("/");
      return loadAgree(p[0], p[1], p.slice(2).join("/")).catch(note);
    }));
    var promise = Promise.all([rowsP, varsP, agreeP]).then(function (res) {
      var rowsList = res[0];
      var vars = {};
      vkeys.forEach(function (vk, i) { vars[vk] = res[1][i]; });
      var agrees = {};
      tkeys.forEach(function (tk, i) { agrees[tk] = res[2][i]; });
      var units = [];
      cells.forEach(function (c, ci) {
        var payload = rowsList[ci];
        if (!payload) return;
        var col = payload.ci;
        var vs = vars[c.dataset + "/" + c.condition];
        var ag = agrees[c.dataset + "/" + c.condition + "/" + c.prompt];
        var agFlips = ag ? ag.flips || {} : null;
        var clean = isClean(c.condition);
        var rows = payload.rows || [];
        for (var i = 0; i < rows.length; i++) {
          var r = rows[i];
          var key = String(r[col.key]);
          var vid = r[col.variant_id];
          var V = vs ? vs[vid] || null : null;
          var flip = clean ? "clean" : r[col.flip] || "unpaired";
          var agree = null;
          var lostBy = null;
          var gainedBy = null;
          if (agFlips) {
            var a = agFlips[key];
            lostBy = a ? a.lost || [] : [];
            gainedBy = a ? a.gained || [] : [];
            agree = lostBy.length + gainedBy.length;
          }
          var method = V && V.method !== null && V.method !== undefined ? String(V.method) : "";
          var severity = V && V.severity !== null && V.severity !== undefined ? String(V.severity) : "";
          units.push({
            cell: c,
            payload: payload,
            i: i,
            key: key,
            vid: vid,
            V: V,
            error: col.error !== undefined ? r[col.error] : null,
            agree: agree,
            agreeOf: ag ? (ag.models || []).length : null,
            lostBy: lostBy,
            gainedBy: gainedBy,
            vals: {
              flip: [flip],
              method: [method],
              severity: [severity],
              agree: [clean ? "n/a" : agree === null ? "?" : String(agree)],
            },
          });
        }
      });
      return { units: units, problems: problems, variants: vars };
    });
    unitCache = { sig: sig, promise: promise };
    return promise;
  }

  function paramMatch(u, filters) {
    if (!filters.length) return true;
    var params = (u.V && u.V.params) || {};
    var clean = isClean(u.cell.condition);
    for (var i = 0; i < filters.length; i++) {
      var name = filters[i][0];
      var want = filters[i][1];
      var have = paramText(params[name]);
      if (have === "" && clean && CLEAN_PARAM_DEFAULTS[name] !== undefined) have = CLEAN_PARAM_DEFAULTS[name];
      if (want === "all" && name === "semantics") continue; // Idis pools semantics as "all"
      if (have !== want) return false;
    }
    return true;
  }

  var unitGen = 0;

  function renderUnits(st, matched) {
    var cells = chosenCells(st, matched);
    var section = $("#units-section");
    var unitFilters = $("#filters-units");
    if (cells === null || cells.length === 0) {
      section.hidden = true;
      view = { sig: null, units: [], shown: 0, sel: -1, cells: [] };
      clear(unitFilters);
      // the flip facet counts from the matching cells
      var counts = new Map();
      matched.forEach(function (c) {
        if (isClean(c.condition)) addCounts(counts, ["clean"], c.n || 0);
        else FLIPS.forEach(function (f) { if ((c.counts || {})[f]) addCounts(counts, [f], c.counts[f]); });
      });
      renderFacet(unitFilters, "flip", counts, st.sel.flip, FLIPS);
      unitFilters.append(h("p", { class: "note", text: cells === null
        ? "Too many cells match: narrow the filters to list units."
        : "Open a cell (its \u201cunits\u201d button) or list the units of the matching cells to filter by method, severity and agreement." }));
      return Promise.resolve();
    }
    section.hidden = false;
    var sig = cells.map(function (c) { return c.id; }).join("|") + "#" +
      UNIT_FACETS.map(function (f) { return st.sel[f] ? Array.from(st.sel[f]).join(",") : "*"; }).join("&") +
      "#" + st.sort + "#" + JSON.stringify(st.paramFilters) + "#" + (st.q.get("errors") || "");
    if (sig === view.sig) {
      selectFromState(st);
      return Promise.resolve();
    }
    var gen = ++unitGen;
    var t0 = performance.now();
    $("#units-summary").textContent = "loading " + cells.length + " cell(s)\u2026";
    return buildUnits(cells).then(function (built) {
      if (gen !== unitGen) return;
      var errorsOut = st.q.get("errors") === "exclude";
      var pre = built.units;
      if (st.paramFilters.length || errorsOut) {
        pre = pre.filter(function (u) {
          return paramMatch(u, st.paramFilters) && !(errorsOut && u.error);
        });
      }
      var pass = facetPass(pre, UNIT_FACETS, function (u) { return u.vals; }, function () { return 1; }, st.sel);
      var units = pass.matched;
      if (st.sort === "agree-desc" || st.sort === "agree-asc") {
        var sign = st.sort === "agree-desc" ? -1 : 1;
        units = units.map(function (u, i) { return [u, i]; });
        units.sort(function (a, b) {
          var x = a[0].agree === null ? -1 : a[0].agree;
          var y = b[0].agree === null ? -1 : b[0].agree;
          return x !== y ? sign * (x - y) : a[1] - b[1];
        });
        units = units.map(function (p) { return p[0]; });
      }
      view = { sig: sig, units: units, shown: 0, sel: -1, cells: cells };
      clear(unitFilters);
      UNIT_FACETS.forEach(function (f) {
        var order = f === "flip" ? FLIPS : sortOptions(Array.from(pass.counts[f].keys()), f !== "method");
        if (f === "agree") {
          var rank = function (v) { return isFinite(+v) ? +v : v === "?" ? 1e9 : 2e9; };
          order = order.sort(function (a, b) { return rank(a) - rank(b); });
        }
        renderFacet(unitFilters, f, pass.counts[f], st.sel[f], order);
      });
      var summary = clear($("#units-summary"));
      var what = cells.length === 1 ? cells[0].id : cells.length + " cells";
      summary.append(h("span", { text: units.length + " of " + built.units.length + " units \u00b7 " + what }));
      if (st.paramFilters.length) {
        summary.append(h("span", { class: "chips" }, st.paramFilters.map(function (pf) {
          return h("span", { class: "chip", "data-param": pf[0], text: pf[0] + " = " + pf[1] });
        })));
      }
      if (built.problems.length) summary.append(h("p", { class: "error", text: built.problems.join("; ") }));
      $("#sort").value = st.sort;
      clear($("#units"));
      moreUnits();
      $("#units").setAttribute("data-ms", String(Math.round(performance.now() - t0)));
      selectFromState(st);
    });
  }

  function unitTriple(u) {
    return u.cell.dataset + "/" + u.cell.condition + "/" + u.cell.prompt;
  }

  function moreUnits(upTo) {
    var list = $("#units");
    var frag = document.createDocumentFragment();
    var end = Math.min(view.units.length, Math.max(view.shown + PAGE, upTo === undefined ? 0 : upTo + 1));
    for (var i = view.shown; i < end; i++) frag.append(unitItem(view.units[i], i));
    list.append(frag);
    view.shown = end;
    var more = $("#units-more");
    more.hidden = end >= view.units.length;
    more.textContent = "more (" + (view.units.length - end) + " left)";
  }

  function unitItem(u, i) {
    var r = u.payload.rows[u.i];
    var col = u.payload.ci;
    var flip = u.vals.flip[0];
    var sid = r[col.sample_id];
    var draw = r[col.draw];
    var parts = [];
    if (u.V && u.V.method) parts.push(u.V.method);
    if (u.V && u.V.severity) parts.push(u.V.severity);
    var agreeText = u.agree === null ? "" : u.agree + "/" + u.agreeOf + " flipped";
    var agreeTitle = u.agree ? "lost: " + (u.lostBy.map(modelName).join(", ") || "none") + "; gained: " + (u.gainedBy.map(modelName).join(", ") || "none") : null;
    return h("li", {
      "data-key": u.key,
      "data-model": u.cell.model,
      "data-cell": u.cell.id,
      "data-flip": flip,
      "data-index": i,
      }, h("button", { type: "button", class: "unit" },
      h("span", { class: "flip flip-" + flip, text: flip }),
      h("span", { class: "u-model", text: modelName(u.cell.model) }),
      h("span", { class: "u-sample", text: String(sid) + (draw ? " #" + draw : "") }),
      h("span", { class: "u-cond", text: u.cell.condition + (view.cells.length > 1 && u.cell.prompt !== "default" ? " \u00b7 " + u.cell.prompt : "") }),
      h("span", { class: "u-var", text: parts.join(" \u00b7 ") }),
      h("span", { class: "u-agree", title: agreeTitle, text: agreeText }),
      h("span", { class: "u-pred", text: "\u2192 " + clip(r[col.prediction], 48) }),
      u.error ? h("span", { class: "u-err", text: "request failed" }) : null
    ));
  }

  function updateNav() {
    var prev = $("#sample-prev"), next = $("#sample-next");
    if (prev) prev.disabled = view.sel <= 0;
    if (next) next.disabled = view.sel < 0 || view.sel >= view.units.length - 1;
  }

  function selectIndex(idx, scroll) {
    var list = $("#units");
    var old = list.querySelector('li[aria-current="true"]');
    if (old) old.removeAttribute("aria-current");
    view.sel = idx;
    updateNav();
    if (idx < 0) return;
    if (idx >= view.shown) moreUnits(idx);
    var li = list.querySelector('li[data-index="' + idx + '"]');
    if (li) {
      li.setAttribute("aria-current", "true");
      if (scroll) li.scrollIntoView({ block: "nearest" });
    }
  }

  function selectFromState(st) {
    if (!st.sample) return selectIndex(-1);
    var at = sampleAt(st);
    for (var i = 0; i < view.units.length; i++) {
      var u = view.units[i];
      if (u.key === st.sample && (!at || unitTriple(u) === at) && (!st.smodel || u.cell.model === st.smodel)) {
        if (i !== view.sel) selectIndex(i, true);
        return;
      }
    }
    selectIndex(-1);
  }

  function openUnit(i, replace) {
    var u = view.units[i];
    if (!u) return;
    selectIndex(i, true);
    var li = $('#units li[data-index="' + i + '"] button');
    if (li && document.activeElement !== li) li.focus({ preventScroll: true });
    navigate({ sample: u.key, at: unitTriple(u), smodel: u.cell.model }, replace);
  }

  function moveSelection(delta) {
    if (!view.units.length) return;
    var i = view.sel < 0 ? (delta > 0 ? 0 : view.units.length - 1) : view.sel + delta;
    i = Math.max(0, Math.min(view.units.length - 1, i));
    openUnit(i, !$("#sample-view").hidden);
  }

  // ------------------------------------------------------------------ sample view

  var sampleGen = 0;
  var sampleSig = null;

  function sampleAt(st) {
    if (st.at) return st.at;
    var one = function (f) { return st.sel[f] && st.sel[f].size === 1 ? Array.from(st.sel[f])[0] : null; };
    var d = one("dataset"), c = one("condition"), p = one("prompt");
    if (st.open) {
      var cell = CELL_BY_ID.get(st.open);
      if (cell) return cell.dataset + "/" + cell.condition + "/" + cell.prompt;
    }
    return d && c && p ? d + "/" + c + "/" + p : null;
  }

  function renderSample(st) {
    var pane = $("#sample-view");
    if (!st.sample) {
      pane.hidden = true;
      document.body.classList.remove("with-sample");
      sampleSig = null;
      clear(pane);
      return Promise.resolve();
    }
    var at = sampleAt(st);
    var sig = st.sample + "|" + at;
    if (sig === sampleSig) {
      highlightModel(st.smodel);
      return Promise.resolve();
    }
    sampleSig = sig;
    var gen = ++sampleGen;
    pane.hidden = false;
    document.body.classList.add("with-sample");
    clear(pane);
    pane.removeAttribute("data-ready");
    pane.append(sampleHeader(st, at), h("p", { class: "loading", text: "loading\u2026" }));
    if (!at) {
      pane.append(h("p", { class: "error", text: "the fragment names a sample but not its dataset/condition/prompt (at=...)" }));
      return Promise.resolve();
    }
    var parts = at.split("/");
    var d = parts[0], c = parts[1], p = parts.slice(2).join("/");
    var here = INDEX.model_order.map(function (m) {
      return CELL_BY_ID.get(m + "/" + d + "/" + c + "/" + p);
    }).filter(Boolean);
    return Promise.all(here.map(function (cell) {
      return loadRows(cell).then(function (payload) {
        var i = payload.byKey.get(st.sample);
        var row = i === undefined ? null : rowObject(payload, i);
        var cleanCond = payload.clean_condition || INDEX.clean;
        var cleanCell = isClean(c) ? null : CELL_BY_ID.get(cell.model + "/" + d + "/" + cleanCond + "/" + p);
        if (!row || !cleanCell) return { cell: cell, payload: payload, row: row, clean: null, cleanCell: cleanCell };
        return loadRows(cleanCell).then(function (cp) {
          var ck = row.clean_key;
          var j = ck === null || ck === undefined ? undefined : cp.byKey.get(String(ck));
          return { cell: cell, payload: payload, row: row, clean: j === undefined ? null : rowObject(cp, j), cleanPayload: cp, cleanCell: cleanCell };
        }, function (e) {
          return { cell: cell, payload: payload, row: row, clean: null, cleanCell: cleanCell, cleanError: e.message };
        });
      }, function (e) {
        return { cell: cell, error: e.message };
      });
    })).then(function (per) {
      if (gen !== sampleGen) return null;
      var first = per.filter(function (x) { return x.row; })[0];
      if (!first) {
        clear(pane).append(sampleHeader(st, at), h("p", { class: "error", text: "no row with key " + st.sample + " in the cells of " + at }));
        pane.setAttribute("data-ready", "1");
        return null;
      }
      var vid = first.row.variant_id;
      var cleanCond = first.payload.clean_condition || INDEX.clean;
      var withClean = per.filter(function (x) { return x.clean; })[0];
      var cvid = withClean ? withClean.clean.variant_id : first.row.clean_key ? String(first.row.clean_key).replace(/#[^#]*$/, "") : first.row.sample_id;
      return Promise.all([
        getVariant(d, c, vid).catch(function () { return null; }),
        isClean(c) ? Promise.resolve(null) : getVariant(d, cleanCond, cvid).catch(function () { return null; }),
      ]).then(function (vs) {
        if (gen !== sampleGen) return;
        clear(pane);
        drawSample(pane, st, { d: d, c: c, p: p, cleanCond: cleanCond, per: per, first: first, V: vs[0], CV: vs[1] });
        highlightModel(st.smodel);
        updateNav();
        pane.setAttribute("data-ready", "1");
      });
    });
  }

  function rowObject(payload, i) {
    var r = payload.rows[i];
    var o = {};
    for (var name in payload.ci) o[name] = r[payload.ci[name]];
    return o;
  }

  function highlightModel(m) {
    document.querySelectorAll("#sample-models section[data-model]").forEach(function (s) {
      s.classList.toggle("current", s.getAttribute("data-model") === m);
    });
  }

  function sampleHeader(st, at) {
    return h("header", { class: "sample-head" },
      h("h2", { id: "sample-title", text: "Unit " + st.sample + (at ? " \u00b7 " + at : "") }),
      h("div", { class: "sample-nav" },
        h("button", { type: "button", id: "sample-prev", disabled: view.sel <= 0, "aria-label": "previous unit (k)" }, "\u2039 prev"),
        h("button", { type: "button", id: "sample-next", disabled: view.sel < 0 || view.sel >= view.units.length - 1, "aria-label": "next unit (j)" }, "next \u203a"),
        h("button", { type: "button", id: "sample-close", "aria-label": "close the sample view (Esc)" }, "close \u00d7")
      ));
  }

  function drawSample(pane, st, s) {
    var V = s.V || null;
    var row = s.first.row;
    pane.append(sampleHeader(st, s.d + "/" + s.c + "/" + s.p));
    pane.append(h("p", { class: "sample-sub" },
      datasetName(s.d) + " \u00b7 condition " + s.c + " \u00b7 prompt " + s.p + " \u00b7 sample " + row.sample_id +
      " \u00b7 variant " + row.variant_id + " \u00b7 draw " + row.draw));

    // images: clean and perturbed side by side, image by image
    var imgs = h("div", { id: "sample-images" });
    var pImgs = V ? V.images || [] : [];
    var cImgs = s.CV ? s.CV.images || [] : [];
    var n = Math.max(pImgs.length, cImgs.length);
    if (!V && !s.CV) imgs.append(h("p", { class: "note", text: "no variant record for " + row.variant_id + " (variants/" + s.d + "/" + s.c + ")" }));
    for (var i = 0; i < n; i++) {
      var pair = h("div", { class: "image-pair" });
      if (!isClean(s.c)) {
        var ci = cImgs[i];
        var pi = pImgs[i];
        // the perturbation's boxes are also drawn, dashed, on a clean image of the same size
        var ghost = pi && ci && pi.width === ci.width && pi.height === ci.height ? pi.boxes : null;
        pair.append(ci ? figure(ci, "clean", i, row.sample_id, ghost, pi ? pi.box_kind : null) : h("p", { class: "note", text: "no clean image" }));
        pair.append(pi ? figure(pi, "perturbed", i, row.variant_id) : h("p", { class: "note", text: "no perturbed image" }));
      } else if (pImgs[i]) pair.append(figure(pImgs[i], "clean", i, row.sample_id));
      imgs.append(pair);
    }
    pane.append(imgs);

    // question, choices, gold answer
    var qa = h("section", { id: "sample-qa" });
    var Q = V || s.CV;
    if (Q) {
      qa.append(h("h3", { text: "Question" }), h("p", { id: "sample-question", class: "question", text: Q.question || "" }));
      if (Q.choices && Q.choices.length) {
        qa.append(h("ol", { id: "sample-choices", type: "A" }, Q.choices.map(function (c) { return h("li", { text: String(c) }); })));
      }
      qa.append(h("p", { id: "sample-answer" }, h("strong", { text: "Gold answer: " }), String(Q.answer === null || Q.answer === undefined ? DASH : Q.answer),
        Q.answer_type ? h("span", { class: "muted", text: " (" + Q.answer_type + ")" }) : null));
    }
    pane.append(qa);

    // per model
    var models = h("div", { id: "sample-models" });
    s.per.forEach(function (x) { models.append(modelBlock(x, s)); });
    pane.append(h("h3", { text: "Answers per model" }), models);

    // perturbation
    if (V && !isClean(s.c)) pane.append(perturbationBlock(V));
  }

  function figure(img, side, i, id, ghostBoxes, ghostKind) {
    var W = Number(img.width) || 0, H = Number(img.height) || 0;
    var box = h("span", { class: "thumb-box" });
    var thumbSrc = isRelative(img.thumb) ? relUrl(img.thumb) : null;
    if (thumbSrc) box.append(h("img", { src: thumbSrc, alt: side + " image " + (i + 1) + " of " + id + " (thumbnail)", loading: "lazy" }));
    else box.append(h("span", { class: "no-thumb", text: "no thumbnail" }));
    var boxes = ghostBoxes || img.boxes || [];
    if (W && H && boxes.length) box.append(boxesSvg(W, H, boxes, ghostBoxes ? ghostKind : img.box_kind, !!ghostBoxes));
    var full = img.full && isRelative(img.full) ? img.full : null;
    var btn = h("button", {
      type: "button",
      class: "thumb",
      "data-side": side,
      "data-full": full || "",
      "data-w": W,
      "data-h": H,
      "aria-label": "show the full-size " + side + " image " + (i + 1),
    }, box);
    btn._img = img;
    btn._ghost = ghostBoxes ? { boxes: ghostBoxes, kind: ghostKind } : null;
    var ownBoxes = img.boxes || [];
    var caption = side + " \u00b7 " + (W && H ? W + "\u00d7" + H + " px" : "size unknown");
    if (ownBoxes.length) caption += " \u00b7 " + ownBoxes.length + " " + (img.box_kind || "") + " box" + (ownBoxes.length > 1 ? "es" : "");
    if (ghostBoxes) caption += " \u00b7 dashed: where the " + (ghostKind || "") + " boxes are";
    return h("figure", { class: "img-fig", "data-side": side, "data-index": i }, btn,
      h("figcaption", null, caption, full ? null : h("span", { class: "no-full", text: " \u00b7 full image not under results/" })));
  }

  function boxesSvg(W, H, boxes, kind, ghost) {
    var el = svg("svg", { class: "boxes", viewBox: "0 0 " + W + " " + H, preserveAspectRatio: "none", "aria-hidden": "true" });
    boxes.forEach(function (b, k) {
      if (!b || b.length < 4) return;
      var x0 = Math.min(b[0], b[2]), y0 = Math.min(b[1], b[3]);
      el.append(svg("rect", {
        class: "box box-" + (kind || "box") + (ghost ? " ghost" : ""),
        "data-box": k,
        x: x0,
        y: y0,
        width: Math.abs(b[2] - b[0]),
        height: Math.abs(b[3] - b[1]),
        "vector-effect": "non-scaling-stroke",
      }));
    });
    return el;
  }

  function perturbationBlock(V) {
    var sec = h("section", { id: "sample-perturbation" }, h("h3", { text: "Perturbation" }));
    var dl = h("dl", { class: "kv" });
    var add = function (k, v) { dl.append(h("dt", { text: k }), h("dd", { text: v === null || v === undefined || v === "" ? DASH : String(v) })); };
    add("perturbation", V.perturbation);
    add("method", V.method);
    add("severity", V.severity);
    add("seed", V.seed);
    sec.append(dl);
    var params = V.params || {};
    var keys = Object.keys(params);
    if (keys.length) {
      var t = h("table", { class: "params", id: "sample-params" }, h("caption", { text: "parameters" }));
      keys.forEach(function (k) {
        var v = params[k];
        t.append(h("tr", { "data-param": k }, h("th", { scope: "row", text: k }), h("td", { text: clip(typeof v === "string" ? v : JSON.stringify(v), 400) })));
      });
      sec.append(t);
    }
    return sec;
  }

  function verdictText(r) {
    if (!r) return DASH;
    var t = Number(r.correct) === 1 ? "\u2713 right" : "\u2717 wrong";
    if (r.score !== null && r.score !== undefined && Number(r.score) !== Number(r.correct)) t += " (score " + Number(r.score).toFixed(3).replace(/0+$/, "").replace(/\.$/, "") + ")";
    return t;
  }

  function readAs(r) {
    if (!r) return DASH;
    var bits = [];
    if (r.mode) bits.push("mode " + r.mode);
    if (r.method) bits.push(r.method === "random" ? "harness random guess" : "method " + r.method);
    if (r.harness_bug) bits.push("harness bug " + r.harness_bug);
    return bits.join(" \u00b7 ") || DASH;
  }

  function answerRow(label, side, r, cell) {
    if (!r) {
      return h("tr", { "data-side": side }, h("th", { scope: "row", text: label }), h("td", { colspan: 5, class: "muted", text: side === "clean" ? "no clean row (unpaired)" : "no row" }));
    }
    var notes = [];
    if (r.reason) notes.push(h("span", { class: "reason", text: r.reason }));
    if (r.finish_reason && r.finish_reason !== "stop") notes.push(h("span", { class: "finish", text: "finish: " + r.finish_reason + (r.finish_reason === "length" ? " (cut at the token limit)" : "") }));
    if (r.error) notes.push(h("span", { class: "u-err", text: "request failed: " + r.error }));
    var tokens = [];
    if (r.thinking_tokens !== null && r.thinking_tokens !== undefined) tokens.push(r.thinking_tokens + " thinking");
    if (r.completion_tokens !== null && r.completion_tokens !== undefined) tokens.push(r.completion_tokens + " completion");
    return h("tr", { "data-side": side, class: Number(r.correct) === 1 ? "right" : "wrong" },
      h("th", { scope: "row", text: label }),
      h("td", { class: "prediction", text: r.prediction === null || r.prediction === undefined || r.prediction === "" ? "(empty)" : String(r.prediction) }),
      h("td", { class: "verdict", text: verdictText(r) }),
      h("td", { class: "read-as", text: readAs(r) }),
      h("td", { class: "tokens", text: tokens.join(", ") || DASH }),
      h("td", { class: "notes" }, notes));
  }

  function judgesLine(r) {
    var j = r && r.judges;
    if (!j || typeof j !== "object") return null;
    var keys = Object.keys(j);
    if (!keys.length) return null;
    return h("p", { class: "judges" }, keys.map(function (k) {
      var label = k.indexOf("attributes:") === 0 ? k + " (attributes)" : k + " verdict";
      return h("span", { class: "judge", "data-judge": k }, h("span", { class: "judge-kind", text: label + ": " }), h("strong", { text: String(j[k]) }));
    }));
  }

  function modelBlock(x, s) {
    var m = x.cell.model;
    var info = INDEX.models[m] || {};
    var role = [info.role, info.base ? "base " + modelName(info.base) : null, info.family ? "family " + info.family : null].filter(Boolean).join(" \u00b7 ");
    var sec = h("section", { class: "model", "data-model": m });
    var flip = x.row ? (isClean(s.c) ? "clean" : x.row.flip || "unpaired") : null;
    sec.append(h("h4", null, modelName(m), role ? h("span", { class: "role", text: " " + role }) : null, " ",
      flip ? h("span", { class: "flip flip-" + flip, text: flip }) : null));
    if (x.error) {
      sec.append(h("p", { class: "error", text: x.error }));
      return sec;
    }
    if (!x.row) {
      sec.append(h("p", { class: "muted", text: "no row for this unit in " + x.cell.id }));
      return sec;
    }
    var t = h("table", { class: "answers" }, h("thead", null, h("tr", null,
      ["", "answer", "verdict", "read as", "tokens", "notes"].map(function (c) { return h("th", { scope: "col", text: c }); }))));
    var tb = h("tbody");
    if (!isClean(s.c)) tb.append(answerRow(s.cleanCond, "clean", x.clean, x.cleanCell));
    tb.append(answerRow(s.c, isClean(s.c) ? "clean" : "perturbed", x.row, x.cell));
    t.append(tb);
    sec.append(t);
    if (x.cleanError) sec.append(h("p", { class: "error", text: x.cleanError }));
    if (!isClean(s.c) && x.clean) sec.append(traceBlock("clean", x.cleanCell, x.clean, x.cleanPayload));
    sec.append(traceBlock(isClean(s.c) ? "clean" : "perturbed", x.cell, x.row, x.payload));
    return sec;
  }

  function traceBlock(side, cell, r, payload) {
    var tok = r.thinking_tokens;
    var summary = (side === cell.condition ? side : side + " (" + cell.condition + ")") + ": reasoning trace and answer text \u00b7 " +
      (tok === null || tok === undefined ? "no thinking token count" : tok + " thinking tokens");
    var det = h("details", { class: "trace", "data-side": side, "data-key": r.key, "data-cell": cell.id },
      h("summary", { text: summary }));
    var jl = judgesLine(r);
    var wrap = h("div", { class: "trace-wrap" }, jl, det);
    det.addEventListener("toggle", function () {
      if (!det.open || det.getAttribute("data-loaded")) return;
      det.setAttribute("data-loaded", "loading");
      var body = h("div", { class: "trace-body", text: "loading\u2026" });
      det.append(body);
      var chunks = payload && payload.chunks !== undefined ? payload.chunks : cell.chunks;
      loadText(cell, String(r.key), chunks).then(function (part) {
        var rec = (part.texts || {})[String(r.key)];
        clear(body);
        if (!rec) body.append(h("p", { class: "muted", text: "no text for " + r.key + " in this cell's text files" }));
        else drawText(body, rec, cell);
        det.setAttribute("data-loaded", "1");
      }, function (e) {
        clear(body).append(h("p", { class: "error", text: "text not available: " + e.message }));
        det.setAttribute("data-loaded", "error");
      });
    });
    return wrap;
  }

  function attributePhrases(judges) {
    var cats = [];
    Object.keys(judges || {}).forEach(function (kind) {
      if (kind.indexOf("attributes") !== 0) return;
      var attrs = (judges[kind] || {}).attributes;
      if (!attrs || typeof attrs !== "object") return;
      Object.keys(attrs).forEach(function (cat) {
        var list = Array.isArray(attrs[cat]) ? attrs[cat] : [];
        var idx = cats.findIndex(function (c) { return c.cat === cat; });
        if (idx < 0) cats.push({ cat: cat, phrases: list.map(String) });
        else cats[idx].phrases = cats[idx].phrases.concat(list.map(String));
      });
    });
    return cats;
  }

  function escapeRe(s) {
    return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  }

  /** `text` as nodes with every attribute phrase wrapped in <mark data-category>. */
  function marked(text, cats) {
    var frag = document.createDocumentFragment();
    var phraseCat = new Map();
    cats.forEach(function (c, ci) {
      c.phrases.forEach(function (p) {
        if (p.trim() && !phraseCat.has(p.toLowerCase())) phraseCat.set(p.toLowerCase(), { cat: c.cat, i: ci });
      });
    });
    if (!phraseCat.size || !text) {
      frag.append(text || "");
      return frag;
    }
    var phrases = Array.from(phraseCat.keys()).sort(function (a, b) { return b.length - a.length; });
    var re = new RegExp(phrases.map(escapeRe).join("|"), "gi");
    var last = 0;
    var m;
    while ((m = re.exec(text)) !== null) {
      if (m[0] === "") { re.lastIndex++; continue; }
      if (m.index > last) frag.append(text.slice(last, m.index));
      var info = phraseCat.get(m[0].toLowerCase()) || { cat: "", i: 0 };
      frag.append(h("mark", { class: "attr cat-" + (info.i % 6), "data-category": info.cat, title: info.cat, text: m[0] }));
      last = m.index + m[0].length;
    }
    if (last < text.length) frag.append(text.slice(last));
    return frag;
  }

  function drawText(body, rec, cell) {
    var cats = attributePhrases(rec.judges);
    if (rec.thinking) {
      body.append(h("h5", { text: "Reasoning trace" }), h("pre", { class: "text thinking" }, marked(rec.thinking, cats)));
    } else body.append(h("p", { class: "muted", text: "no thinking part" }));
    body.append(h("h5", { text: "Answer text" }), h("pre", { class: "text answer" }, rec.thinking ? rec.answer_text || "" : marked(rec.answer_text || "", cats)));
    if (rec.raw_text) body.append(h("details", { class: "raw" }, h("summary", { text: "raw output" }), h("pre", { class: "text raw-text", text: rec.raw_text })));
    if (rec.clipped) {
      body.append(h("p", { class: "clipped", text: "Clipped to 32,000 characters; the full text is in the outputs file results/outputs/" +
        cell.model + "/" + cell.dataset + "/" + cell.condition + "/" + cell.prompt + ".jsonl" }));
    }
    if (cats.length) {
      body.append(h("div", { class: "attr-legend" }, h("span", { text: "attributes: " }), cats.map(function (c, i) {
        return h("span", { class: "legend-item" }, h("mark", { class: "attr cat-" + (i % 6), "data-category": c.cat, text: c.cat }),
          " " + c.phrases.length + " ");
      })));
    }
    var judges = rec.judges || {};
    var kinds = Object.keys(judges);
    if (kinds.length) {
      var box = h("div", { class: "judge-records" }, h("h5", { text: "Judges" }));
      kinds.forEach(function (kind) {
        var recd = judges[kind] || {};
        var dl = h("dl", { class: "kv judge-record", "data-judge": kind });
        Object.keys(recd).forEach(function (k) {
          var v = recd[k];
          if (k === "attributes" && v && typeof v === "object") {
            dl.append(h("dt", { text: k }), h("dd", null, Object.keys(v).map(function (cat) {
              return h("div", null, h("strong", { text: cat + ": " }), (v[cat] || []).map(String).join("; "));
            })));
          } else {
            dl.append(h("dt", { text: k }), h("dd", { class: k === "verdict" ? "verdict" : null, text: clip(typeof v === "string" ? v : JSON.stringify(v), 2000) }));
          }
        });
        box.append(h("h6", { text: kind }), dl);
      });
      body.append(box);
    }
  }

  // ------------------------------------------------------------------ overlay

  var lastFocus = null;

  function openOverlay(btn) {
    var ov = $("#overlay");
    var fig = clear($("#overlay-figure"));
    var img = btn._img || {};
    var full = btn.getAttribute("data-full");
    if (!full) {
      fig.append(h("p", { id: "overlay-msg", class: "no-full", text: "full image not under results/ (only the thumbnail is in the explorer)" }));
    } else {
      var W = Number(img.width) || 0, H = Number(img.height) || 0;
      var box = h("span", { class: "full-box" });
      var el = h("img", { id: "overlay-img", src: relUrl(full), alt: "full-size " + btn.getAttribute("data-side") + " image" });
      el.addEventListener("error", function () {
        box.replaceWith(h("p", { id: "overlay-msg", class: "error", text: "cannot open the full image " + full + " (moved or removed?)" }));
      });
      box.append(el);
      var boxes = btn._ghost ? btn._ghost.boxes : img.boxes || [];
      if (W && H && boxes.length) box.append(boxesSvg(W, H, boxes, btn._ghost ? btn._ghost.kind : img.box_kind, !!btn._ghost));
      fig.append(box, h("figcaption", { text: full + (W && H ? " \u00b7 " + W + "\u00d7" + H + " px" : "") }));
    }
    lastFocus = btn;
    ov.hidden = false;
    $("#overlay-close").focus();
  }

  function closeOverlay() {
    var ov = $("#overlay");
    if (ov.hidden) return false;
    ov.hidden = true;
    clear($("#overlay-figure"));
    if (lastFocus && document.contains(lastFocus)) lastFocus.focus();
    return true;
  }

  // ------------------------------------------------------------------ table cell check

  var checkSig = null;
  var checkGen = 0;

  function scopeOf(study) {
    var scope = study && study.scope ? study.scope : {};
    var datasets = scope.datasets;
    if (!datasets && study && study.datasets) {
      datasets = {};
      study.datasets.forEach(function (d) {
        var info = INDEX.datasets[d] || {};
        datasets[d] = { group: info.group || "", prompts: info.prompts || [] };
      });
    }
    datasets = datasets || {};
    // the study's own order of its datasets (a JSON object's keys are sorted)
    var order = (study && study.datasets) || Object.keys(datasets);
    order = order.filter(function (d) { return Object.prototype.hasOwnProperty.call(datasets, d); });
    return { datasets: datasets, order: order, clean: scope.clean_condition || INDEX.clean };
  }

  function studyOf(q) {
    var folder = q.get("study");
    if (folder && STUDY_BY_FOLDER.has(folder)) return STUDY_BY_FOLDER.get(folder);
    var table = q.get("table");
    if (table) {
      for (var i = 0; i < INDEX.studies.length; i++) {
        var s = INDEX.studies[i];
        if ((s.tables || []).some(function (t) { return t.name === table; })) return s;
      }
    }
    return null;
  }

  /** The (dataset, [prompts] | null) a benchmark covers in a scope; null prompts = the
   * scope's (or, when it lists none, every prompt the model has cells for). */
  function benchDatasets(bench, scope) {
    var ds = scope.datasets;
    if (!bench) return { error: "no bench in the link" };
    if (Object.prototype.hasOwnProperty.call(ds, bench)) return { sel: [[bench, null]] };
    var colon = bench.indexOf(":");
    if (colon > 0 && Object.prototype.hasOwnProperty.call(ds, bench.slice(0, colon))) return { sel: [[bench.slice(0, colon), [bench.slice(colon + 1)]]] };
    var order = scope.order || Object.keys(ds);
    if (bench === "all") return { sel: order.map(function (d) { return [d, null]; }), group: true };
    var sel = order.filter(function (d) { return (ds[d] || {}).group === bench; }).map(function (d) { return [d, null]; });
    if (sel.length) return { sel: sel, group: true };
    return { error: "benchmark " + bench + " is neither a dataset, dataset:prompt, group nor all of this study's scope" };
  }

  function promptsFor(model, d, cond, given, scope) {
    if (given) return given;
    var listed = ((scope.datasets[d] || {}).prompts || []).filter(Boolean);
    if (listed.length) return listed;
    return CELLS.filter(function (c) { return c.model === model && c.dataset === d && c.condition === cond; }).map(function (c) { return c.prompt; });
  }

  /** The link's cells (for the filters) and, async, its metric from the rows. */
  function cellLinkPlan(q) {
    var study = studyOf(q);
    var scope = scopeOf(study);
    var model = q.get("model");
    var cond = q.get("condition");
    var metric = q.get("metric") || "accuracy";
    var b = study ? benchDatasets(q.get("bench"), scope) : { error: "no study has a table named " + q.get("table") };
    return { study: study, scope: scope, model: model, cond: cond, metric: metric, bench: q.get("bench"), b: b };
  }

  function expandCellLink(st) {
    var plan = cellLinkPlan(st.q);
    var ch = { units: "1", flip: "" };
    if (plan.model) ch.model = plan.model;
    if (plan.cond) ch.condition = plan.cond;
    if (plan.study) ch.study = plan.study.folder;
    if (plan.b.sel) {
      ch.dataset = plan.b.sel.map(function (x) { return x[0]; });
      var given = plan.b.sel.length === 1 && plan.b.sel[0][1];
      if (given) ch.prompt = given;
    }
    navigate(ch, true);
  }

  function renderCellCheck(st) {
    var box = $("#cell-check");
    if (!st.cell) {
      box.hidden = true;
      checkSig = null;
      return Promise.resolve();
    }
    var keys = ["table", "metric", "model", "bench", "condition", "shown", "study", "errors"];
    var sig = keys.map(function (k) { return st.q.get(k); }).join("|") + JSON.stringify(st.paramFilters);
    if (sig === checkSig) return Promise.resolve();
    checkSig = sig;
    var gen = ++checkGen;
    var plan = cellLinkPlan(st.q);
    var shown = st.q.get("shown") || "";
    box.hidden = false;
    box.className = "";
    box.removeAttribute("data-ready");
    clear(box).append(checkLine(shown, "\u2026"), h("p", { class: "loading", text: "recomputing from the rows\u2026" }));
    if (plan.b.error) return Promise.resolve(finishCheck(box, plan, shown, null, plan.b.error, []));
    var conds = plan.metric === "accuracy" || plan.metric === "mean_score" ? [plan.cond] : [plan.scope.clean, plan.cond];
    var parts = [];
    plan.b.sel.forEach(function (x) {
      conds.forEach(function (cond) {
        promptsFor(plan.model, x[0], cond, x[1], plan.scope).forEach(function (p) {
          parts.push({ d: x[0], cond: cond, p: p, cell: CELL_BY_ID.get(plan.model + "/" + x[0] + "/" + cond + "/" + p) });
        });
      });
    });
    var needVars = st.paramFilters.length > 0;
    return Promise.all(parts.map(function (part) {
      if (!part.cell) return Promise.resolve(part);
      return Promise.all([loadRows(part.cell), needVars ? allVariants(part.d, part.cond) : Promise.resolve(null)]).then(function (res) {
        part.payload = res[0];
        part.vars = res[1];
        return part;
      }, function (e) {
        part.loadError = e.message;
        return part;
      });
    })).then(function (loaded) {
      if (gen !== checkGen) return;
      var value = computeMetric(plan, loaded, st);
      finishCheck(box, plan, shown, value, null, loaded);
    });
  }

  function checkLine(shown, computed, cls) {
    return h("p", { class: "cell-line" },
      "table: ", h("span", { id: "cell-shown", text: shown || DASH }),
      " \u00b7 from these rows: ", h("span", { id: "cell-computed", class: cls || null, text: computed }));
  }

  /** Mean of `correct` (or `score`) per part, then dataset = mean over its prompts, then the
   * benchmark = mean over datasets (macro); rr and drop_pp from those accuracies. */
  function computeMetric(plan, parts, st) {
    var field = plan.metric === "mean_score" ? "score" : "correct";
    var byCond = {};
    parts.forEach(function (part) {
      part.rows = 0;
      part.excluded = 0;
      part.sum = 0;
      if (!part.payload) return;
      var col = part.payload.ci;
      var rows = part.payload.rows || [];
      var f = col[field], e = col.error, v = col.variant_id, jc = col.judges;
      var filters = st.paramFilters;
      var clean = isClean(part.cond) || part.cond === plan.scope.clean;
      // Idis on a MathVerse dataset: the judge's verdict is the correctness (metrics/idis.py
      // apply_math_judge); a row without a verdict is left out
      var judged = field === "correct" && correctFrom(st, plan, part.d) === "mathverse";
      part.noVerdict = 0;
      for (var i = 0; i < rows.length; i++) {
        var r = rows[i];
        if (st.excludeErrors && e !== undefined && r[e]) { part.excluded++; continue; }
        if (filters.length) {
          var V = part.vars ? part.vars[r[v]] : null;
          if (!paramMatch({ V: V, cell: { condition: clean ? INDEX.clean : part.cond } }, filters)) continue;
        }
        var x;
        if (judged) {
          var verdict = r[jc] ? r[jc].mathverse : null;
          if (verdict !== "yes" && verdict !== "no") { part.noVerdict++; continue; }
          x = verdict === "yes" ? 1 : 0;
        } else x = Number(r[f]) || 0;
        part.rows++;
        part.sum += x;
      }
      part.value = part.rows ? part.sum / part.rows : null;
    });
    function condValue(cond) {
      var perDataset = [];
      plan.b.sel.forEach(function (x) {
        var vals = parts.filter(function (p) { return p.d === x[0] && p.cond === cond && p.value !== null && p.value !== undefined; })
          .map(function (p) { return p.value; });
        if (vals.length) perDataset.push(mean(vals));
      });
      return perDataset.length ? mean(perDataset) : null;
    }
    var pert = condValue(plan.cond);
    if (plan.metric === "accuracy" || plan.metric === "mean_score") return pert;
    var clean = condValue(plan.scope.clean);
    if (plan.metric === "rr") return pert === null || clean === null || clean === 0 ? null : pert / clean;
    if (plan.metric === "drop_pp") return pert === null || clean === null ? null : clean - pert;
    return undefined; // unknown metric
  }

  /** Where correctness comes from: the fragment's correct_from, else the scope's
   * datasets[d].correct_from ("mathverse": the MathVerse judge's verdict), else `correct`. */
  function correctFrom(st, plan, d) {
    return st.q.get("correct_from") || ((plan.scope.datasets || {})[d] || {}).correct_from || "correct";
  }

  function mean(a) {
    var s = 0;
    for (var i = 0; i < a.length; i++) s += a[i];
    return s / a.length;
  }

  function finishCheck(box, plan, shown, value, error, parts) {
    var signed = /^[+]/.test(shown.trim());
    var computed = value === undefined ? "?" : signed ? fmtSignedPct(value) : fmtPct(value);
    var lead = function (s) {
      var m = String(s).trim().replace(/\u2212/g, "-").match(/^([+-]?\d+(?:\.\d+)?|\u2013|-)/);
      return m ? m[1] : String(s).trim();
    };
    var ok = !error && value !== undefined && (shown.trim() === computed || lead(shown) === computed);
    // a metric the explorer does not recompute is neither a match nor a mismatch
    var cls = value === undefined && !error ? "unchecked" : ok ? "match" : "mismatch";
    clear(box);
    box.className = cls;
    box.append(checkLine(shown, computed, cls));
    box.append(h("span", { class: "verdict-badge", text: cls === "match" ? "matches the table" : cls === "mismatch" ? "does not match the table" : "not recomputed here" }));
    var study = plan.study;
    var what = [plan.metric, modelName(plan.model || ""), plan.bench, plan.cond].join(" \u00b7 ");
    var p = h("p", { class: "cell-what" }, what);
    if (study) {
      var t = (study.tables || []).filter(function (x) { return x.name === readState().q.get("table"); })[0];
      p.append(" \u00b7 study " + (study.title || study.folder));
      if (t) p.append(" \u00b7 table ", isRelative(t.href) ? h("a", { href: relUrl(t.href), text: t.name }) : t.name);
    }
    box.append(p);
    if (error) box.append(h("p", { class: "error", text: error }));
    if (value === undefined) box.append(h("p", { class: "error", text: "the explorer does not recompute metric " + plan.metric + " (it knows accuracy, mean_score, rr, drop_pp)" }));
    var filters = readState().paramFilters;
    var judgedSets = plan.b.sel ? plan.b.sel.filter(function (x) { return correctFrom(readState(), plan, x[0]) === "mathverse"; }) : [];
    var how = "accuracy = mean of correct over the rows" +
      (judgedSets.length ? " (MathVerse judge verdicts on " + judgedSets.map(function (x) { return x[0]; }).join(", ") + "; rows without a verdict left out)" : "") + (readState().excludeErrors ? ", failed requests (error) left out" : "") +
      "; a dataset's prompt settings averaged first, then the datasets (macro)" +
      (plan.metric === "rr" ? "; rr = perturbed / clean" : plan.metric === "drop_pp" ? "; drop = clean \u2212 perturbed" : "") +
      (filters.length ? "; rows whose variant has " + filters.map(function (f) { return f[0] + " = " + f[1]; }).join(", ") : "");
    box.append(h("p", { class: "muted how", text: how }));
    if (parts.length) {
      var t2 = h("table", { id: "cell-breakdown" }, h("thead", null, h("tr", null,
        ["dataset", "prompt", "condition", "rows used", "failed left out", "no judge verdict", plan.metric === "mean_score" ? "mean score" : "accuracy"].map(function (c) { return h("th", { scope: "col", text: c }); }))));
      var tb = h("tbody");
      parts.forEach(function (pt) {
        tb.append(h("tr", { "data-cell": pt.cell ? pt.cell.id : "" },
          h("td", { text: datasetName(pt.d) }), h("td", { text: pt.p }), h("td", { text: pt.cond }),
          h("td", { class: "num", text: pt.cell ? String(pt.rows || 0) : "no cell" }),
          h("td", { class: "num", text: String(pt.excluded || 0) }),
          h("td", { class: "num", text: correctFrom(readState(), plan, pt.d) === "mathverse" ? String(pt.noVerdict || 0) : DASH }),
          h("td", { class: "num", text: pt.loadError ? pt.loadError : pt.value === null || pt.value === undefined ? DASH : fmtPct(pt.value) })));
      });
      t2.append(tb);
      box.append(t2);
    }
    box.append(h("button", { type: "button", id: "cell-check-close" }, "close"));
    box.setAttribute("data-ready", "1");
  }

  // ------------------------------------------------------------------ routing

  function route() {
    if (!INDEX) return;
    var st = readState();
    if (st.cell && !st.q.has("units")) {
      expandCellLink(st); // once: the link's filters written into the fragment
      return;
    }
    try {
      var active = document.activeElement;
      var refocus = null;
      if (active && active.closest && active.closest(".filter")) {
        refocus = '.filter[data-facet="' + active.closest(".filter").getAttribute("data-facet") + '"] ' +
          (active.hasAttribute("data-value") ? 'button[data-value="' + cssEscape(active.getAttribute("data-value")) + '"]' : "button.clear");
      }
      var matched = renderCells(st);
      var jobs = [renderCellCheck(st), renderUnits(st, matched).then(function () {
        var el = refocus && document.querySelector(refocus);
        if (el && document.activeElement === document.body) el.focus({ preventScroll: true });
      }), renderSample(st)];
      Promise.all(jobs).then(function () {
        document.body.setAttribute("data-ready", "1");
      }, reportError);
    } catch (e) {
      reportError(e);
    }
  }

  function closeSample() {
    navigate({ sample: null, at: null, smodel: null });
    var b = $('#units li[aria-current="true"] button');
    if (b) b.focus({ preventScroll: true });
  }

  function toggleFacet(facet, value) {
    var st = readState();
    var cur = st.sel[facet] ? new Set(st.sel[facet]) : new Set();
    if (cur.has(value)) cur.delete(value);
    else cur.add(value);
    var ch = {};
    ch[facet] = Array.from(cur);
    if (CELL_FACETS.indexOf(facet) >= 0) ch.open = null;
    navigate(ch);
  }

  function clearFacet(facet) {
    var ch = {};
    ch[facet] = facet === "flip" ? "" : null;
    if (CELL_FACETS.indexOf(facet) >= 0) ch.open = null;
    navigate(ch);
  }

  function wire() {
    document.addEventListener("click", function (e) {
      var t = e.target instanceof Element ? e.target : null;
      if (!t) return;
      var b;
      if ((b = t.closest(".filter button.opt"))) {
        toggleFacet(b.closest(".filter").getAttribute("data-facet"), b.getAttribute("data-value"));
      } else if ((b = t.closest(".filter button.clear"))) {
        clearFacet(b.getAttribute("data-clear"));
      } else if ((b = t.closest("button[data-open-cell]"))) {
        navigate({ open: b.getAttribute("data-open-cell"), units: null });
      } else if (t.closest("#list-units")) {
        navigate({ units: "1", open: null });
      } else if (t.closest("#cells-more")) {
        moreCells();
      } else if (t.closest("#units-more")) {
        moreUnits();
      } else if ((b = t.closest("#units li[data-index] button"))) {
        openUnit(Number(b.parentNode.getAttribute("data-index")), false);
      } else if (t.closest("#sample-close")) {
        closeSample();
      } else if (t.closest("#sample-prev")) {
        moveSelection(-1);
      } else if (t.closest("#sample-next")) {
        moveSelection(1);
      } else if ((b = t.closest("button.thumb"))) {
        openOverlay(b);
      } else if (t.closest("#overlay-close") || t.id === "overlay") {
        closeOverlay();
      } else if (t.closest("#cell-check-close")) {
        navigate({ cell: null, table: null, metric: null, bench: null, shown: null });
      } else if (t.closest("#reset")) {
        location.hash = "";
      }
    });
    $("#sort").addEventListener("change", function (e) {
      navigate({ sort: e.target.value === "file" ? null : e.target.value });
    });
    document.addEventListener("keydown", function (e) {
      if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) return;
      var t = e.target;
      if (t && (t.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName))) return;
      if (e.key === "Escape") {
        if (closeOverlay()) e.preventDefault();
        else if (!$("#sample-view").hidden) {
          e.preventDefault();
          closeSample();
        }
        return;
      }
      if (!$("#overlay").hidden) return;
      if (e.key === "j" || e.key === "ArrowDown") {
        e.preventDefault();
        moveSelection(1);
      } else if (e.key === "k" || e.key === "ArrowUp") {
        e.preventDefault();
        moveSelection(-1);
      } else if (e.key === "Enter") {
        if (t && t.closest && t.closest("button, a, summary, [tabindex]")) return; // the control's own action
        if (view.units.length) {
          e.preventDefault();
          openUnit(view.sel < 0 ? 0 : view.sel, false);
        }
      }
    });
    window.addEventListener("hashchange", route);
  }

  function start() {
    wire();
    setStatus("loading index.js\u2026");
    load("index", "index.js").then(function (index) {
      prepareIndex(index);
      setStatus("");
      var n = CELLS.length;
      $("#index-summary").textContent = n + " cells \u00b7 " + INDEX.model_order.length + " models \u00b7 " +
        Object.keys(INDEX.datasets).length + " benchmarks \u00b7 " + Object.keys(INDEX.conditions).length + " conditions";
      route();
    }, function (e) {
      setStatus("The explorer has no data: " + e.message + ". Build it with vlmrobust explorer-index (snakemake explorer).", true);
    });
  }

  window.addEventListener("error", function (e) { reportError(e.error || e.message); });
  window.addEventListener("unhandledrejection", function (e) { reportError(e.reason); });

  // exposed for tests: the hashing and the number format the data builders must match
  window.EXPLORER_APP = Object.freeze({ chunkOf: chunkOf, fnv1a: fnv1a, fmtPct: fmtPct, fmtSignedPct: fmtSignedPct });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
