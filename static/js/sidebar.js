// The sidebar's search and the manage page's "select all". htmx fetches the results as the
// person types (see the input's hx-* attributes); this file adds the keyboard: "/" focuses the
// search, the arrow keys move through the results, Enter opens one, Escape clears.
(function () {
  "use strict";

  function byId(id) { return document.getElementById(id); }
  function input() { return byId("chat-search-input"); }
  function results() { return byId("chat-search-results"); }
  function hits() { var box = results(); return box ? Array.prototype.slice.call(box.querySelectorAll("a[data-search-hit]")) : []; }

  function isTyping(el) {
    if (!el || el === document.body) return false;
    var tag = el.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || el.isContentEditable;
  }

  // Results replace the chat list while there is a query; an empty box brings the list back.
  function showResults(on) {
    var box = results();
    if (!box) return;
    box.hidden = !on;
    var sidebar = byId("sidebar");
    if (sidebar) sidebar.classList.toggle("is-searching", on);
  }
  function clearSearch() {
    var el = input();
    if (!el) return;
    el.value = "";
    results().innerHTML = "";
    var status = byId("chat-search-status");
    if (status) status.textContent = "";
    showResults(false);
  }

  function move(from, step) {
    var list = hits();
    var at = list.indexOf(from);
    var next = at + step;
    if (next < 0) { input().focus(); return; }
    if (next >= list.length) next = list.length - 1;
    if (list[next]) list[next].focus();
  }

  document.addEventListener("keydown", function (e) {
    var el = input();
    if (!el) return;
    if (e.key === "/" && !e.ctrlKey && !e.metaKey && !e.altKey && !isTyping(e.target)) {
      e.preventDefault();
      document.body.classList.add("sidebar-open"); // phones: the search lives in the drawer
      el.focus();
      el.select();
      return;
    }
    if (e.target === el) {
      if (e.key === "ArrowDown") {
        var first = hits()[0];
        if (first) { e.preventDefault(); first.focus(); }
      } else if (e.key === "Enter" && !e.isComposing) {
        // Enter opens the first result; with none yet, the form goes to the results page.
        var top = hits()[0];
        if (top && !results().hidden) { e.preventDefault(); top.click(); }
      } else if (e.key === "Escape") {
        // The chat's own Escape (stop a running answer) is not for a key typed in the search.
        e.stopPropagation();
        if (el.value) { e.preventDefault(); clearSearch(); } else { el.blur(); }
      }
      return;
    }
    var hit = e.target.closest && e.target.closest("#chat-search-results a[data-search-hit]");
    if (!hit) return;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      e.preventDefault();
      move(hit, e.key === "ArrowDown" ? 1 : -1);
    } else if (e.key === "Home" || e.key === "End") {
      e.preventDefault();
      var list = hits();
      list[e.key === "Home" ? 0 : list.length - 1].focus();
    } else if (e.key === "Escape") {
      e.preventDefault();
      e.stopPropagation();
      el.focus();
    }
  }, true);

  document.addEventListener("input", function (e) {
    // No request for an empty box: the chat list comes back at once.
    if (e.target === input() && !e.target.value.trim()) clearSearch();
  });
  document.addEventListener("htmx:beforeRequest", function (e) {
    var el = input();
    if (e.detail.elt === el && !el.value.trim()) e.preventDefault();
  });
  document.addEventListener("htmx:afterSwap", function (e) {
    // The input's requests queue (hx-sync "queue last") rather than abort one another: htmx
    // reports every aborted request as a console error. So an answer can come for a query the
    // person has since cleared; it is not shown.
    if (e.detail.target && e.detail.target.id === "chat-search-results") {
      var on = !!input().value.trim();
      if (!on) e.detail.target.innerHTML = "";
      showResults(on);
    }
  });

  // Manage page: one box selects or clears every chat on the page.
  document.addEventListener("change", function (e) {
    var all = e.target.closest && e.target.closest("input[data-select-all]");
    var form = e.target.form;
    if (!form) return;
    var boxes = form.querySelectorAll('input[type="checkbox"][name="chats"]');
    if (all) {
      boxes.forEach(function (b) { b.checked = all.checked; });
      return;
    }
    var master = form.querySelector("input[data-select-all]");
    if (master && e.target.name === "chats") {
      var on = Array.prototype.filter.call(boxes, function (b) { return b.checked; }).length;
      master.checked = on === boxes.length;
      master.indeterminate = on > 0 && on < boxes.length;
    }
  });
})();
