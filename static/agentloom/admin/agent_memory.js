// "Memory across sessions" on the agent page: the memory tool's "Ask before calling" shows
// while the box is ticked (MEM-2, TOOL-7). A hidden select is also disabled, so it is not
// posted and turning memory off leaves nothing of it in the draft.
(function () {
  "use strict";
  document.addEventListener("DOMContentLoaded", function () {
    var box = document.getElementById("id_memory");
    var policy = document.getElementById("id_memory_tool_policy");
    if (!box || !policy) { return; }
    var select = policy.querySelector("select");
    var row = policy.closest(".form-row");
    function follow() {
      policy.hidden = !box.checked;
      if (row) { row.hidden = !box.checked; }
      if (select) { select.disabled = !box.checked; }
    }
    box.addEventListener("change", follow);
    follow();
  });
})();
