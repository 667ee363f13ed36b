/* A tool server's question to the person during a call (TOOL-10: MCP elicitation).
 *
 * chat.js hands each input_requested event here and gets back a card: the server's message,
 * then a form built from the requested schema (a flat object of primitive properties:
 * string, number, integer, boolean, an enum as a choice, a list of choices as boxes; each
 * with its title, description, and "required" said) or, for a URL, a link that opens the
 * server's page ("Open <host>"); and Accept / Decline / Cancel. The answer is sent by the
 * caller's send(body); a 400 shows each field's error beside it. Everything the server
 * wrote is set as text, never as markup. No globals but AgentLoomInputs.
 */
(function () {
  "use strict";

  var STATUS_WORDS = {
    accepted: "You accepted.", declined: "You declined.", cancelled: "You cancelled.",
    expired: "Nobody answered in time; the server was told it was cancelled.",
    stopped: "Stopped with the run; the server was told it was cancelled."
  };

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // A field that holds a credential is typed unseen (the record keeps it redacted:
  // toolservers/asking.py names them the same way).
  var SECRET_NAME = /pass(word|phrase|code)?|secret|token|api[ _-]?key|credential|private[ _-]?key|\bpin\b|\botp\b|(access|security|verification|door|auth)[ _-]?code/i;

  function secret(name, spec) {
    return spec.format === "password" || spec.writeOnly === true || SECRET_NAME.test(name + " " + (spec.title || ""));
  }

  function choicesOf(spec) {
    // An enum, as plain values (with enumNames as their labels) or as oneOf/anyOf of {const, title}.
    var options = spec.oneOf || spec.anyOf;
    if (Array.isArray(options) && options.every(function (o) { return o && "const" in o; })) {
      return options.map(function (o) { return { value: o.const, label: o.title || String(o.const) }; });
    }
    if (Array.isArray(spec.enum)) {
      var names = Array.isArray(spec.enumNames) ? spec.enumNames : [];
      return spec.enum.map(function (v, i) { return { value: v, label: names[i] || String(v) }; });
    }
    return null;
  }

  function field(name, spec, required, id) {
    // One labelled control; .read() gives its value (undefined: left empty).
    var wrap = el("div", "input-field");
    var label = el("label", "input-label", spec.title || name);
    label.htmlFor = id;
    if (required) label.append(el("span", "input-required", " (required)"));
    var control, read;
    var choices = choicesOf(spec);
    var itemChoices = spec.type === "array" && spec.items ? choicesOf(spec.items) : null;
    if (spec.type === "boolean") {
      wrap.classList.add("input-field-check");
      control = el("input");
      control.type = "checkbox";
      control.checked = spec.default === true;
      read = function () { return control.checked; };
      wrap.append(control, label);
    } else if (itemChoices) {
      control = el("fieldset", "input-choices");
      control.append(el("legend", "input-label", spec.title || name));
      itemChoices.forEach(function (choice, i) {
        var box = el("input");
        box.type = "checkbox";
        box.value = String(choice.value);
        box.id = id + "-" + i;
        var boxLabel = el("label", null, choice.label);
        boxLabel.htmlFor = box.id;
        control.append(el("span", "input-choice"));
        control.lastChild.append(box, boxLabel);
      });
      read = function () {
        var picked = [];
        control.querySelectorAll("input:checked").forEach(function (box) { picked.push(box.value); });
        return picked.length || required ? picked : undefined;
      };
      wrap.append(control);
    } else if (choices) {
      control = el("select", "input-control");
      if (!required || spec.default === undefined) {
        var none = el("option", null, "—");
        none.value = "";
        control.append(none);
      }
      choices.forEach(function (choice, i) {
        var option = el("option", null, choice.label);
        option.value = String(i);
        if (spec.default !== undefined && spec.default === choice.value) option.selected = true;
        control.append(option);
      });
      read = function () { return control.value === "" ? undefined : choices[Number(control.value)].value; };
      wrap.append(label, control);
    } else {
      control = el("input", "input-control");
      var numeric = spec.type === "number" || spec.type === "integer";
      control.type = numeric ? "number" : spec.format === "email" ? "email" : spec.format === "uri" ? "url"
        : spec.format === "date" ? "date" : secret(name, spec) ? "password" : "text";
      if (control.type === "password") control.autocomplete = "off";
      if (numeric) {
        control.step = spec.type === "integer" ? "1" : "any";
        control.inputMode = spec.type === "integer" ? "numeric" : "decimal";
        if (spec.minimum !== undefined) control.min = spec.minimum;
        if (spec.maximum !== undefined) control.max = spec.maximum;
      } else if (spec.maxLength) {
        control.maxLength = spec.maxLength;
      }
      if (spec.default !== undefined && spec.default !== null) control.value = String(spec.default);
      read = function () {
        var raw = control.value;
        if (raw === "") return required && !numeric ? "" : undefined;
        if (!numeric) return raw;
        var n = spec.type === "integer" ? Number(raw) : parseFloat(raw);
        return isNaN(n) ? raw : n;
      };
      wrap.append(label, control);
    }
    control.id = id;
    if (required) control.setAttribute("aria-required", "true");
    if (spec.description) {
      var hint = el("p", "hint", spec.description);
      hint.id = id + "-hint";
      control.setAttribute("aria-describedby", hint.id);
      wrap.append(hint);
    }
    var error = el("p", "input-error");
    error.hidden = true;
    wrap.append(error);
    return { node: wrap, read: read, control: control, error: error };
  }

  function host(url) {
    try { return new URL(url).host; } catch (e) { return url; }
  }

  function card(data, send) {
    // The card of one question; send(body) returns a promise of {ok, status, data}.
    var id = "input-" + data.input_id;
    var node = el("section", "input-card");
    node.id = id;
    node.setAttribute("data-input-id", String(data.input_id));
    node.setAttribute("aria-label", "A question from " + (data.server || "a tool server"));
    node.append(el("p", "input-who", (data.server || "A tool server") + " asks you"));
    node.append(el("p", "input-message plain", data.message || ""));
    var form = el("form", "input-form");
    form.noValidate = true;  // the server checks against the schema and names each field
    var fields = {};
    if (data.mode === "url") {
      var link = el("a", "button input-open", "Open " + host(data.url));
      link.href = data.url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      form.append(link, el("p", "hint", "It opens the server's page in a new tab; come back here when done."));
    } else {
      var schema = data.schema || {};
      var required = Array.isArray(schema.required) ? schema.required : [];
      Object.keys(schema.properties || {}).forEach(function (name, i) {
        fields[name] = field(name, schema.properties[name] || {}, required.indexOf(name) >= 0, id + "-f" + i);
        form.append(fields[name].node);
      });
    }
    var problem = el("p", "input-error");
    problem.hidden = true;
    problem.setAttribute("role", "alert");
    var actions = el("div", "input-actions");
    var accept = el("button", "button button-primary", "Accept");
    accept.type = "submit";
    accept.value = "accept";
    var decline = el("button", "button", "Decline");
    decline.type = "button";
    var cancel = el("button", "button", "Cancel");
    cancel.type = "button";
    actions.append(accept, decline, cancel);
    form.append(problem, actions);
    node.append(form);

    function busy(on) {
      form.querySelectorAll("button, input, select").forEach(function (c) { c.disabled = on; });
    }

    function answer(action) {
      var body = { input_id: data.input_id, action: action };
      if (action === "accept" && data.mode !== "url") {
        body.content = {};
        Object.keys(fields).forEach(function (name) {
          var value = fields[name].read();
          if (value !== undefined) body.content[name] = value;
        });
      }
      Object.keys(fields).forEach(function (name) { fields[name].error.hidden = true; });
      problem.hidden = true;
      busy(true);
      send(body).then(function (result) {
        if (result.ok) return done(node, result.data.status);
        busy(false);
        var error = (result.data && result.data.error) || {};
        var named = error.fields || {};
        var first = null;
        Object.keys(named).forEach(function (name) {
          var f = fields[name];
          if (!f) return;
          f.error.textContent = named[name];
          f.error.hidden = false;
          f.control.setAttribute("aria-invalid", "true");
          first = first || f.control;
        });
        if (error.code === "already_answered" || error.code === "not_waiting") busy(true);
        problem.textContent = error.message || "The answer could not be sent; try again.";
        problem.hidden = false;
        if (first) first.focus();
      });
    }

    form.addEventListener("submit", function (event) { event.preventDefault(); answer("accept"); });
    decline.addEventListener("click", function () { answer("decline"); });
    cancel.addEventListener("click", function () { answer("cancel"); });
    return node;
  }

  function done(node, status) {
    // Answered (here, in another tab, or by the wait's end): the card says how, and takes no more.
    if (!node || node.classList.contains("input-done")) return;
    node.classList.add("input-done");
    var form = node.querySelector("form");
    if (form) form.remove();
    node.append(el("p", "input-outcome", STATUS_WORDS[status] || "Answered."));
  }

  window.AgentLoomInputs = { card: card, done: done };
})();
