/* Discover models and Test connection on the model connection form (SPEC §10, CAT-1).
 * Plain JS, no library.
 * Posts the form's provider, base URL and key (or the connection id, for the stored key)
 * to the console's discover view, shows the server-rendered (escaped) result, and fills
 * the form when the admin picks a model. The key is sent in the POST body only. */
(function () {
  "use strict";

  function field(name) { return document.getElementById("id_" + name); }

  function discover(button, panel, names) {
    var body = new FormData();
    names.forEach(function (name) {
      var input = field(name);
      body.append(name, input ? input.value : "");
    });
    if (button.dataset.connection) { body.append("connection", button.dataset.connection); }
    var csrf = document.querySelector("input[name=csrfmiddlewaretoken]");
    panel.textContent = "Asking the provider\u2026";
    button.disabled = true;
    fetch(button.dataset.url, {
      method: "POST",
      body: body,
      credentials: "same-origin",
      headers: {"X-Requested-With": "XMLHttpRequest", "X-CSRFToken": csrf ? csrf.value : ""}
    }).then(function (response) {
      return response.text();
    }).then(function (html) {
      panel.innerHTML = html; // rendered and escaped by the server's template
    }).catch(function () {
      panel.textContent = "The console could not be reached. Try again.";
    }).then(function () { button.disabled = false; });
  }

  function use(choice, panel) {
    var values = {
      model: choice.dataset.model,
      context_window: choice.dataset.contextWindow,
      max_output_tokens: choice.dataset.maxOutputTokens,
      discovery_token: choice.dataset.token
    };
    var sources = {context_window: choice.dataset.contextWindowSource,
                   max_output_tokens: choice.dataset.maxOutputTokensSource};
    Object.keys(values).forEach(function (name) {
      var input = field(name);
      if (!input) { return; }
      input.value = values[name];
      if (sources[name]) {
        // figure_sources.js says which discovery result the figure is, until it is typed over.
        input.dataset.discovered = values[name];
        input.dataset.discoveredSource = sources[name];
        input.dispatchEvent(new Event("input", {bubbles: true}));
      }
    });
    var images = field("supports_images");
    if (images) { images.checked = choice.dataset.supportsImages === "true"; }
    panel.querySelectorAll("tr.chosen").forEach(function (row) { row.classList.remove("chosen"); });
    var row = choice.closest("tr");
    if (row) { row.classList.add("chosen"); }
  }

  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("discover-models");
    var panel = document.getElementById("discover-results");
    if (!button || !panel) { return; }
    button.addEventListener("click", function () { discover(button, panel, ["provider", "base_url", "api_key"]); });
    var test = document.getElementById("test-connection");
    var result = document.getElementById("test-connection-result");
    if (test && result) {
      test.addEventListener("click", function () {
        discover(test, result, ["provider", "base_url", "api_key", "model"]);
      });
    }
    panel.addEventListener("click", function (event) {
      var choice = event.target.closest("[data-use-model]");
      if (choice) { event.preventDefault(); use(choice, panel); }
    });
  });
})();
