// The agent form's budget line (CTX-21), recomputed live: the effective input of each
// connection comes from the server (ModelConnection.budget, CAT-9); compaction triggers at
// effective × context ratio and aims for effective × target ratio. The server checks the
// same figures on save.
(function () {
  "use strict";
  function number(id) {
    var field = document.getElementById(id);
    var value = field ? parseFloat(field.value) : NaN;
    return isNaN(value) ? null : value;
  }
  function update() {
    var out = document.getElementById("live-budget");
    var data = document.getElementById("agent-connection-figures");
    var connection = document.getElementById("id_model_connection");
    if (!out || !data || !connection) { return; }
    var figures = JSON.parse(data.textContent)[connection.value];
    if (!figures) { out.textContent = "Pick a model connection."; return; }
    var effective = figures.effective_input_tokens;
    var ratio = number("id_context_ratio"), target = number("id_target_ratio");
    var text = "effective input " + effective.toLocaleString("en") + " tokens";
    if (ratio !== null && target !== null) {
      if (0 < target && target < ratio && ratio <= 1) {
        text += " · compaction at " + Math.floor(effective * ratio + 1e-9).toLocaleString("en") +
                ", target " + Math.floor(effective * target + 1e-9).toLocaleString("en");
      } else {
        text += " · the ratios must satisfy 0 < target < context ≤ 1";
      }
    }
    out.textContent = text;
  }
  document.addEventListener("DOMContentLoaded", function () {
    ["id_model_connection", "id_context_ratio", "id_target_ratio"].forEach(function (id) {
      var field = document.getElementById(id);
      if (field) { field.addEventListener("input", update); field.addEventListener("change", update); }
    });
    update();
  });
})();
