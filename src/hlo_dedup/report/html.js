"use strict";
// Scripting only sorts, filters and expands: every fact is in the page without it.
(function () {
  var root = document.documentElement;
  root.classList.add("js");
  var all = function (selector, within) {
    return Array.prototype.slice.call((within || document).querySelectorAll(selector));
  };

  // Sorting: a click on a header with data-sort orders its table's rows by that column
  // (data-v holds a cell's number where its text is a rounded figure); again: reversed.
  var collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });
  function cellKey(row, index, numeric) {
    var cell = row.cells[index];
    if (!cell) return numeric ? NaN : "";
    if (numeric) return parseFloat(cell.getAttribute("data-v"));
    return cell.textContent.trim();
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0], index = th.cellIndex;
    var numeric = th.getAttribute("data-sort") === "num";
    var direction = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    all("th[aria-sort]", table).forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", direction > 0 ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows).map(function (row, i) {
      return { row: row, key: cellKey(row, index, numeric), i: i };
    });
    rows.sort(function (a, b) {
      var c;
      if (numeric) {
        var an = isNaN(a.key), bn = isNaN(b.key);
        c = an || bn ? (an === bn ? 0 : an ? 1 : -1) : (a.key - b.key) * direction;
      } else {
        c = collator.compare(a.key, b.key) * direction;
      }
      return c || a.i - b.i;
    });
    var fragment = document.createDocumentFragment();
    rows.forEach(function (r) { fragment.appendChild(r.row); });
    body.appendChild(fragment);
  }
  all("th[data-sort]").forEach(function (th) {
    th.tabIndex = 0;
    th.title = th.title || "sort";
    th.addEventListener("click", function () { sortBy(th); });
    th.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(th); }
    });
  });

  // Filtering: an item (a table row, a fold) matches when one of its .q parts holds the
  // query; sections without a match are hidden, those with one opened (and restored later).
  var toolbar = document.getElementById("toolbar");
  var search = document.getElementById("search");
  var count = document.getElementById("count");
  if (!toolbar || !search) return;
  toolbar.hidden = false;
  var items = all(".item").map(function (el) {
    var text = all(".q", el).map(function (q) { return q.textContent; }).join("\n").toLowerCase();
    return { el: el, text: text, row: el.tagName === "TR" };
  });
  var sections = all("details.section, details.sub");
  var rowsTotal = items.filter(function (it) { return it.row; }).length;
  function showCount(shown) {
    count.textContent = shown === rowsTotal ? rowsTotal + " instructions" : shown + " of " + rowsTotal + " instructions";
  }
  function applyFilter() {
    var query = search.value.trim().toLowerCase();
    var shown = 0;
    items.forEach(function (it) {
      var match = !query || it.text.indexOf(query) !== -1;
      it.el.hidden = !match;
      if (match && it.row) shown += 1;
    });
    sections.forEach(function (section) {
      if (!query) {
        section.hidden = false;
        if (section.hasAttribute("data-was-open")) {
          section.open = section.getAttribute("data-was-open") === "1";
          section.removeAttribute("data-was-open");
        }
        return;
      }
      if (!section.hasAttribute("data-was-open")) section.setAttribute("data-was-open", section.open ? "1" : "0");
      var inner = all(".item", section);
      var hit = inner.some(function (el) { return !el.hidden; });
      section.hidden = inner.length > 0 && !hit && !section.classList.contains("sub");
      if (hit) section.open = true;
    });
    showCount(shown);
  }
  search.addEventListener("input", applyFilter);
  document.addEventListener("keydown", function (e) {
    if (e.key === "/" && document.activeElement !== search) { e.preventDefault(); search.focus(); }
    if (e.key === "Escape" && document.activeElement === search) { search.value = ""; applyFilter(); }
  });
  showCount(rowsTotal);

  function openAll(open) { all("details").forEach(function (d) { d.open = open; }); }
  document.getElementById("expand").addEventListener("click", function () { openAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { openAll(false); });

  // A link to a row, a card or a change opens the sections around it.
  function reveal() {
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    for (var d = target.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    target.scrollIntoView({ block: "start" });
  }
  window.addEventListener("hashchange", reveal);
  reveal();

  // Printing shows everything; afterwards the page is as it was.
  var before = [];
  window.addEventListener("beforeprint", function () {
    before = all("details").map(function (d) { return [d, d.open]; });
    openAll(true);
  });
  window.addEventListener("afterprint", function () {
    before.forEach(function (pair) { pair[0].open = pair[1]; });
  });
})();
