// Runs before first paint so a dark-mode user never sees a white flash.
(function () {
  var saved = null;
  try { saved = localStorage.getItem("tessera-theme"); } catch (e) { /* storage may be blocked */ }
  if (saved === "light" || saved === "dark") document.documentElement.dataset.theme = saved;
})();
