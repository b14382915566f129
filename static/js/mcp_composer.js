// The composer's MCP controls. Typing "/" at the start of the message opens the listbox of the
// chat's servers' prompts (arrows move, Enter chooses, Escape closes; the textarea keeps focus
// and points at the active option with aria-activedescendant); choosing one shows its argument
// form, whose fields ask the server for suggestions as you type. The database button opens the
// resource picker. Every fragment is rendered by the server (escaped there); files the server
// stored become the attachment tray's chips. On the home page (no chat yet) the controls offer
// the servers of the chat it would create; a prompt with answered messages creates that chat and
// the page continues there, its last question and files carried over for the composer.
(function () {
  "use strict";

  var SUGGEST_MS = 250;
  var MENU_MS = 120;
  var menuTimer = null;
  var menuSeq = 0;
  var suggestTimers = new WeakMap();

  function byId(id) { return document.getElementById(id); }
  function root() { return byId("mcp-composer"); }
  function input() { return byId("composer-input"); }
  function panel() { return byId("mcp-panel"); }
  function csrf() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }
  function alertBox(text) {
    var box = byId("mcp-alert");
    if (!box) return;
    box.textContent = text || "";
    box.hidden = !text;
  }
  function get(url) {
    return fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true" } }).then(function (r) {
      return r.text().then(function (text) {
        if (!r.ok) throw new Error(text && text.length < 300 ? text : "The server answered " + r.status + ".");
        return text;
      });
    });
  }
  function post(url, form) {
    var data = new FormData(form);
    var settings = byId("settings-form");
    // The chat a prompt creates gets the model and settings the home page shows, as a first
    // message's chat does (the composer sends the same form along).
    if (root().hasAttribute("data-new-chat") && settings && form.id === "mcp-prompt-form") {
      new FormData(settings).forEach(function (value, key) { data.append(key, value); });
    }
    return fetch(url, {
      method: "POST", credentials: "same-origin", body: data,
      headers: { "X-CSRFToken": csrf() }
    }).then(function (r) {
      return r.json().catch(function () { return { error: "The server answered " + r.status + "." }; })
        .then(function (body) { body._status = r.status; return body; });
    });
  }

  // --- the panel (menu, prompt form, resource picker) ---------------------------------------------
  var panelKind = "";
  function showPanel(html, kind) {
    var p = panel();
    p.innerHTML = html;  // a server-rendered fragment (every server value escaped there)
    p.hidden = false;
    panelKind = kind;
    var button = byId("mcp-resources-btn");
    if (button) button.setAttribute("aria-expanded", kind === "picker" ? "true" : "false");
  }
  function closePanel(focusInput) {
    var p = panel();
    if (!p) return;
    p.hidden = true;
    p.textContent = "";
    panelKind = "";
    var el = input();
    if (el) { el.removeAttribute("aria-activedescendant"); el.removeAttribute("aria-controls"); }
    var button = byId("mcp-resources-btn");
    if (button) button.setAttribute("aria-expanded", "false");
    if (focusInput && el) el.focus();
  }

  // --- the "/" menu -------------------------------------------------------------------------------
  function slashQuery() {
    var el = input();
    var m = el ? /^\/(\S*)$/.exec(el.value) : null;
    return m ? m[1] : null;
  }
  function options() {
    return Array.prototype.slice.call(panel().querySelectorAll('[role="option"]:not([aria-disabled="true"])'));
  }
  function activate(index) {
    var all = options();
    var el = input();
    all.forEach(function (o, i) { o.setAttribute("aria-selected", i === index ? "true" : "false"); });
    if (index >= 0 && all[index]) {
      el.setAttribute("aria-activedescendant", all[index].id);
      all[index].scrollIntoView({ block: "nearest" });
    } else {
      el.removeAttribute("aria-activedescendant");
    }
  }
  function activeIndex() {
    return options().findIndex(function (o) { return o.getAttribute("aria-selected") === "true"; });
  }
  function refreshMenu() {
    var q = slashQuery();
    if (q === null) { if (panelKind === "menu") closePanel(false); return; }
    var seq = ++menuSeq;
    get(root().dataset.menuUrl + "?q=" + encodeURIComponent(q)).then(function (html) {
      if (seq !== menuSeq || slashQuery() === null) return;
      showPanel(html, "menu");
      input().setAttribute("aria-controls", "mcp-prompt-list");
      activate(options().length ? 0 : -1);
      var count = options().length;
      var status = byId("attach-status");
      if (status) status.textContent = count === 1 ? "1 prompt" : count + " prompts";
    }).catch(function (err) { alertBox(err.message); });
  }
  function choose(option) {
    if (!option) return;
    alertBox("");
    get(option.dataset.formUrl).then(function (html) {
      showPanel(html, "form");
      input().removeAttribute("aria-activedescendant");
      input().removeAttribute("aria-controls");
      var first = panel().querySelector("input[data-argument]") || panel().querySelector("[data-testid=mcp-prompt-insert]");
      if (first) first.focus();
    }).catch(function (err) { alertBox(err.message); });
  }

  document.addEventListener("input", function (e) {
    if (!root()) return;
    if (e.target === input()) {
      clearTimeout(menuTimer);
      if (slashQuery() === null) { if (panelKind === "menu") closePanel(false); return; }
      menuTimer = setTimeout(refreshMenu, MENU_MS);
      return;
    }
    var field = e.target.closest && e.target.closest("#mcp-panel input[data-argument]");
    if (field) {
      clearTimeout(suggestTimers.get(field));
      suggestTimers.set(field, setTimeout(function () { suggest(field); }, SUGGEST_MS));
    }
  });

  // The textarea is the menu's text box: it says it completes from a list it controls.
  document.addEventListener("DOMContentLoaded", function () {
    if (root() && input()) input().setAttribute("aria-autocomplete", "list");
    restore();
  });

  // A prompt inserted on the home page created a chat: its unanswered question and files wait in
  // this tab's storage for the chat's page (only that chat's, only once).
  var CARRY = "tessera.mcp.carry";
  function carry(body) {
    // The chips already on the composer go along with the prompt's own, as they stay in a chat.
    var files = (window.TesseraAttach && window.TesseraAttach.stored ? window.TesseraAttach.stored() : []).concat(body.files || []);
    try {
      sessionStorage.setItem(CARRY, JSON.stringify({ url: body.redirect, draft: body.draft || "", files: files }));
    } catch (e) { /* storage refused: the chat still has the prompt's exchanges */ }
  }
  function restore() {
    var saved = null;
    try { saved = JSON.parse(sessionStorage.getItem(CARRY) || "null"); sessionStorage.removeItem(CARRY); }
    catch (e) { return; }
    if (!saved || saved.url !== window.location.pathname || !input()) return;
    var el = input();
    el.value = typeof saved.draft === "string" ? saved.draft : "";
    el.dispatchEvent(new Event("input", { bubbles: true }));
    addFiles(Array.isArray(saved.files) ? saved.files : []);
    el.focus();
  }

  // Capture: before the composer's own Enter (send) and Escape (stop) handling.
  document.addEventListener("keydown", function (e) {
    if (!root() || panel().hidden) return;
    if (panelKind === "menu" && e.target === input()) {
      var count = options().length;
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        if (!count) return;
        var at = activeIndex();
        activate(e.key === "ArrowDown" ? (at + 1) % count : (at - 1 + count) % count);
      } else if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
        // No prompt matches: the text is a message like any other, and Enter sends it.
        if (!count) { closePanel(false); return; }
        e.preventDefault();
        e.stopImmediatePropagation();
        var all = options();
        choose(all[Math.max(0, activeIndex())]);
      } else if (e.key === "Escape") {
        e.preventDefault();
        e.stopImmediatePropagation();
        closePanel(true);
      }
      return;
    }
    var outside = e.target === document.body || e.target === byId("mcp-resources-btn");
    if (e.key === "Escape" && (panel().contains(e.target) || outside)) {
      e.preventDefault();
      e.stopImmediatePropagation();
      var back = panelKind === "picker" ? byId("mcp-resources-btn") : null;
      closePanel(!back);
      if (back) back.focus();
    }
  }, true);

  document.addEventListener("click", function (e) {
    if (!root()) return;
    var option = e.target.closest && e.target.closest('#mcp-panel [role="option"]:not([aria-disabled="true"])');
    if (option) { choose(option); return; }
    if (e.target.closest && e.target.closest("#mcp-panel [data-mcp-close]")) { closePanel(true); return; }
    if (e.target.closest && e.target.closest("#mcp-resources-btn")) {
      if (panelKind === "picker") { closePanel(false); return; }
      alertBox("");
      get(root().dataset.pickerUrl).then(function (html) {
        showPanel(html, "picker");
        var first = panel().querySelector("button, input");
        if (first) first.focus();
      }).catch(function (err) { alertBox(err.message); });
    }
  });

  // --- suggestions (completion/complete) ------------------------------------------------------------
  function suggest(field) {
    var form = field.form;
    if (!form || !form.dataset.completeUrl) return;
    var params = new URLSearchParams();
    params.set(form.dataset.completeKey, form.dataset.completeRef);
    params.set("argument", field.dataset.argument);
    params.set("value", field.value);
    Array.prototype.forEach.call(form.querySelectorAll("input[data-argument]"), function (other) {
      if (other !== field && other.value) params.set("ctx." + other.dataset.argument, other.value);
    });
    get(form.dataset.completeUrl + "?" + params.toString()).then(function (html) {
      var list = field.list;
      if (list) list.innerHTML = html;  // <option value="…"> only, escaped by the server
    }).catch(function () { /* suggestions are a help: none on failure */ });
  }

  // --- submitting: a prompt into the conversation, a resource onto the message --------------------
  function addFiles(files) {
    (files || []).forEach(function (f) { if (window.TesseraAttach) window.TesseraAttach.addStored(f); });
  }
  document.addEventListener("submit", function (e) {
    var form = e.target;
    if (!root() || !panel().contains(form)) return;
    e.preventDefault();
    var button = form.querySelector("[type=submit]");
    if (button) button.disabled = true;
    alertBox("");
    post(form.getAttribute("action"), form).then(function (body) {
      if (button) button.disabled = false;
      if (body.error) {
        alertBox(body.error);
        if (button && button.isConnected) button.focus();  // disabling it lost the focus
        if (body.form) {
          showPanel(body.form, "form");
          var bad = panel().querySelector("[aria-invalid=true]");
          if (bad) bad.focus();
        }
        return;
      }
      if (form.id === "mcp-prompt-form") {
        if (body.redirect) {
          carry(body);
          window.location.assign(body.redirect);
          return;
        }
        if (body.html) {
          var messages = byId("messages");
          var empty = messages && messages.querySelector(".empty-state");
          if (empty) empty.remove();
          messages.insertAdjacentHTML("beforeend", body.html);
          if (window.htmx) window.htmx.process(messages);
          messages.lastElementChild && messages.lastElementChild.scrollIntoView({ block: "end" });
        }
        var el = input();
        el.value = body.draft || "";
        el.dispatchEvent(new Event("input", { bubbles: true }));
        addFiles(body.files);
        closePanel(true);
      } else {
        addFiles(body.files);
        var status = byId("attach-status");
        if (status) status.textContent = (body.files || []).map(function (f) { return f.name; }).join(", ") + " attached.";
        closePanel(false);
        byId("mcp-resources-btn").focus();
      }
    }).catch(function (err) {
      if (button) button.disabled = false;
      alertBox(err.message || "The request failed: check your connection.");
    });
  });
})();
