/* AgentLoom chat — the Memory panel (SPEC §7c, MEM-4). Plain JavaScript, no build step.
 *
 * What this chat's agent keeps about the person, from the API (GET/PUT/DELETE
 * /api/v1/agents/{id}/memory[/{path}], same origin, the page's CSRF token): every file with
 * its text to edit and save or delete, "Forget everything" after a confirmation in the
 * panel, the "Don't use memory for me" switch, how much of the bound is used, and the recent
 * changes with who made them and when. A change made here inside a session names the
 * session, which records it; the transcript shows it as a note at once (and after a reload,
 * from the server, web/memory_words.py). The words are the server's (config.memoryWords).
 *
 * Also the memory tool's steps in words while a run streams: chat.js asks stepWords().
 */
(function () {
  "use strict";

  function format(template, values) {
    return String(template).replace(/\{(\w+)\}/g, function (whole, key) {
      return Object.prototype.hasOwnProperty.call(values, key) ? String(values[key]) : whole;
    });
  }

  function stepWords(name, args, words) {
    // A memory call in words ("Saved to memory: /memories/alice.md"), as web/memory_words.py.
    if (!words || name !== words.tool) return "";
    var parsed = args;
    if (typeof args === "string") {
      try { parsed = JSON.parse(args); } catch (e) { return ""; }
    }
    if (!parsed || typeof parsed !== "object" || !Object.prototype.hasOwnProperty.call(words.steps, parsed.command)) {
      return "";
    }
    var fields = {};
    ["path", "old_path", "new_path"].forEach(function (key) { fields[key] = parsed[key] ? String(parsed[key]) : "?"; });
    return format(words.steps[parsed.command], fields);
  }

  window.AgentLoomMemory = { stepWords: stepWords };

  var panel = document.getElementById("memory-panel");
  var opener = document.getElementById("memory-open");
  var configNode = document.getElementById("chat-config");
  if (!panel || !opener || !configNode || typeof panel.showModal !== "function") {
    if (opener) opener.hidden = true;  // no panel without a dialog: the API still has it all
    return;
  }
  var config = JSON.parse(configNode.textContent);
  var words = config.memoryWords;
  var panelWords = words.panel;

  function part(name) { return panel.querySelector("[data-memory-" + name + "]"); }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function cookie(name) {
    var parts = document.cookie ? document.cookie.split(";") : [];
    for (var i = 0; i < parts.length; i++) {
      var pair = parts[i].trim();
      if (pair.indexOf(name + "=") === 0) return decodeURIComponent(pair.slice(name.length + 1));
    }
    return "";
  }

  function request(method, path, body) {
    var headers = { Accept: "application/json" };
    if (method !== "GET") headers["X-CSRFToken"] = cookie(config.csrfCookie);
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(path, {
      method: method, headers: headers, credentials: "same-origin", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (response) {
      if (response.status === 204) return { ok: true, status: 204, data: null };
      return response.json().catch(function () { return null; }).then(function (data) {
        return { ok: response.ok, status: response.status, data: data };
      });
    }, function () {
      return { ok: false, status: 0, data: null };
    });
  }

  function fileUrl(path) {
    // /memories/projects/a.md -> .../memory/projects/a.md, each part escaped.
    var relative = String(path).replace(/^\/memories\//, "");
    return config.urls.memoryFile.replace("{path}", relative.split("/").map(encodeURIComponent).join("/"));
  }

  function inSession(url) {
    return config.sessionId ? url + (url.indexOf("?") < 0 ? "?" : "&") + "session=" + config.sessionId : url;
  }

  function when(iso) {
    var then = new Date(iso);
    var seconds = Math.round((Date.now() - then.getTime()) / 1000);
    if (isNaN(seconds)) return "";
    if (seconds < 60) return "just now";
    var minutes = Math.round(seconds / 60);
    if (minutes < 60) return minutes === 1 ? "a minute ago" : minutes + " minutes ago";
    var hours = Math.round(minutes / 60);
    if (hours < 24) return hours === 1 ? "an hour ago" : hours + " hours ago";
    return then.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
  }

  function changeWords(change) {
    var who = change.by === "person" ? panelWords.you : config.agentName;
    var what = Object.prototype.hasOwnProperty.call(words.changes, change.command)
      ? format(words.changes[change.command], { path: change.path, new_path: change.new_path }) : change.command;
    return who + " " + what;
  }

  function say(text) {
    part("status").textContent = text || "";
  }

  function fail(result) {
    var error = result.data && result.data.error;
    var box = part("error");
    box.textContent = result.status === 0 ? "The server could not be reached. Check your connection and try again."
      : (error && error.message) || "That did not work (" + result.status + "). Try again.";
    box.hidden = false;
  }

  function noteInSession(change) {
    // The session records the change; the transcript shows it now, as the server will.
    var transcript = document.getElementById("transcript");
    if (!config.sessionId || !transcript) return;
    var note = el("p", "memory-note", format(panelWords.noteInSession, { words: changeWords(change) }));
    note.setAttribute("role", "note");
    transcript.append(note);
  }

  function fileItem(file, agentMemory) {
    var item = el("li", "memory-file");
    item.setAttribute("data-path", file.path);
    var head = el("div", "memory-file-head");
    head.append(el("span", "memory-path", file.path),
                el("span", "hint memory-file-meta", file.chars.toLocaleString() + " characters · changed " +
                   when(file.updated_at)));
    var area = el("textarea", "memory-text");
    area.value = file.content;
    area.rows = Math.min(10, Math.max(3, file.content.split("\n").length + 1));
    area.setAttribute("aria-label", "Text of " + file.path);
    area.readOnly = !agentMemory;  // with the agent's memory off, nothing new is saved (409)
    var actions = el("div", "memory-file-actions");
    var save = el("button", "button button-small", "Save");
    save.type = "button";
    save.setAttribute("data-memory", "save");
    save.setAttribute("aria-label", "Save " + file.path);
    save.hidden = !agentMemory;
    var remove = el("button", "button button-small button-danger-outline", "Delete");
    remove.type = "button";
    remove.setAttribute("data-memory", "delete");
    remove.setAttribute("aria-label", "Delete " + file.path);
    actions.append(save, remove);
    item.append(head, area, actions);
    return item;
  }

  function render(data) {
    part("loading").hidden = true;
    part("body").hidden = false;
    var off = part("agent-off");
    off.textContent = panelWords.agentOff;
    off.hidden = data.agent_memory;
    var use = panel.querySelector("[data-memory='use']");
    use.checked = !data.use_memory;
    part("use-words").textContent = data.use_memory ? panelWords.useOn : panelWords.useOff;
    part("used").textContent = format(panelWords.used, { used: data.used_chars.toLocaleString(),
                                                         max: data.max_chars.toLocaleString() });
    var meter = part("meter");
    meter.max = data.max_chars;
    meter.value = Math.min(data.used_chars, data.max_chars);
    var list = part("files");
    list.textContent = "";
    data.files.forEach(function (file) { list.append(fileItem(file, data.agent_memory)); });
    part("empty").textContent = panelWords.empty;
    part("empty").hidden = data.files.length > 0;
    panel.querySelector("[data-memory='forget']").disabled = data.files.length === 0;
    var changes = part("changes");
    changes.textContent = "";
    data.changes.forEach(function (change) {
      var item = el("li", "memory-change memory-change-" + change.by);
      var time = el("time", "hint", when(change.created_at));
      time.dateTime = change.created_at;
      time.title = new Date(change.created_at).toLocaleString();
      item.append(el("span", "memory-change-words", changeWords(change)), " ", time);
      changes.append(item);
    });
    part("no-changes").hidden = data.changes.length > 0;
  }

  function load() {
    return request("GET", config.urls.memory).then(function (result) {
      if (!result.ok) {
        part("loading").hidden = true;
        fail(result);
        return;
      }
      render(result.data);
    });
  }

  function busy(on) {
    panel.setAttribute("aria-busy", on ? "true" : "false");
    Array.prototype.forEach.call(panel.querySelectorAll(".memory-body button, .memory-body input"), function (node) {
      node.disabled = on;
    });
  }

  function change(method, url, body, done, noted) {
    part("error").hidden = true;
    say("");
    busy(true);
    return request(method, url, body).then(function (result) {
      busy(false);
      if (!result.ok) {
        fail(result);
        return load();
      }
      if (noted) noteInSession(noted);
      say(done);
      return load();
    });
  }

  var sessionBody = config.sessionId ? { session: config.sessionId } : {};

  panel.addEventListener("click", function (event) {
    var button = event.target.closest("[data-memory]");
    if (!button || button.disabled) return;
    var action = button.getAttribute("data-memory");
    var item = button.closest(".memory-file");
    var path = item ? item.getAttribute("data-path") : "";
    if (action === "close") {
      panel.close();
    } else if (action === "save") {
      var content = item.querySelector("textarea").value;
      change("PUT", fileUrl(path), Object.assign({ content: content }, sessionBody), panelWords.saved,
             { by: "person", command: "create", path: path, new_path: "" });
    } else if (action === "delete") {
      change("DELETE", inSession(fileUrl(path)), undefined, format(panelWords.deleted, { path: path }),
             { by: "person", command: "delete", path: path, new_path: "" });
    } else if (action === "forget") {
      part("confirm").hidden = false;
      panel.querySelector("[data-memory='forget-no']").focus();
    } else if (action === "forget-no") {
      part("confirm").hidden = true;
      panel.querySelector("[data-memory='forget']").focus();
    } else if (action === "forget-yes") {
      part("confirm").hidden = true;
      change("DELETE", inSession(config.urls.memory), undefined, panelWords.forgotten,
             { by: "person", command: "forget", path: "/memories", new_path: "" });
    }
  });

  panel.querySelector("[data-memory='use']").addEventListener("change", function (event) {
    var use = !event.target.checked;
    change("PUT", config.urls.memory, Object.assign({ use_memory: use }, sessionBody),
           use ? panelWords.useOn : panelWords.useOff,
           { by: "person", command: use ? "memory_on" : "memory_off", path: "", new_path: "" });
  });

  Array.prototype.forEach.call(panel.querySelectorAll("[data-memory-words]"), function (node) {
    node.textContent = panelWords[node.getAttribute("data-memory-words")] || "";
  });

  opener.addEventListener("click", function () {
    part("error").hidden = true;
    part("confirm").hidden = true;
    say("");
    panel.showModal();
    load();
  });
  panel.addEventListener("close", function () { opener.focus(); });
}());
