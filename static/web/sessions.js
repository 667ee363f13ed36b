/* AgentLoom chat — the person's sessions: search, rename and delete. Plain JavaScript.
 *
 * Search: the sidebar's form works without script (GET ?q=); here it filters as the
 * person types, with the server's own list (GET /chat/sessions?q=: titles and question
 * text are encrypted, so only the server can match them).
 * Rename: in place, from the session's heading or its sidebar entry (PATCH
 * /api/v1/sessions/{id} {title}); the server's words when it refuses.
 * Delete: after a confirmation (DELETE /api/v1/sessions/{id}); a chat whose answer is
 * still running is refused (409) and the dialog says so. Deleting the open chat moves on
 * to the next one in the list, or home.
 */
(function () {
  "use strict";

  var SEARCH_DELAY_MS = 250;
  var sidebar = document.getElementById("sidebar");
  var results = document.getElementById("session-results");
  var searchForm = document.querySelector(".session-search");
  var searchBox = document.getElementById("session-search");
  var searchStatus = document.getElementById("session-search-status");
  var dialog = document.getElementById("delete-dialog");
  var chat = document.getElementById("chat");
  var currentId = chat ? chat.getAttribute("data-session-id") : "";

  function csrfToken() {
    var field = document.querySelector("input[name=csrfmiddlewaretoken]");
    return field ? field.value : "";
  }

  function send(method, address, body) {
    var init = {
      method: method,
      credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRFToken": csrfToken() }
    };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(address, init).then(function (response) {
      if (response.status === 204) return { ok: true, status: 204, data: null };
      return response.json().catch(function () { return null; }).then(function (data) {
        return { ok: response.ok, status: response.status, data: data };
      });
    }, function () {
      return { ok: false, status: 0, data: null };
    });
  }

  function refusal(result, doing) {
    var error = (result.data && result.data.error) || {};
    if (result.status === 0) return "The server was not reached, so the chat was not " + doing + ". Check your connection and try again.";
    if (result.status === 401 || result.status === 403) return "You are logged out. Log in again, then try again.";
    if (result.status === 404) return "This chat no longer exists (deleted elsewhere?). Reload the page.";
    return error.message || "The chat was not " + doing + " (HTTP " + result.status + "). Try again.";
  }

  function reveal(root) {
    // Rename and Delete need this script: shown only once it runs.
    Array.prototype.forEach.call(root.querySelectorAll("[data-session-actions]"), function (node) {
      node.hidden = false;
    });
  }

  function holderOf(node) {
    return node.closest("[data-session-id][data-api]");
  }

  function titleNodes(id) {
    return Array.prototype.filter.call(document.querySelectorAll("[data-session-id][data-api]"), function (holder) {
      return holder.getAttribute("data-session-id") === id;
    });
  }

  // ---------------------------------------------------------------- search
  var searchTimer = null;
  var searchSeq = 0;

  function search() {
    if (!searchForm || !results) return;
    var query = searchBox.value;
    var seq = ++searchSeq;
    var address = searchForm.getAttribute("data-list-url") + "?q=" + encodeURIComponent(query) +
      (currentId ? "&current=" + encodeURIComponent(currentId) : "");
    fetch(address, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : Promise.reject(response.status); })
      .then(function (data) {
        if (seq !== searchSeq) return;  // a later keystroke's answer wins
        var holder = document.createElement("div");
        holder.innerHTML = data.html;  // the server's template, escaped there
        results.replaceChildren.apply(results, Array.prototype.slice.call(holder.childNodes));
        reveal(results);
        if (searchStatus) {
          searchStatus.textContent = query.trim()
            ? (data.count === 1 ? "1 session matches." : data.count + " sessions match.") : "";
        }
      }, function () {
        if (seq === searchSeq && searchStatus) {
          searchStatus.textContent = "The search did not reach the server. Press Search to try again.";
        }
      });
  }

  if (searchForm && searchBox && results) {
    searchBox.addEventListener("input", function () {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(search, SEARCH_DELAY_MS);
    });
    searchForm.addEventListener("submit", function (event) {
      event.preventDefault();
      clearTimeout(searchTimer);
      search();
    });
  }

  // ---------------------------------------------------------------- rename
  function renameStart(holder) {
    if (holder.querySelector(".rename-form")) return;
    var id = holder.getAttribute("data-session-id");
    var nameNode = holder.querySelector("[data-session-title]");
    var actions = holder.querySelector("[data-session-actions]");
    var form = document.createElement("form");
    form.className = "rename-form";
    form.noValidate = true;
    var label = document.createElement("label");
    label.className = "visually-hidden";
    label.textContent = "New name for this chat";
    var input = document.createElement("input");
    input.type = "text";
    input.maxLength = 200;
    input.value = nameNode.textContent.trim();
    input.id = "rename-" + id + "-" + (holder.classList.contains("session-head") ? "head" : "list");
    label.htmlFor = input.id;
    var save = document.createElement("button");
    save.type = "submit";
    save.className = "button button-small";
    save.textContent = "Save";
    var cancel = document.createElement("button");
    cancel.type = "button";
    cancel.className = "button button-small";
    cancel.textContent = "Cancel";
    var error = document.createElement("p");
    error.className = "rename-error";
    error.setAttribute("role", "alert");
    error.hidden = true;
    form.append(label, input, save, cancel, error);
    var link = holder.querySelector("a");
    (link || nameNode).hidden = true;
    if (actions) actions.hidden = true;
    holder.insertBefore(form, actions || null);
    input.focus();
    input.select();

    function close(focusBack) {
      form.remove();
      (link || nameNode).hidden = false;
      if (actions) actions.hidden = false;
      if (focusBack) {
        var again = holder.querySelector("[data-action=rename]");
        if (again) again.focus();
      }
    }

    cancel.addEventListener("click", function () { close(true); });
    input.addEventListener("input", function () {  // a refusal speaks of the name it refused
      error.hidden = true;
      input.removeAttribute("aria-invalid");
    });
    input.addEventListener("keydown", function (event) {
      if (event.key !== "Escape") return;
      event.preventDefault();
      event.stopPropagation();  // Esc here cancels the rename, never stops a running answer
      close(true);
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      save.disabled = true;
      send("PATCH", holder.getAttribute("data-api"), { title: input.value }).then(function (result) {
        save.disabled = false;
        if (!result.ok) {
          error.textContent = refusal(result, "renamed");
          error.hidden = false;
          input.setAttribute("aria-invalid", "true");
          input.focus();
          return;
        }
        renamed(id, result.data.title);
        close(true);
      });
    });
  }

  function renamed(id, title) {
    titleNodes(id).forEach(function (holder) {
      var nameNode = holder.querySelector("[data-session-title]");
      if (nameNode) nameNode.textContent = title;
      var rename = holder.querySelector("[data-action=rename].session-action");
      if (rename) rename.setAttribute("aria-label", "Rename " + title);
      var remove = holder.querySelector("[data-action=delete].session-action");
      if (remove) remove.setAttribute("aria-label", "Delete " + title);
    });
    if (id === currentId) document.title = title + " · AgentLoom";
  }

  // ---------------------------------------------------------------- delete
  var deleting = null;  // the holder whose chat the dialog asks about

  function deleteAsk(holder) {
    if (!dialog || typeof dialog.showModal !== "function") return;
    deleting = holder;
    var nameNode = holder.querySelector("[data-session-title]");
    dialog.querySelector("[data-delete-title]").textContent = nameNode ? nameNode.textContent.trim() : "";
    dialog.querySelector("[data-delete-error]").hidden = true;
    dialog.querySelector("[data-dialog=confirm]").disabled = false;
    dialog.showModal();
    dialog.querySelector("[data-dialog=cancel]").focus();  // the safe choice first
  }

  function deleteClose() {
    var holder = deleting;
    deleting = null;
    if (dialog.open) dialog.close();
    var back = holder && document.contains(holder) ? holder.querySelector("[data-action=delete]") : null;
    if (back) back.focus();
  }

  function nextAfter(id) {
    // The chat to open after the open one is deleted: the next in the list, else the one before.
    var items = Array.prototype.slice.call(document.querySelectorAll(".session-list .session-item"));
    var index = items.findIndex(function (item) { return item.getAttribute("data-session-id") === id; });
    if (index < 0) return items.length ? items[0] : null;
    return items[index + 1] || items[index - 1] || null;
  }

  function deleteConfirm() {
    var holder = deleting;
    if (!holder) return;
    var id = holder.getAttribute("data-session-id");
    var confirmButton = dialog.querySelector("[data-dialog=confirm]");
    confirmButton.disabled = true;
    send("DELETE", holder.getAttribute("data-api")).then(function (result) {
      if (!result.ok && result.status !== 404) {
        var error = dialog.querySelector("[data-delete-error]");
        error.textContent = refusal(result, "deleted");
        error.hidden = false;
        confirmButton.disabled = false;
        dialog.querySelector("[data-dialog=cancel]").focus();
        return;
      }
      if (id === currentId) {
        var next = nextAfter(id);
        var link = next ? next.querySelector("a") : null;
        var home = document.querySelector(".brand");
        window.location.replace(link ? link.href : (home ? home.href : "/"));
        return;
      }
      deleting = null;
      dialog.close();
      var item = sidebar ? sidebar.querySelector(".session-item[data-session-id='" + id + "']") : null;
      var focusTo = null;
      if (item) {
        var neighbour = item.nextElementSibling || item.previousElementSibling;
        focusTo = neighbour ? neighbour.querySelector("a") : searchBox;
        var list = item.parentNode;
        item.remove();
        if (!list.children.length) {
          var none = document.createElement("p");
          none.className = "muted";
          none.textContent = "No sessions yet.";
          list.replaceWith(none);
        }
      }
      if (searchStatus) searchStatus.textContent = "The chat was deleted.";
      if (focusTo) focusTo.focus();
    });
  }

  if (dialog) {
    dialog.addEventListener("click", function (event) {
      event.stopPropagation();  // a click in the dialog is not a click outside the phone's menu
      var choice = event.target.closest("[data-dialog]");
      if (!choice) return;
      if (choice.getAttribute("data-dialog") === "confirm") deleteConfirm();
      else deleteClose();
    });
    window.addEventListener("keydown", function (event) {
      // Esc while the dialog is open closes it (its default), wherever the focus is, and
      // never reaches the chat's own Esc, which stops a running answer.
      if (event.key === "Escape" && dialog.open) event.stopPropagation();
    }, true);
    dialog.addEventListener("cancel", function (event) {
      event.preventDefault();
      deleteClose();
    });
  }

  // ---------------------------------------------------------------- the buttons
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-action]");
    if (!button || !button.closest("[data-session-actions]")) return;
    var holder = holderOf(button);
    if (!holder) return;
    event.preventDefault();
    if (button.getAttribute("data-action") === "rename") renameStart(holder);
    else if (button.getAttribute("data-action") === "delete") deleteAsk(holder);
  });

  reveal(document);
})();
