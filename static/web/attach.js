/* AgentLoom chat — the files attached to a question (RUN-13). Plain JavaScript, no build step.
 *
 * Each chosen or dropped file uploads at once (POST /api/v1/sessions/{id}/files, field
 * `file`), with a progress bar from XMLHttpRequest's upload progress, and becomes a chip
 * with its name (as the server stored it) and size and a remove button; chat.js sends the
 * ready ones' ids with the question. Removing a ready chip deletes its upload (DELETE on
 * the file's address), which frees its room in the chat; if that fails the chip says so
 * and is not sent. A refused file says why on its chip, in words; one refused only for now
 * (many files at once: 429 or 503 with Retry-After) is sent again when the server says.
 * An image's preview is a local object URL of the person's own file, drawn only for
 * raster types (never SVG or HTML).
 */
(function () {
  "use strict";

  var PREVIEW_TYPES = { "image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true };
  var RETRIES = 6;  // an upload refused for now (429 or 503 with Retry-After) is sent again this often

  function sizeLabel(size) {
    // As the server words it (web/attachments.py size_label).
    if (size < 1024) return size + (size === 1 ? " byte" : " bytes");
    if (size < 1024 * 1024) return Math.round(size / 1024) + " KB";
    return (size / (1024 * 1024)).toFixed(1) + " MB";
  }

  function refusal(name, status, data, othersHere) {
    var error = (data && data.error) || {};
    var code = error.code || "";
    if (status === 415 || code === "unsupported_file_type") {
      return name + ": this kind of file cannot be attached — text, PDF and images can.";
    }
    if (code === "session_files_full") {
      // Only files not sent yet can be removed, and only those shown here can be by a click.
      return name + ": this chat has no room for more files. " + (othersHere
        ? "Remove a file attached here (its ×) to make room, or start a new chat for this one."
        : "Start a new chat for this one.");
    }
    if (status === 413 || code === "file_too_large") {
      return name + ": this file is too large to attach." + (error.message ? " " + error.message : "");
    }
    if (status === 0) return name + ": the upload did not reach the server. Check your connection and attach it again.";
    if (status === 401 || status === 403) return name + ": you are logged out. Log in again, then attach it again.";
    if (status === 404) return name + ": this chat was not found. Reload the page, then attach it again.";
    if (error.message) return name + ": " + error.message;
    return name + ": the upload failed (HTTP " + status + "). Attach it again.";
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function hasFiles(event) {
    var types = event.dataTransfer && event.dataTransfer.types;
    return Boolean(types) && Array.prototype.indexOf.call(types, "Files") >= 0;
  }

  /* options: input (the <input type=file>), list (the chips' <ul>), dropTargets (elements),
   * uploadUrl() → a Promise of the address to upload to (a new chat creates its session
   * there), csrfToken() → the CSRF token, onChange() after any change. */
  function Attachments(options) {
    this.options = options;
    this.entries = [];
    var self = this;
    options.input.addEventListener("change", function () {
      self.add(options.input.files);
      options.input.value = "";  // the same file can be chosen again after a remove
    });
    options.dropTargets.forEach(function (target) {
      var depth = 0;
      target.addEventListener("dragenter", function (event) {
        if (!hasFiles(event)) return;
        event.preventDefault();
        depth += 1;
        target.classList.add("dropping");
      });
      target.addEventListener("dragover", function (event) {
        if (!hasFiles(event)) return;
        event.preventDefault();
        event.dataTransfer.dropEffect = "copy";
      });
      target.addEventListener("dragleave", function () {
        depth = Math.max(0, depth - 1);
        if (!depth) target.classList.remove("dropping");
      });
      target.addEventListener("drop", function (event) {
        if (!hasFiles(event)) return;
        event.preventDefault();
        depth = 0;
        target.classList.remove("dropping");
        self.add(event.dataTransfer.files);
      });
    });
    // A file dropped beside the targets is not opened in place of the chat.
    window.addEventListener("dragover", function (event) { if (hasFiles(event)) event.preventDefault(); });
    window.addEventListener("drop", function (event) { if (hasFiles(event)) event.preventDefault(); });
  }

  Attachments.prototype.add = function (files) {
    for (var i = 0; i < (files ? files.length : 0); i++) this.upload(files[i]);
  };

  Attachments.prototype.changed = function () {
    this.options.list.hidden = this.entries.length === 0;
    if (this.options.onChange) this.options.onChange();
  };

  Attachments.prototype.chip = function (entry) {
    var self = this;
    var chip = el("li", "chip chip-uploading");
    chip.setAttribute("data-state", "uploading");
    if (PREVIEW_TYPES[entry.file.type]) {
      entry.preview = URL.createObjectURL(entry.file);
      var image = el("img", "chip-preview");
      image.src = entry.preview;
      image.alt = "";
      chip.append(image);
    }
    var texts = el("span", "chip-text");
    entry.nameNode = el("span", "chip-name", entry.file.name);
    entry.sizeNode = el("span", "chip-size", sizeLabel(entry.file.size));
    entry.progress = el("progress");
    entry.progress.max = 100;
    entry.progress.value = 0;
    entry.progress.setAttribute("aria-label", "Uploading " + entry.file.name);
    texts.append(entry.nameNode, entry.sizeNode, entry.progress);
    var remove = el("button", "chip-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", "Remove " + entry.file.name);
    remove.addEventListener("click", function () { self.remove(entry, true); });
    chip.append(texts, remove);
    entry.chip = chip;
    return chip;
  };

  Attachments.prototype.upload = function (file) {
    var self = this;
    var entry = { file: file, state: "uploading", id: null, xhr: null, preview: null };
    this.entries.push(entry);
    this.options.list.append(this.chip(entry));
    this.changed();
    this.options.uploadUrl().then(function send(address, tries) {
      if (entry.state !== "uploading") return;  // removed meanwhile
      tries = tries || 0;
      var xhr = new XMLHttpRequest();
      entry.xhr = xhr;
      xhr.open("POST", address);
      xhr.setRequestHeader("X-CSRFToken", self.options.csrfToken());
      xhr.setRequestHeader("Accept", "application/json");
      xhr.responseType = "json";
      xhr.upload.addEventListener("progress", function (event) {
        if (event.lengthComputable) entry.progress.value = Math.round(100 * event.loaded / event.total);
      });
      xhr.addEventListener("load", function () {
        var data = xhr.response;
        var wait = parseInt(xhr.getResponseHeader("Retry-After") || "", 10);
        if (xhr.status === 201 && data && typeof data.id === "number") self.ready(entry, data);
        else if ((xhr.status === 429 || xhr.status === 503) && wait > 0 && tries < RETRIES) {
          // The server reads a few files of one person at once (core/slow_work.py):
          // the others wait their turn, still uploading, and go again when told.
          setTimeout(function () { send(address, tries + 1); }, Math.min(wait, 30) * 1000);
        }
        else self.failed(entry, refusal(file.name, xhr.status, data, self.count("ready") > 0));
      });
      xhr.addEventListener("error", function () { self.failed(entry, refusal(file.name, 0, null)); });
      var form = new FormData();
      form.append("file", file, file.name);
      xhr.send(form);
    }, function (message) {
      self.failed(entry, file.name + ": " + message);
    });
  };

  Attachments.prototype.ready = function (entry, data) {
    entry.state = "ready";
    entry.id = data.id;
    entry.url = typeof data.url === "string" ? data.url : null;
    if (typeof data.name === "string" && data.name) {  // what the model and the downloads will see
      entry.nameNode.textContent = data.name;
      entry.chip.querySelector(".chip-remove").setAttribute("aria-label", "Remove " + data.name);
    }
    entry.progress.remove();
    entry.sizeNode.textContent = sizeLabel(typeof data.size === "number" ? data.size : entry.file.size);
    entry.chip.className = "chip chip-ready";
    entry.chip.setAttribute("data-state", "ready");
    entry.chip.setAttribute("data-file-id", String(data.id));
    this.changed();
  };

  Attachments.prototype.failed = function (entry, message) {
    if (entry.state !== "uploading") return;
    entry.state = "failed";
    entry.progress.remove();
    entry.chip.className = "chip chip-error";
    entry.chip.setAttribute("data-state", "failed");
    var words = el("span", "chip-message", message);
    words.setAttribute("role", "alert");
    entry.sizeNode.replaceWith(words);
    this.changed();
  };

  Attachments.prototype.remove = function (entry, focusNext) {
    // A ready or not-removed upload is deleted on the server first; the rest only leave the page.
    if ((entry.state === "ready" || entry.state === "unremoved") && entry.url) this.discard(entry, focusNext);
    else if (entry.state !== "removing") this.drop(entry, focusNext);
  };

  Attachments.prototype.discard = function (entry, focusNext) {
    var self = this;
    var name = entry.nameNode.textContent;
    entry.state = "removing";  // not sent from now on
    entry.chip.setAttribute("data-state", "removing");
    entry.chip.setAttribute("aria-busy", "true");
    fetch(entry.url, {
      method: "DELETE",
      credentials: "same-origin",
      headers: { "X-CSRFToken": this.options.csrfToken(), "Accept": "application/json" }
    }).then(function (response) {
      if (response.status === 204 || response.status === 404) {  // 404: it is gone already
        self.drop(entry, focusNext);
        return;
      }
      return response.json().catch(function () { return null; }).then(function (data) {
        var error = (data && data.error) || {};
        var why = response.status === 401 || response.status === 403
          ? "you are logged out. Log in again, then press × again."
          : (error.message || "the server answered HTTP " + response.status + ". Press × to try again.");
        self.unremoved(entry, name + ": could not be removed — " + why);
      });
    }, function () {
      self.unremoved(entry, name + ": could not be removed — the server was not reached. " +
        "Check your connection, then press × again.");
    });
  };

  Attachments.prototype.unremoved = function (entry, message) {
    // Still stored, but the person chose to remove it: red, said so, and never sent.
    if (entry.state !== "removing") return;
    entry.state = "unremoved";
    entry.chip.removeAttribute("aria-busy");
    entry.chip.className = "chip chip-error";
    entry.chip.setAttribute("data-state", "unremoved");
    var words = entry.chip.querySelector(".chip-message") || el("span", "chip-message");
    words.textContent = message + " It will not be sent.";
    words.setAttribute("role", "alert");
    if (entry.sizeNode.parentNode) entry.sizeNode.replaceWith(words);
    this.changed();
  };

  Attachments.prototype.drop = function (entry, focusNext) {
    var index = this.entries.indexOf(entry);
    if (index < 0) return;
    var state = entry.state;
    entry.state = "removed";
    if (state === "uploading" && entry.xhr) entry.xhr.abort();
    if (entry.preview) URL.revokeObjectURL(entry.preview);
    // Focus moves on only from this chip (or from nowhere): not away from where the person went meanwhile.
    var active = document.activeElement;
    var hadFocus = !active || active === document.body || entry.chip.contains(active);
    entry.chip.remove();
    this.entries.splice(index, 1);
    this.changed();
    if (focusNext && hadFocus) {
      var next = this.entries[index] || this.entries[index - 1];
      (next ? next.chip.querySelector(".chip-remove") : this.options.input).focus();
    }
  };

  Attachments.prototype.restore = function (files) {
    // Files attached before a reload and not sent yet ({id, name, content_type, size, url}):
    // ready chips again, so they can be sent or removed (removing frees their room).
    var self = this;
    (files || []).forEach(function (data) {
      var entry = { file: { name: data.name, size: data.size, type: "" }, state: "uploading", id: null, xhr: null,
                    preview: null };
      self.entries.push(entry);
      var chip = self.chip(entry);
      if (PREVIEW_TYPES[data.content_type] && data.url) {
        // The person's own upload, drawn from its download address (a sniffed raster type only).
        var image = el("img", "chip-preview");
        image.src = data.url;
        image.alt = "";
        chip.prepend(image);
      }
      self.options.list.append(chip);
      self.ready(entry, data);
    });
  };

  Attachments.prototype.clear = function () {
    // After a question was accepted: its files are its record's now, so nothing is deleted.
    while (this.entries.length) this.drop(this.entries[0], false);
  };

  Attachments.prototype.count = function (state) {
    return this.entries.filter(function (entry) { return !state || entry.state === state; }).length;
  };

  Attachments.prototype.ids = function () {
    return this.entries.filter(function (entry) { return entry.state === "ready"; })
      .map(function (entry) { return entry.id; });
  };

  Attachments.sizeLabel = sizeLabel;
  window.AgentLoomAttachments = Attachments;
})();
