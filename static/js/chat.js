// Tessera chat page behaviour. htmx does the requests and swaps; this file adds the keyboard,
// the running state, autoscroll, and the sequence check that keeps reconnects exact.
//
// Controls are found by id or data attribute, never by a class anywhere in the document: model
// and tool output can carry neither ids nor data attributes (chat/rendering.py), so it cannot
// pose as one of the page's controls.
(function () {
  "use strict";

  // --- State ----------------------------------------------------------------------------------
  var socket = null;
  var pinned = true; // follow new content unless the reader scrolled up
  var fromBottom = null; // where the reader was while earlier exchanges load above
  var lastHeard = {}; // turn id → when a fragment of it last arrived
  var STALL_MS = 8000;
  var SEQ = /^<!--seq (\d+) (\d+)( full)?-->/;
  // A queued turn's state, sent before any worker has it (chat/turn_queue.py): no sequence number.
  var STATUS = /^<!--status (\d+)-->/;
  // An exchange no tab sent (a queued message its worker started, chat/pending.py).
  var EXCHANGE = /^<!--exchange (\d+)-->/;
  // DOM id prefixes, defined once on the server (chat/dom.py) and handed over on <body>.
  var TURN = document.body.dataset.domTurn || "turn-";
  var TURN_STATE = document.body.dataset.domTurnState || "turn-state-";
  // Turn states are found by their ids: model output can carry no id, so it cannot pose as one.
  var ACTIVE_STATES = '[id^="' + TURN_STATE + '"][data-turn-status="running"], [id^="' + TURN_STATE + '"][data-turn-status="queued"]';

  // Reconnect quickly after a dropped socket (the default backs off up to a minute); the sync
  // on connect makes a reconnect exact, so there is no reason to wait.
  if (window.htmx) {
    htmx.config.wsReconnectDelay = function (retry) { return Math.min(500 * Math.pow(2, retry), 8000); };
  }

  // --- Elements -------------------------------------------------------------------------------
  function byId(id) { return document.getElementById(id); }
  function popover() { return byId("toolsets-popover"); }
  function trigger() { return byId("tsp-trigger"); }
  function toolsForm() { return byId("toolsets-form"); }
  function scroller() { return byId("scroller"); }
  function input() { return byId("composer-input"); }
  function composer() { return byId("composer"); }
  function inside(id, el) { var root = byId(id); return !!root && root.contains(el); }

  // --- Toolsets popover -----------------------------------------------------------------------
  function setPopover(open) {
    var pop = popover(), btn = trigger();
    if (!pop || !btn) return;
    pop.hidden = !open;
    btn.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      var first = pop.querySelector("input:not([disabled]), button, a");
      if (first) first.focus();
    }
  }
  function toggleToolList(button) {
    var list = byId(button.getAttribute("aria-controls"));
    if (!list) return;
    var open = list.hidden;
    list.hidden = !open;
    button.setAttribute("aria-expanded", open ? "true" : "false");
  }
  // Checkbox indeterminate is a property, not an attribute: apply it after every render.
  function applyTriState() {
    var form = toolsForm();
    if (!form) return;
    form.querySelectorAll("input[data-toolset-check]").forEach(function (box) {
      box.indeterminate = box.hasAttribute("data-indeterminate");
    });
  }

  // --- Chat settings panel and theme ----------------------------------------------------------
  function toggleSettings() {
    var panel = byId("settings-panel");
    if (!panel) return;
    panel.hidden = !panel.hidden;
    document.querySelectorAll('[data-action="toggle-settings"]').forEach(function (b) {
      b.setAttribute("aria-expanded", panel.hidden ? "false" : "true");
    });
    document.body.classList.toggle("settings-open", !panel.hidden);
  }
  function currentTheme() {
    var t = document.documentElement.dataset.theme;
    if (t === "light" || t === "dark") return t;
    return window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }
  function toggleTheme() {
    var next = currentTheme() === "dark" ? "light" : "dark";
    document.documentElement.dataset.theme = next;
    try { localStorage.setItem("tessera-theme", next); } catch (err) { /* private mode */ }
  }
  var ACTIONS = {
    "toggle-theme": toggleTheme,
    "toggle-settings": toggleSettings,
    "open-sidebar": function () { document.body.classList.add("sidebar-open"); },
    "close-sidebar": function () { document.body.classList.remove("sidebar-open"); },
  };

  // --- Running state: Stop replaces Send while a turn runs ------------------------------------
  function isRunning() { return !!document.querySelector(ACTIVE_STATES); }
  function updateRunning() {
    var running = isRunning();
    document.body.classList.toggle("is-running", running);
    // Edit, regenerate and the versions switcher wait for the running answer (the server
    // refuses them meanwhile too).
    document.querySelectorAll("[data-while-idle]").forEach(function (b) { b.disabled = running; });
  }

  // --- Message actions: copy, edit, the regenerate menu -----------------------------------------
  function announce(text) {
    var box = byId("announce");
    if (!box) {
      box = document.createElement("div");
      box.id = "announce";
      box.className = "sr-only";
      box.setAttribute("role", "status");
      document.body.appendChild(box);
    }
    box.textContent = "";
    setTimeout(function () { box.textContent = text; }, 30);
  }
  function copied(button, ok) {
    button.dataset.copied = ok ? "Copied" : "Could not copy";
    announce(button.dataset.copied);
    clearTimeout(button._copiedTimer);
    button._copiedTimer = setTimeout(function () { delete button.dataset.copied; }, 1600);
  }
  function copyText(button, text) {
    navigator.clipboard.writeText(text).then(function () { copied(button, true); }, function () { copied(button, false); });
  }
  function copyFrom(button) {
    if (button.dataset.copyUrl) {
      // The answer's Markdown source, asked for on click (the page shows only its HTML).
      var body = fetch(button.dataset.copyUrl, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) throw new Error(r.status);
        return r.text();
      });
      if (window.ClipboardItem && navigator.clipboard.write) {
        // The clipboard write starts within the click; its content arrives when fetched.
        var item = new ClipboardItem({ "text/plain": body.then(function (t) { return new Blob([t], { type: "text/plain" }); }) });
        navigator.clipboard.write([item]).then(function () { copied(button, true); }, function () { copied(button, false); });
      } else {
        body.then(function (t) { copyText(button, t); }, function () { copied(button, false); });
      }
      return;
    }
    if (button.hasAttribute("data-copy-code")) {
      var block = button.closest("[data-code-block]");
      var code = block && block.querySelector("pre");
      copyText(button, code ? code.textContent.replace(/\n$/, "") : "");
      return;
    }
    var source = document.querySelector(button.dataset.copy);
    if (source) copyText(button, source.value !== undefined ? source.value : source.textContent);
  }
  function setEditing(form, open) {
    var message = form.closest(".msg-user");
    form.hidden = !open;
    message.classList.toggle("is-editing", open);
    var toggle = message.querySelector("[data-edit]");
    if (toggle) toggle.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) {
      var area = form.querySelector("textarea");
      area.focus();
      area.setSelectionRange(area.value.length, area.value.length);
    } else if (toggle) {
      form.reset();
      toggle.focus();
    }
  }
  function openMenu() { return document.querySelector("[data-menu][aria-expanded=\"true\"]"); }
  function setMenu(button, open) {
    var menu = byId(button.dataset.menu);
    if (!menu) return;
    menu.hidden = !open;
    button.setAttribute("aria-expanded", open ? "true" : "false");
    if (open) { var first = menu.querySelector("button:not([disabled])"); if (first) first.focus(); }
  }
  // Esc closes what is open, innermost first; true if it closed something.
  function closeOpen() {
    var menu = openMenu();
    if (menu) { setMenu(menu, false); menu.focus(); return true; }
    var details = document.querySelector("details.chat-menu[open]");
    if (details) { details.open = false; details.querySelector("summary").focus(); return true; }
    var panel = byId("settings-panel");
    if (panel && !panel.hidden) {
      toggleSettings();
      var settingsButton = byId("settings-trigger");
      if (settingsButton) settingsButton.focus();
      return true;
    }
    return false;
  }

  // --- Autoscroll -----------------------------------------------------------------------------
  function scrollToBottom() {
    var s = scroller();
    if (s) s.scrollTop = s.scrollHeight;
  }

  // --- Socket -----------------------------------------------------------------------------------
  function requestSync(turnId) {
    if (socket) socket.send(JSON.stringify({ type: "sync", turn: turnId }), document.querySelector("main.chat[ws-connect]"));
  }

  // --- Composer ---------------------------------------------------------------------------------
  function autosize() {
    var el = input();
    if (!el) return;
    el.style.height = "auto";
    el.style.height = Math.min(el.scrollHeight, 240) + "px";
  }
  function showError(text) {
    var box = byId("composer-error");
    if (!box) return;
    box.textContent = text || "";
    box.hidden = !text;
  }
  function suggest(button) {
    input().value = button.dataset.suggest;
    autosize();
    composer().requestSubmit();
  }

  // --- Question cards: a tool call waits for the person's answer ------------------------------
  // Any kind (an approval: Approve / Deny; an MCP server's question: Accept / Decline / Cancel,
  // Done for a page to open) is one box with one form and one answer URL: a POST checked against
  // the chat's owner and, for a server's form, its schema (errors come back per field). The
  // card's new state arrives over the socket, in every open tab. Found by their data attributes
  // and the box's own id, which model and tool output cannot carry.
  var QUESTIONS = "/questions/";
  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; } catch (err) { return ""; }
  }
  function answerQuestion(form, button) {
    var box = form && form.closest("[data-question]");
    if (!box || box.id !== box.dataset.kind + "-" + box.dataset.question) return;
    var url = box.dataset.questionUrl || "";
    if (url.indexOf(QUESTIONS) !== 0) return;
    if (!button) {
      // Enter in a field: a server's form is sent (Accept); an approval's reason answers nothing.
      if (box.dataset.kind !== "elicitation") return;
      button = form.querySelector('button[data-question-action][value="accept"]');
      if (!button) return;
    }
    var body = new URLSearchParams();
    if (box.dataset.kind === "approval" || button.value === "accept") {
      new FormData(form).forEach(function (value, key) { body.append(key, value); });
    }
    body.set(button.name, button.value);
    var buttons = form.querySelectorAll("button[data-question-action]");
    var message = box.querySelector("[data-question-error]");
    function showErrors(errors) {
      box.querySelectorAll("[data-elicitation-error]").forEach(function (p) {
        var text = errors[p.dataset.elicitationError] || "";
        p.textContent = text; p.hidden = !text;
        var field = form.querySelector('[data-field="' + p.dataset.elicitationError + '"]');
        if (!field) return;
        field.querySelectorAll("input, select").forEach(function (input) {
          if (text) {
            input.setAttribute("aria-invalid", "true");
            var described = (input.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
            if (described.indexOf(p.id) < 0) described.push(p.id);
            input.setAttribute("aria-describedby", described.join(" "));
          } else input.removeAttribute("aria-invalid");
        });
      });
    }
    function settle(text, failed, errors) {
      box.removeAttribute("aria-busy");
      buttons.forEach(function (b) { b.disabled = !failed; });
      showErrors(errors || {});
      if (message) { message.textContent = text; message.hidden = !text; }
      if (failed) {
        var invalid = form.querySelector('[aria-invalid="true"]');
        (invalid || button).focus();
      }
    }
    buttons.forEach(function (b) { b.disabled = true; });
    box.setAttribute("aria-busy", "true");
    fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-CSRFToken": csrfToken(), "Content-Type": "application/x-www-form-urlencoded" },
      body: body.toString(),
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (data) {
        if (response.ok) {
          settle("", false);
          var status = box.querySelector("[data-question-status]");
          if (status) status.textContent = data.message || "Answer sent.";
          return;
        }
        settle(data.message || "Could not send your answer. Try again.", true, data.errors);
      });
    }).catch(function () {
      settle("Could not reach Tessera. Check your connection and try again.", true);
    });
  }

  // --- The one click listener -------------------------------------------------------------------
  document.addEventListener("click", function (e) {
    var target = e.target;
    if (target.closest("#tsp-trigger")) {
      setPopover(popover().hidden);
      return;
    }
    var pop = popover();
    if (pop && !pop.hidden && !target.closest("#tsp")) setPopover(false);

    var expand = inside("toolsets-form", target) && target.closest("button[data-expand]");
    if (expand) { toggleToolList(expand); return; }

    // A tool card the reader opened or closed stays that way when the card is updated.
    var summary = target.closest("details[data-tool-card] > summary");
    if (summary) { summary.parentElement.dataset.userToggled = "1"; return; }

    var suggestion = inside("empty-state", target) && target.closest("button[data-suggest]");
    if (suggestion) { suggest(suggestion); return; }

    // Message actions live in the page's own markup (ids and data attributes model output
    // cannot carry), so a control inside an answer cannot pose as one of them.
    var shown = openMenu();
    var menuButton = target.closest("[data-menu]");
    if (shown && shown !== menuButton && !(byId(shown.dataset.menu) || document.body).contains(target)) setMenu(shown, false);
    if (menuButton) { setMenu(menuButton, menuButton.getAttribute("aria-expanded") !== "true"); return; }
    var copyButton = target.closest("[data-copy], [data-copy-url], [data-copy-code]");
    if (copyButton && inside("messages", copyButton)) { copyFrom(copyButton); return; }
    var edit = target.closest("[data-edit]");
    if (edit && !edit.disabled) { var form = byId(edit.dataset.edit); if (form) setEditing(form, form.hidden); return; }
    var cancel = target.closest("[data-edit-cancel]");
    if (cancel) { setEditing(cancel.closest("[data-edit-form]"), false); return; }

    // A question's button that does not submit its form (an approval's: Approve, Deny).
    var answer = target.closest('button[data-question-action][type="button"]');
    if (answer) { answerQuestion(answer.form, answer); return; }

    var action = target.closest("[data-action]");
    if (action && ACTIONS[action.dataset.action]) ACTIONS[action.dataset.action]();
  });

  // Capture phase: runs before htmx sends the form, so the tool boxes already reflect a click on
  // the toolset's box (checked or mixed → all on; unchecked → all off).
  document.addEventListener("change", function (e) {
    var box = e.target;
    if (!inside("toolsets-form", box) || !box.hasAttribute("data-toolset-check")) return;
    box.closest("[data-toolset]").querySelectorAll('input[name="tools"]:not([disabled])').forEach(function (t) {
      t.checked = box.checked;
    });
  }, true);

  document.addEventListener("scroll", function (e) {
    var s = scroller();
    if (e.target === s) pinned = s.scrollHeight - s.scrollTop - s.clientHeight < 80;
  }, true);

  document.addEventListener("input", function (e) {
    if (e.target === input()) autosize();
  });

  document.addEventListener("keydown", function (e) {
    var el = input();
    if ((e.ctrlKey || e.metaKey) && e.shiftKey && !e.altKey && (e.key === "O" || e.key === "o")) {
      // A new chat from anywhere on the page.
      var link = byId("new-chat");
      if (link) { e.preventDefault(); window.location.assign(link.href); }
      return;
    }
    if (e.key === "Escape" && popover() && !popover().hidden) {
      e.preventDefault();
      setPopover(false);
      trigger().focus();
      return;
    }
    var editForm = e.target.closest && e.target.closest("[data-edit-form]");
    if (editForm && e.key === "Escape") { e.preventDefault(); setEditing(editForm, false); return; }
    if (editForm && e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (!isRunning() && e.target.value.trim()) editForm.requestSubmit();
      return;
    }
    if (e.key === "Escape" && closeOpen()) { e.preventDefault(); return; }
    if (e.key === "Escape" && isRunning()) {
      // One click: htmx sends the Stop request from the button's own click handler.
      var stop = byId("stop-btn");
      if (stop) { e.preventDefault(); stop.click(); }
      return;
    }
    if (e.target === el && e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (!el.value.trim()) return;
      // While an answer runs, Enter queues the message (the server decides) and Ctrl+Enter
      // hands it to the running agent (Steer).
      var steerButton = byId("steer-btn");
      if ((e.ctrlKey || e.metaKey) && isRunning() && steerButton) steerButton.click();
      else composer().requestSubmit();
    }
  });

  document.addEventListener("submit", function (e) {
    if (e.target.id === "composer" && !input().value.trim()) e.preventDefault();
    var question = e.target.closest && e.target.closest("form[data-question-form]");
    if (question) {
      e.preventDefault();
      var submitter = e.submitter && e.submitter.matches("button[data-question-action]") ? e.submitter : null;
      answerQuestion(question, submitter);
    }
  }, true);

  // --- htmx events ------------------------------------------------------------------------------
  // A change of branch (another version, an edit, a regenerated answer) re-renders the messages:
  // the versions switcher of the changed exchange lands where the clicked control was.
  var branchAnchor = null;
  document.addEventListener("htmx:beforeRequest", function (e) {
    var elt = e.detail.elt;
    if (elt && (elt.id === "composer" || elt.id === "steer-btn")) elt.dataset.sentText = input().value;
    if (elt && elt.getAttribute && elt.getAttribute("hx-target") === "#messages" && inside("messages", elt)) {
      branchAnchor = elt.getBoundingClientRect().top;
    }
  });
  document.addEventListener("tessera:branch", function (e) {
    var target = byId(e.detail && e.detail.focus);
    var s = scroller();
    if (!target || !s) return;
    if (branchAnchor !== null) s.scrollTop += target.getBoundingClientRect().top - branchAnchor;
    else target.scrollIntoView({ block: "nearest" });
    branchAnchor = null;
    var active = document.activeElement;
    if (!active || active === document.body) {
      var next = target.querySelector("button:not([disabled])");
      if (next) next.focus({ preventScroll: true });
    }
  });

  // Earlier exchanges go in above what the reader is looking at: keep that where it was.
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (e.detail.target && e.detail.target.id === "earlier") {
      var s = scroller();
      fromBottom = s.scrollHeight - s.scrollTop;
    }
  });
  document.addEventListener("htmx:afterSwap", function (e) {
    if (fromBottom !== null) {
      var s = scroller();
      s.scrollTop = s.scrollHeight - fromBottom;
      fromBottom = null;
    }
    if (e.detail.target && e.detail.target.id === "messages") {
      // A new turn arrived from the POST: ask the socket for its state in case the worker was
      // faster than this response.
      e.detail.target.querySelectorAll('section[data-turn][data-seq="0"]').forEach(function (t) {
        requestSync(t.dataset.turn);
      });
      pinned = true;
      scrollToBottom();
    }
    updateRunning();
  });

  // Tool cards: open while calling, closed when done, unless the reader opened or closed it.
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var old = e.detail.target;
    if (old && old.id === "pending-box") {
      // The waiting messages come from the web and worker processes, which may overtake each
      // other: a rendering no newer than the one shown is dropped (chat/pending.py).
      var box = e.detail.fragment && (e.detail.fragment.firstElementChild || e.detail.fragment);
      var was = parseInt(old.dataset.version || "0", 10);
      var now = parseInt((box && box.dataset && box.dataset.version) || "0", 10);
      if (was && now && now <= was) e.preventDefault();
      return;
    }
    if (!old || !old.hasAttribute || !old.hasAttribute("data-tool-card") || !old.dataset.userToggled) return;
    var fresh = e.detail.fragment && (e.detail.fragment.firstElementChild || e.detail.fragment);
    if (!fresh || !fresh.hasAttribute || !fresh.hasAttribute("data-tool-card")) return;
    fresh.dataset.userToggled = "1";
    if (old.open) fresh.setAttribute("open", ""); else fresh.removeAttribute("open");
  });
  // Right after the swap (not only after settling), so the box never shows a stale state.
  document.addEventListener("htmx:oobAfterSwap", applyTriState);
  document.addEventListener("htmx:afterSettle", applyTriState);

  // Sequence check. Every socket message starts with <!--seq TURN N-->. The turn element
  // remembers the last N it applied: older or repeated fragments (possible right after a
  // reconnect) are dropped, and fragments for a turn the page does not show yet wait for the
  // sync that follows.
  document.addEventListener("htmx:wsBeforeMessage", function (e) {
    var added = EXCHANGE.exec(e.detail.message || "");
    if (added) {
      if (byId(TURN + added[1])) e.preventDefault();
      return;
    }
    var queued = STATUS.exec(e.detail.message || "");
    if (queued) {
      // Applied only while the page shows the turn and no worker has sent anything of it yet:
      // it may come before the Send's response has added the turn, or after the worker began.
      var shown = byId(TURN + queued[1]);
      if (!shown || parseInt(shown.dataset.seq || "0", 10) > 0) e.preventDefault();
      return;
    }
    var m = SEQ.exec(e.detail.message || "");
    if (!m) return;
    var turn = byId(TURN + m[1]);
    var seq = parseInt(m[2], 10);
    if (!turn) { e.preventDefault(); return; }
    var seen = parseInt(turn.dataset.seq || "0", 10);
    lastHeard[m[1]] = Date.now();
    if (seq <= seen) { e.preventDefault(); return; }
    if (seq > seen + 1 && !m[3]) {
      // A fragment went missing (e.g. the worker could not publish it, or it came before the
      // Send's response had added the turn, while the page showed nothing of it yet): the live
      // state in Redis is complete, so ask for it instead of applying this one on top of a gap.
      e.preventDefault();
      requestSync(m[1]);
      return;
    }
    turn.dataset.seq = String(seq);
  });
  document.addEventListener("htmx:wsAfterMessage", function (e) {
    var added = EXCHANGE.exec((e.detail && e.detail.message) || "");
    if (added) {
      // Its worker may have streamed before the exchange arrived: ask for the turn's state.
      requestSync(added[1]);
      var empty = byId("empty-state");
      if (empty) empty.remove();
      pinned = true;
    }
    updateRunning();
    if (pinned) scrollToBottom();
  });
  // A page has several sockets (the chat's, the user's for the bell, an automation's): each
  // says on its own element whether it is open; only the chat's carries syncs and the queue
  // (the user socket opening last must not take its place).
  function chatSocketElt(elt) { return elt && elt.matches && elt.matches("main.chat[ws-connect]"); }
  document.addEventListener("htmx:wsOpen", function (e) {
    if (e.target && e.target.dataset) e.target.dataset.ws = "open";
    if (!chatSocketElt(e.target)) return;
    socket = e.detail.socketWrapper;
    // Waiting messages shown here may have been sent or cancelled while the socket was down.
    var box = byId("pending-box");
    if (box && !box.hidden) socket.send(JSON.stringify({ type: "queue" }), e.target);
    document.body.dataset.ws = "open";
  });
  document.addEventListener("htmx:wsClose", function (e) {
    // 4xxx: the server refused this socket (signed out, or not yours); anything else reconnects.
    var code = e.detail && e.detail.event && e.detail.event.code;
    var state = code >= 4000 && code < 5000 ? "refused" : "reconnecting";
    if (e.target && e.target.dataset) e.target.dataset.ws = state;
    if (!chatSocketElt(e.target)) return;
    socket = null;
    document.body.dataset.ws = state;
  });

  document.addEventListener("htmx:afterRequest", function (e) {
    var elt = e.detail.elt;
    if (elt && elt.id !== "composer" && inside("messages", elt) && elt.getAttribute("hx-target") === "#messages") {
      var failed = e.detail.xhr;
      if (!e.detail.successful) {
        showError((failed && failed.status && failed.responseText && failed.responseText.length < 300) ? failed.responseText : "Could not do that. Check your connection and try again.");
      } else {
        showError("");
      }
      return;
    }
    if (!elt || (elt.id !== "composer" && elt.id !== "steer-btn")) return;
    if (e.detail.successful) {
      showError("");
      // Only the text that was sent: what the person typed since (the next message) stays.
      var sent = elt.dataset.sentText;
      if (sent === undefined || input().value === sent) input().value = "";
      autosize();
      var empty = byId("empty-state");
      if (empty) empty.remove();
    } else {
      var xhr = e.detail.xhr;
      showError((xhr && xhr.status && xhr.responseText && xhr.responseText.length < 300) ? xhr.responseText : "Could not send the message. Check your connection and try again.");
    }
  });
  document.addEventListener("htmx:sendError", function () {
    showError("Could not reach Tessera. Check your connection and try again.");
  });

  // A turn shown as running that has not been heard from for a while may have missed its last
  // fragments (say, published while this web process was reconnecting to Redis): ask for its
  // state. For a model that is only slow to answer, that is one small sync every few seconds.
  setInterval(function () {
    if (!socket) return;
    var now = Date.now();
    document.querySelectorAll(ACTIVE_STATES).forEach(function (state) {
      var id = state.id.slice(TURN_STATE.length);
      if (!byId(TURN + id)) return;
      if (lastHeard[id] === undefined) { lastHeard[id] = now; return; }
      if (now - lastHeard[id] > STALL_MS) { lastHeard[id] = now; requestSync(id); }
    });
  }, 2000);

  document.addEventListener("DOMContentLoaded", function () {
    updateRunning();
    applyTriState();
    // Reading the scroller's height lays out the whole chat. Here, in the DOMContentLoaded task
    // that also runs htmx's set-up of the page, it would make one long task of both; in the next
    // frame's callback it is the layout that frame does anyway, before it paints.
    requestAnimationFrame(scrollToBottom);
    var el = input();
    // An empty box already has its one-line height; sizing it would lay the page out again.
    if (el && el.value) autosize();
    if (el && window.matchMedia("(min-width: 700px)").matches) el.focus();
  });
})();
