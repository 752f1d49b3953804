// The overview's figures, fetched again every few seconds and put in place of the last ones,
// so that the page moves without a reload. The server renders and escapes the fragment, as it
// does every page; the script only swaps it in. Nothing runs while the tab is hidden, or while
// the operator types in one of the fragment's fields.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) {
    return;
  }
  var every = 1000 * Number(live.getAttribute("data-every") || "5");
  function busy() {
    var focused = document.activeElement;
    return focused && live.contains(focused) && focused.tagName === "INPUT";
  }
  function refresh() {
    if (document.hidden || busy()) {
      return;
    }
    fetch(live.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        live.setAttribute("data-refreshed", String(Date.now()));
        live.removeAttribute("data-stale");
      })
      .catch(function () {
        live.setAttribute("data-stale", "true");
      });
  }
  setInterval(refresh, every);
})();
