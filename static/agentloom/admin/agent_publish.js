// The agent page's Publish button publishes the *saved* draft: it submits the page's form
// to the publish URL, where the server refuses any field that differs from what is saved.
// As soon as anything on the page is edited, the button is disabled and says why: save
// first, then publish what was saved. It is a plain button, so Enter never publishes.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.querySelector("[data-publish]");
    var note = document.getElementById("publish-note");
    if (!button || !button.form) { return; }
    var form = button.form;
    function edited(event) {
      if (event.target === button || button.dataset.unsaved) { return; }
      button.dataset.unsaved = "true";
      button.disabled = true;
      if (note) { note.textContent = "You have unsaved changes: save them first, then publish what you saved."; }
    }
    form.addEventListener("input", edited);
    form.addEventListener("change", edited);
    button.addEventListener("click", function () {
      if (button.disabled) { return; }
      button.disabled = true;
      form.action = button.dataset.publishUrl;
      form.submit();
    });
  });
})();
