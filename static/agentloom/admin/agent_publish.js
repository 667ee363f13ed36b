// The agent page's Publish button publishes the *saved* draft. As soon as anything on the
// page is edited, it is disabled and says why: save first, then publish what was saved.
// The server refuses unsaved edits too; this only says it before the click.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.querySelector("[data-publish]");
    var note = document.getElementById("publish-note");
    if (!button || !button.form) { return; }
    function edited(event) {
      if (event.target === button || button.dataset.unsaved) { return; }
      button.dataset.unsaved = "true";
      button.disabled = true;
      if (note) { note.textContent = "You have unsaved changes: save them first, then publish what you saved."; }
    }
    button.form.addEventListener("input", edited);
    button.form.addEventListener("change", edited);
  });
})();
