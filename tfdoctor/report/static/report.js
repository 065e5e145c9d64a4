/* tfdoctor report page: draws the plotly figures, fetches the timeline (server mode), lets a
   finding highlight its time ranges on the timeline, polls progress while a run is going. */
(function () {
  "use strict";
  var dataEl = document.getElementById("tfd-data");
  var DATA = dataEl ? JSON.parse(dataEl.textContent) : { figures: {} };
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d", "autoScale2d"] };
  var timelineBaseShapes = null;

  function plot(el, fig) {
    if (!window.Plotly || !fig) return;
    window.Plotly.newPlot(el, fig.data, fig.layout, CONFIG).then(function () {
      el.setAttribute("data-rendered", "1");
      if (el.id === "chart-timeline") timelineBaseShapes = (fig.layout.shapes || []).slice();
    });
  }

  function drawFigures() {
    var els = document.querySelectorAll("[data-fig]");
    for (var i = 0; i < els.length; i++) {
      var key = els[i].getAttribute("data-fig");
      plot(els[i], DATA.figures[key]);
    }
  }

  function loadTimeline() {
    var el = document.getElementById("chart-timeline");
    if (!el || !el.getAttribute("data-url")) return;
    fetch(el.getAttribute("data-url"), { headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) throw new Error("HTTP " + r.status); return r.json(); })
      .then(function (res) {
        var note = document.getElementById("timeline-note");
        if (note) note.textContent = res.note || "";
        if (!res.figure) { el.innerHTML = ""; var p = document.createElement("p"); p.className = "empty"; p.textContent = res.note || "No timeline."; el.appendChild(p); return; }
        el.innerHTML = "";
        plot(el, res.figure);
      })
      .catch(function (e) { el.innerHTML = ""; var p = document.createElement("p"); p.className = "empty"; p.textContent = "Could not load the timeline (" + e.message + ")."; el.appendChild(p); });
  }

  function highlightRanges(ranges) {
    var el = document.getElementById("chart-timeline");
    if (!el || !window.Plotly || !timelineBaseShapes) return false;
    var shapes = timelineBaseShapes.slice();
    for (var i = 0; i < ranges.length; i++) {
      shapes.push({ type: "rect", xref: "x", yref: "paper", x0: ranges[i][0], x1: ranges[i][1], y0: 0, y1: 1,
        fillcolor: "rgba(232,97,90,0.18)", line: { width: 1, color: "rgba(232,97,90,0.8)" }, layer: "above", name: "evidence" });
    }
    window.Plotly.relayout(el, { shapes: shapes });
    el.setAttribute("data-highlighted", String(ranges.length));
    return true;
  }

  function wireFindings() {
    var cards = document.querySelectorAll("details.finding");
    for (var i = 0; i < cards.length; i++) {
      (function (card) {
        card.addEventListener("toggle", function () {
          if (!card.open) return;
          if (history.replaceState) history.replaceState(null, "", "#" + card.id);
          card.scrollIntoView({ block: "nearest", behavior: "smooth" });
          var ranges = JSON.parse(card.getAttribute("data-ranges") || "[]");
          if (ranges.length) highlightRanges(ranges);
        });
        var btn = card.querySelector(".show-on-timeline");
        if (btn) btn.addEventListener("click", function () {
          var ranges = JSON.parse(card.getAttribute("data-ranges") || "[]");
          if (highlightRanges(ranges)) document.getElementById("sec-timeline").scrollIntoView({ behavior: "smooth" });
        });
      })(cards[i]);
    }
    // a link to #finding-... opens that card
    function openFromHash() {
      var id = decodeURIComponent((location.hash || "").slice(1));
      var el = id && document.getElementById(id);
      if (el && el.tagName === "DETAILS") { el.open = true; el.classList.add("flash"); setTimeout(function () { el.classList.remove("flash"); }, 1200); }
    }
    window.addEventListener("hashchange", openFromHash);
    openFromHash();
  }

  function wireCopy() {
    var btns = document.querySelectorAll("button.copy");
    for (var i = 0; i < btns.length; i++) {
      btns[i].addEventListener("click", function (ev) {
        var b = ev.currentTarget, src = document.getElementById(b.getAttribute("data-copy"));
        if (!src) return;
        var text = src.textContent;
        var done = function () { b.textContent = "Copied"; setTimeout(function () { b.textContent = "Copy"; }, 1400); };
        if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(done, done);
        else done();
      });
    }
  }

  function fmtMs(v) { return v == null ? "–" : (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " ms"; }

  function pollProgress() {
    if (!DATA.live || !DATA.progress_url) return;
    var delay = 1000;
    function tick() {
      fetch(DATA.progress_url, { headers: { Accept: "application/json" }, cache: "no-store" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (p) {
          if (!p) return;
          var set = function (id, v) { var e = document.getElementById(id); if (e) e.textContent = v; };
          set("live-steps", String(p.steps_done));
          set("live-last", fmtMs(p.last_step_ms));
          set("live-median", fmtMs(p.median_step_ms));
          set("live-loss", p.last_loss == null ? "–" : p.last_loss.toPrecision(4));
          set("live-phase", p.phase || "");
          var fill = document.getElementById("live-bar-fill");
          if (fill && p.fraction != null) fill.style.width = Math.round(100 * p.fraction) + "%";
          var st = document.getElementById("run-status");
          if (p.status !== "running") {
            if (st) st.textContent = p.status;
            if (p.has_report) { location.reload(); return; }
          }
          delay = Math.min(delay * 1.15, 3000);
          setTimeout(tick, delay);
        })
        .catch(function () { setTimeout(tick, 3000); });
    }
    tick();
  }

  function autoRefreshList() {
    // runs list: refresh while a run is going
    if (document.body.classList.contains("page-runs") && document.querySelector(".status-running")) {
      setTimeout(function () { location.reload(); }, 4000);
    }
  }

  function init() {
    drawFigures();
    loadTimeline();
    wireFindings();
    wireCopy();
    pollProgress();
    autoRefreshList();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
