/* The context inspector's "Copy as JSON" and "Copy as cURL" (SPEC §10). Plain JS, no
 * library, a static file (the console's CSP runs no inline script). What is copied is the
 * text the server rendered into the hidden <pre> the button names; the cURL command holds
 * $API_KEY, never a key. When the browser refuses to copy, the text is shown to select. */
(function () {
  "use strict";

  function copyByCommand(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "request-copy-buffer";
    document.body.appendChild(area);
    area.select();
    var copied = false;
    try { copied = document.execCommand("copy"); } catch (error) { copied = false; }
    area.remove();
    return copied ? Promise.resolve() : Promise.reject(new Error("refused"));
  }

  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text).catch(function () { return copyByCommand(text); });
    }
    return copyByCommand(text);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-copy]");
    if (!button) { return; }
    var panel = button.closest("[data-request-copy]");
    var source = document.getElementById(button.getAttribute("data-copy"));
    var status = panel ? panel.querySelector(".request-copy-status") : null;
    if (!source || !status) { return; }
    var what = button.textContent.replace(/^Copy as /, "");
    copyText(source.textContent).then(function () {
      status.textContent = "Copied as " + what + ".";
    }, function () {
      source.hidden = false;  // shown to select by hand
      status.textContent = "The browser did not allow copying: select the " + what + " below and copy it.";
    });
  });
})();
