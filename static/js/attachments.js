// Attaching files in the composer: the paperclip, drag and drop, and pasted images. Each file
// becomes a chip that uploads with a progress bar, then waits while the worker reads it; Send
// waits for every chip to settle. Everything shown is set as text, never as HTML.
(function () {
  "use strict";

  var POLL_MS = 600;
  var BADGES = { text: "TXT", markdown: "MD", csv: "CSV", json: "JSON", html: "HTML", pdf: "PDF", docx: "DOCX", image: "IMG" };
  var chips = [];          // {el, file, xhr, id, state: uploading|reading|ready|failed, error}
  var sendWhenReady = false;

  function byId(id) { return document.getElementById(id); }
  function tray() { return byId("attach-tray"); }
  function composer() { return byId("composer"); }
  function csrf() {
    try { return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; }
    catch (e) { return ""; }
  }
  function say(text) { var s = byId("attach-status"); if (s) s.textContent = text; }
  function showError(text) {
    var box = byId("composer-error");
    if (!box) return;
    box.textContent = text || "";
    box.hidden = !text;
  }
  function sizeLabel(n) {
    if (n < 1024) return n + " B";
    if (n < 1024 * 1024) return Math.round(n / 1024) + " KB";
    return (n / 1024 / 1024).toFixed(1) + " MB";
  }
  function extLabel(name) {
    var m = /\.([A-Za-z0-9]{1,4})$/.exec(name || "");
    return m ? m[1].toUpperCase() : "FILE";
  }
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // --- chips ------------------------------------------------------------------------------------
  function makeChip(file) {
    var chip = { file: file, xhr: null, id: null, state: "uploading", error: "" };
    var li = el("li", "file-chip is-uploading");
    li.setAttribute("data-testid", "attach-chip");
    var icon = el("span", "file-icon", extLabel(file.name));
    icon.setAttribute("aria-hidden", "true");
    li.appendChild(icon);
    var body = el("span", "file-body");
    var name = el("span", "file-name", file.name || "Pasted image");
    name.title = file.name || "";
    var meta = el("span", "file-meta", sizeLabel(file.size) + " · Uploading…");
    meta.setAttribute("data-testid", "attach-chip-status");
    var bar = el("span", "file-progress");
    var fill = el("span", "file-progress-fill");
    bar.setAttribute("role", "progressbar");
    bar.setAttribute("aria-label", "Upload of " + (file.name || "pasted image"));
    bar.setAttribute("aria-valuemin", "0");
    bar.setAttribute("aria-valuemax", "100");
    bar.setAttribute("aria-valuenow", "0");
    bar.appendChild(fill);
    body.appendChild(name);
    body.appendChild(meta);
    body.appendChild(bar);
    li.appendChild(body);
    var remove = el("button", "file-remove");
    remove.type = "button";
    remove.setAttribute("aria-label", "Remove " + (file.name || "pasted image"));
    remove.setAttribute("data-testid", "attach-remove");
    remove.innerHTML = '<svg viewBox="0 0 20 20" width="14" height="14" aria-hidden="true"><path d="M6 6l8 8M14 6l-8 8" stroke="currentColor" stroke-width="2" stroke-linecap="round"/></svg>';
    remove.addEventListener("click", function () { removeChip(chip); });
    li.appendChild(remove);
    chip.el = li;
    chip.icon = icon;
    chip.meta = meta;
    chip.bar = bar;
    chip.fill = fill;
    if (/^image\/(png|jpeg|gif|webp)$/.test(file.type) && file.size <= 8 * 1024 * 1024) preview(chip);
    return chip;
  }
  function preview(chip) {
    // A data: URL (the page's policy allows no blob: images); replaced by the server's thumbnail.
    var reader = new FileReader();
    reader.onload = function () { setThumb(chip, reader.result); };
    reader.readAsDataURL(chip.file);
  }
  function setThumb(chip, src) {
    if (!chip.el.isConnected && chip.state === "removed") return;
    var img = chip.el.querySelector("img.file-thumb");
    if (!img) {
      img = el("img", "file-thumb");
      img.alt = "";
      img.width = 36; img.height = 36;
      img.setAttribute("data-testid", "attach-thumb");
      chip.el.replaceChild(img, chip.icon);
    }
    img.src = src;
  }
  function setState(chip, state, text) {
    chip.state = state;
    chip.el.className = "file-chip is-" + state;
    chip.meta.textContent = text;
  }
  function progress(chip, percent) {
    chip.fill.style.width = percent + "%";
    chip.bar.setAttribute("aria-valuenow", String(percent));
    chip.meta.textContent = sizeLabel(chip.file.size) + " · Uploading " + percent + "%";
  }

  function addFiles(list) {
    var t = tray();
    if (!t || !list || !list.length) return;
    var max = parseInt(t.dataset.maxFiles || "10", 10);
    var maxBytes = parseInt(t.dataset.maxBytes || "0", 10);
    showError("");
    Array.prototype.forEach.call(list, function (file) {
      var chip = makeChip(file);
      chips.push(chip);
      t.appendChild(chip.el);
      var live = chips.filter(function (c) { return c.state !== "failed"; }).length;
      if (live > max) return fail(chip, "A message can carry at most " + max + " files.");
      if (!file.size) return fail(chip, "The file is empty.");
      if (maxBytes && file.size > maxBytes) {
        return fail(chip, sizeLabel(file.size) + "; a file can be at most " + sizeLabel(maxBytes) + ".");
      }
      upload(chip);
    });
    syncSend();
  }
  function fail(chip, message) {
    chip.error = message;
    setState(chip, "failed", message);
    chip.meta.setAttribute("role", "alert");
    say((chip.file.name || "Pasted image") + ": " + message);
    syncSend();
  }

  function upload(chip) {
    var xhr = new XMLHttpRequest();
    chip.xhr = xhr;
    var data = new FormData();
    data.append("file", chip.file, chip.file.name || "pasted-image.png");
    xhr.open("POST", tray().dataset.uploadUrl);
    xhr.setRequestHeader("X-CSRFToken", csrf());
    xhr.upload.onprogress = function (e) {
      if (e.lengthComputable) progress(chip, Math.min(99, Math.round(e.loaded * 100 / e.total)));
    };
    xhr.onload = function () {
      chip.xhr = null;
      var body = {};
      try { body = JSON.parse(xhr.responseText || "{}"); } catch (e) { body = {}; }
      if (xhr.status === 201 && body.id) {
        progress(chip, 100);
        chip.id = body.id;
        chip.urls = body;
        settle(chip, body);
      } else if (chip.state !== "removed") {
        fail(chip, body.error || (xhr.status === 413 ? "The file is too large." : "The upload failed (" + xhr.status + ")."));
      }
    };
    xhr.onerror = function () { if (chip.state !== "removed") fail(chip, "The upload failed: check your connection."); };
    xhr.send(data);
  }
  function settle(chip, body) {
    if (chip.state === "removed") return;
    chip.icon.textContent = BADGES[body.kind] || chip.icon.textContent;
    if (body.status === "pending") {
      setState(chip, "reading", body.size_label + " · Reading…");
      setTimeout(function () { poll(chip); }, POLL_MS);
    } else if (body.status === "failed") {
      fail(chip, body.error || "This file could not be read.");
    } else {
      setState(chip, "ready", body.size_label + " · " + body.kind_label);
      if (body.thumbnail_url) setThumb(chip, body.thumbnail_url);
      var input = el("input");
      input.type = "hidden";
      input.name = "attachments";
      input.value = String(body.id);
      input.setAttribute("form", "composer");
      chip.el.appendChild(input);
      say((chip.file.name || "Pasted image") + " is attached.");
    }
    syncSend();
  }
  function poll(chip) {
    if (chip.state !== "reading") return;
    var xhr = new XMLHttpRequest();
    xhr.open("GET", chip.urls.status_url);
    xhr.onload = function () {
      var body = {};
      try { body = JSON.parse(xhr.responseText || "{}"); } catch (e) { body = {}; }
      if (xhr.status === 200 && body.status) settle(chip, body);
      else setTimeout(function () { poll(chip); }, POLL_MS * 3);
    };
    xhr.onerror = function () { setTimeout(function () { poll(chip); }, POLL_MS * 3); };
    xhr.send();
  }
  function removeChip(chip) {
    var wasFocused = chip.el.contains(document.activeElement);
    chip.state = "removed";
    if (chip.xhr) chip.xhr.abort();
    if (chip.id && chip.urls) {
      var xhr = new XMLHttpRequest();
      xhr.open("POST", chip.urls.delete_url);
      xhr.setRequestHeader("X-CSRFToken", csrf());
      xhr.send();
    }
    chip.el.remove();
    chips = chips.filter(function (c) { return c !== chip; });
    say((chip.file.name || "Pasted image") + " removed.");
    if (!chips.length) showError("");
    if (wasFocused) {
      var next = tray().querySelector(".file-remove") || byId("composer-input");
      if (next) next.focus();
    }
    syncSend();
  }
  function busy() { return chips.some(function (c) { return c.state === "uploading" || c.state === "reading"; }); }
  function failed() { return chips.filter(function (c) { return c.state === "failed"; }); }
  function syncSend() {
    var form = composer();
    if (form) form.classList.toggle("is-uploading", busy());
    if (sendWhenReady && !busy()) {
      sendWhenReady = false;
      if (form) form.requestSubmit();
    }
  }

  // A file stored by the server for this message (an MCP resource or a prompt's image): a chip
  // like an upload's from where the upload would have left it.
  window.TesseraAttach = {
    addStored: function (body) {
      var t = tray();
      if (!t || !body || !body.id) return;
      var chip = makeChip({ name: body.name, size: body.size, type: "" });
      chip.id = body.id;
      chip.urls = body;
      chips.push(chip);
      t.appendChild(chip.el);
      settle(chip, body);
    },
    // The files on the chips (uploaded or stored, not failed nor removed), as the server gave
    // them: what moves with the composer when the home page goes on to a chat it created.
    stored: function () {
      return chips.filter(function (c) { return c.id && c.urls && c.state !== "failed" && c.state !== "removed"; })
        .map(function (c) { return c.urls; });
    }
  };

  // --- Send waits for the chips -------------------------------------------------------------------
  document.addEventListener("submit", function (e) {
    if (!e.target || e.target.id !== "composer" || e.defaultPrevented) return;
    var bad = failed();
    if (bad.length) {
      e.preventDefault();
      e.stopImmediatePropagation();
      showError("Remove the file that could not be attached (" + (bad[0].file.name || "pasted image") + ") before sending.");
      return;
    }
    if (busy()) {
      e.preventDefault();
      e.stopImmediatePropagation();
      sendWhenReady = true;
      say("Your message is sent as soon as the files are ready.");
      composer().classList.add("is-waiting");
    }
  }, true);
  // A steer goes at once (the answer is running): not before its files are ready.
  document.addEventListener("htmx:confirm", function (e) {
    if (!e.detail.elt || e.detail.elt.id !== "steer-btn") return;
    var bad = failed();
    if (bad.length || busy()) {
      e.preventDefault();
      showError(bad.length ? "Remove the file that could not be attached (" + (bad[0].file.name || "pasted image") + ") before steering." : "Wait until the files are ready, then steer.");
    }
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    var form = composer();
    var steer = document.getElementById("steer-btn");
    // Sent, queued or handed to the running answer as a steer: the files went with it.
    if (!form || (e.detail.elt !== form && (!steer || e.detail.elt !== steer))) return;
    form.classList.remove("is-waiting");
    if (e.detail.successful) {
      // Sent: the files belong to the message now; the chips go, nothing is deleted.
      chips = [];
      var t = tray();
      if (t) t.textContent = "";
    }
  });

  // --- the three ways in --------------------------------------------------------------------------
  document.addEventListener("click", function (e) {
    if (e.target.closest && e.target.closest("#attach-btn")) byId("attach-input").click();
  });
  document.addEventListener("change", function (e) {
    if (e.target && e.target.id === "attach-input") {
      addFiles(e.target.files);
      e.target.value = "";
    }
  });
  document.addEventListener("paste", function (e) {
    if (!tray() || !e.clipboardData) return;
    var files = [];
    Array.prototype.forEach.call(e.clipboardData.items || [], function (item) {
      if (item.kind === "file") { var f = item.getAsFile(); if (f) files.push(f); }
    });
    if (!files.length) return;
    e.preventDefault();
    addFiles(files);
  });
  var depth = 0;
  function hasFiles(e) {
    return e.dataTransfer && Array.prototype.indexOf.call(e.dataTransfer.types || [], "Files") !== -1;
  }
  document.addEventListener("dragenter", function (e) {
    if (!tray() || !hasFiles(e)) return;
    depth += 1;
    document.body.classList.add("is-dropping");
  });
  document.addEventListener("dragover", function (e) {
    if (!tray() || !hasFiles(e)) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = "copy";
  });
  document.addEventListener("dragleave", function (e) {
    if (!tray() || !hasFiles(e)) return;
    depth = Math.max(0, depth - 1);
    if (!depth) document.body.classList.remove("is-dropping");
  });
  document.addEventListener("drop", function (e) {
    if (!tray() || !hasFiles(e)) return;
    e.preventDefault();
    depth = 0;
    document.body.classList.remove("is-dropping");
    addFiles(e.dataTransfer.files);
  });
})();
