/* The Source beside each window figure on the connection form (CAT-2), kept true while
 * the admin edits: a figure typed over reads "Manual" at once (saving records it so), a
 * figure filled in by Discover models' Use reads as that result, and a figure put back
 * to what is saved reads as saved again. Plain JS; the server decides on save. */
(function () {
  "use strict";

  function describe(span, input) {
    var value = input.value.trim();
    if (input.dataset.discovered && value === input.dataset.discovered) {
      return "From the discovery result you used: " + input.dataset.discoveredSource +
        " (saved with this source).";
    }
    if (value === "" || value === span.dataset.saved) { return span.dataset.original; }
    return "Manual: typed here, so it will be saved as manual.";
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".figure-source[data-figure]").forEach(function (span) {
      var input = document.getElementById("id_" + span.dataset.figure);
      if (!input) { return; }
      span.dataset.original = span.textContent;
      input.addEventListener("input", function () { span.textContent = describe(span, input); });
    });
  });
})();
