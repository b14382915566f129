// The browser's own notification for each one pushed over the user socket, when the user
// allowed it (the notification centre's button asks; nothing asks on its own).
(function () {
  "use strict";
  function supported() { return "Notification" in window; }
  document.addEventListener("DOMContentLoaded", function () {
    var ask = document.querySelector("[data-action=allow-browser-notifications]");
    if (ask && supported() && Notification.permission === "default") {
      ask.hidden = false;
      ask.addEventListener("click", function () {
        Notification.requestPermission().then(function () { ask.hidden = true; });
      });
    }
  });
  document.addEventListener("htmx:oobAfterSwap", function (event) {
    var el = event.detail && event.detail.target;
    if (!el || el.id !== "notify-browser" || !el.dataset.id) return;
    if (!supported() || Notification.permission !== "granted") return;
    var shown = new Notification(el.dataset.title || "Tessera", { body: el.dataset.body || "", tag: "tessera-" + el.dataset.id });
    shown.onclick = function () { window.focus(); window.location.href = "/notifications/"; };
  });
})();
