// jobq dashboard: live overview (polls the server-rendered fragment), job selection, confirms.
// No framework and no build step; served from the package (works offline).
(function () {
  "use strict";
  var POLL_MS = 1500;

  function live() {
    var box = document.getElementById("live");
    if (!box) return;
    var url = box.getAttribute("data-live");
    var state = document.getElementById("live-state");
    var busy = false;
    function tick() {
      if (busy || document.hidden) return;
      busy = true;
      fetch(url, {credentials: "same-origin", headers: {"Accept": "text/html"}})
        .then(function (r) {
          if (!r.ok) throw new Error("HTTP " + r.status);
          return r.text();
        })
        .then(function (html) {
          box.innerHTML = html;  // server-rendered, autoescaped HTML of our own
          if (state) { state.textContent = "live"; state.className = "live-state"; }
        })
        .catch(function (e) {
          if (state) { state.textContent = "connection lost (" + e.message + "), retrying"; state.className = "live-state lost"; }
        })
        .then(function () { busy = false; });
    }
    setInterval(tick, POLL_MS);
  }

  function selection() {
    var all = document.getElementById("select-all");
    var count = document.getElementById("selected-count");
    function boxes() { return document.querySelectorAll('input[type=checkbox][name=ids]'); }
    function update() {
      var n = 0;
      boxes().forEach(function (b) { if (b.checked) n++; });
      if (count) count.textContent = n + " selected";
    }
    if (all) all.addEventListener("change", function () {
      boxes().forEach(function (b) { b.checked = all.checked; });
      update();
    });
    document.addEventListener("change", function (e) {
      if (e.target && e.target.name === "ids") update();
    });
    update();
  }

  function confirms() {
    document.addEventListener("click", function (e) {
      var t = e.target;
      if (t && t.getAttribute && t.getAttribute("data-confirm") && !window.confirm(t.getAttribute("data-confirm"))) {
        e.preventDefault();
      }
    });
  }

  function typeFilter() {
    var sel = document.getElementById("type-filter");
    if (sel) sel.addEventListener("change", function () { sel.form.submit(); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    live(); selection(); confirms(); typeFilter();
  });
})();
