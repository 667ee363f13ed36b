/* AgentLoom chat — plain JavaScript, no build step, no dependencies.
 *
 * A finished run is server-rendered HTML (its records, Markdown sanitised on the server).
 * A working run is built here from its Server-Sent Events: the response of a question
 * asked on this page carries them; otherwise (a reload, a response cut off, Continue)
 * they come from GET /api/v1/runs/{id}/events:
 * streamed text is inserted as text only, never as markup; when a step is over its text is
 * swapped for the server's rendering, and when the run ends the whole run is.
 * Nothing is lost on a dropped connection or a reload: the browser resumes the stream
 * with Last-Event-ID, and a reloaded page replays the run's events from the start.
 */
(function () {
  "use strict";

  var COMPACTION_WATCH_MS = 120000;
  // An idle session whose summary is still being prepared asks how it goes, less and less
  // often, for ten minutes at most (no event reaches a page when no run is active).
  var PREPARED_POLL_MS = 3000;
  var PREPARED_POLL_MAX_MS = 30000;
  var PREPARED_WATCH_MS = 600000;
  // "waiting": for the person's approval of a tool call (TOOL-8); the run is still theirs to follow.
  var ACTIVE = { queued: true, running: true, waiting: true };
  var APPROVAL_POLL_MS = 4000;  // while a call waits: another tab's decision shows within this
  var WATCHDOG_MS = 10000;
  var UNREACHABLE_AFTER = 2;  // failed reconnections (the stream's retry is 2 s) before saying so
  var QUIET_MS = 15000;

  // ---------------------------------------------------------------- the sessions menu
  var menuToggle = document.getElementById("menu-toggle");
  var sidebar = document.getElementById("sidebar");

  function menuOpen() { return document.body.classList.contains("sidebar-open"); }
  function setMenu(open) {
    document.body.classList.toggle("sidebar-open", open);
    if (menuToggle) menuToggle.setAttribute("aria-expanded", String(open));
  }
  if (menuToggle && sidebar) {
    menuToggle.addEventListener("click", function () {
      setMenu(!menuOpen());
      if (menuOpen()) {
        var first = sidebar.querySelector("select, button, a");
        if (first) first.focus();
      }
    });
  }

  document.addEventListener("click", function (event) {
    // A tap outside the open menu closes it, as on any phone app.
    if (sidebar && menuOpen() && !sidebar.contains(event.target) && !menuToggle.contains(event.target)) setMenu(false);
  });

  var configNode = document.getElementById("chat-config");
  var config = configNode ? JSON.parse(configNode.textContent) : null;

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    if (menuOpen()) {
      setMenu(false);
      if (menuToggle) menuToggle.focus();
    } else if (config && live && !(event.target.closest && event.target.closest(".approval, dialog"))) {
      // (Esc in an approval's reason field is not a Stop, nor Esc closing the Memory panel.)
      event.preventDefault();
      stopRun();
    }
  });

  if (!config) return;

  // Event names are the server's (sessions/event_types.py, handed to the page): the script
  // reads EVENT.RUN_STARTED and so on and names none itself.
  var EVENT = config.events;
  var EVENT_TYPES = Object.keys(EVENT).map(function (name) { return EVENT[name]; });
  var COMPACTION_END_WORDS = {};
  COMPACTION_END_WORDS[EVENT.COMPACTED] = "Earlier messages were summarized.";
  COMPACTION_END_WORDS[EVENT.COMPACTION_FAILED] = "Summarizing did not succeed; nothing was changed.";
  COMPACTION_END_WORDS[EVENT.COMPACTION_SKIPPED] = "Nothing needed summarizing.";
  var COMPACTION_ENDS = Object.keys(COMPACTION_END_WORDS);

  // ---------------------------------------------------------------- helpers
  var transcript = document.getElementById("transcript");
  var composer = document.getElementById("composer");
  var box = document.getElementById("question");
  var boxLabel = document.getElementById("question-label");
  var sendButton = document.getElementById("send");
  var stopButton = document.getElementById("stop");
  var statusLine = document.getElementById("chat-status");
  var alertBox = document.getElementById("chat-alert");
  var askPlaceholder = box ? box.getAttribute("placeholder") : "";
  var live = null;  // the LiveRun this page follows (at most one run of a session works at a time)

  function url(name, id) { return config.urls[name].replace("{id}", String(id)); }

  function toolLabel(name) {
    // "server · tool" for a server tool, as the server names its steps (web/tool_labels.py).
    var labels = config.toolLabels || {};
    return Object.prototype.hasOwnProperty.call(labels, name) ? labels[name] : name;
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function fromHTML(html) {
    // Only ever HTML our server rendered and sanitised (templates/web/_run.html).
    var template = document.createElement("template");
    template.innerHTML = html.trim();
    return template.content.firstElementChild;
  }

  function cookie(name) {
    var parts = document.cookie ? document.cookie.split(";") : [];
    for (var i = 0; i < parts.length; i++) {
      var pair = parts[i].trim();
      if (pair.indexOf(name + "=") === 0) return decodeURIComponent(pair.slice(name.length + 1));
    }
    return "";
  }

  function request(method, path, body, tries) {
    var headers = { Accept: "application/json" };
    if (method !== "GET") headers["X-CSRFToken"] = cookie(config.csrfCookie);
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(path, {
      method: method, headers: headers, credentials: "same-origin", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body)
    }).then(function (response) {
      var wait = parseInt(response.headers.get("Retry-After") || "", 10);
      if (method === "GET" && response.status === 429 && wait > 0 && (tries || 0) < 3) {
        // A read refused for now (this person's pages rendering at once, core/slow_work.py):
        // read again when the server says, as a reload would.
        return new Promise(function (resolve) { setTimeout(resolve, Math.min(wait, 10) * 1000); }).then(function () {
          return request(method, path, body, (tries || 0) + 1);
        });
      }
      return response.json().catch(function () { return null; }).then(function (data) {
        return { ok: response.ok, status: response.status, data: data };
      });
    }, function () {
      return { ok: false, status: 0, data: null };
    });
  }

  function askStreaming(path, body) {
    // POST a question asking for its run's events in the response (text/event-stream):
    // the question and its answer in one request. Resolves as request() does, with the
    // run's id from Location and `events`, the body's reader, once the question is taken.
    return fetch(path, {
      method: "POST", credentials: "same-origin", cache: "no-store", body: JSON.stringify(body),
      headers: { Accept: "text/event-stream", "Content-Type": "application/json",
                 "X-CSRFToken": cookie(config.csrfCookie) }
    }).then(function (response) {
      var type = response.headers.get("Content-Type") || "";
      var runId = Number((response.headers.get("Location") || "").split("/").pop());
      if (response.ok && type.indexOf("text/event-stream") === 0 && response.body && runId > 0) {
        return { ok: true, status: response.status, data: { id: runId }, events: response.body.getReader() };
      }
      return response.json().catch(function () { return null; }).then(function (data) {
        return { ok: false, status: response.status, data: data };
      });
    }, function () {
      return { ok: false, status: 0, data: null };
    });
  }

  function requestError(result) {
    var known = config.errors.requests;
    if (result.status === 0) return known.network;
    var error = result.data && result.data.error;
    if (error && known[error.code]) return known[error.code];
    if (result.status === 401) return known.not_authenticated;
    if (error && error.fields) {
      var names = Object.keys(error.fields);
      if (names.length) return error.message + " (" + names[0] + ": " + error.fields[names[0]] + ")";
    }
    if (error && error.message) return error.message;
    return "The server could not do that (HTTP " + result.status + "). Try again.";
  }

  function explain(error) {
    // The words are the server's (sessions.run_errors.RunErrorCode, handed to the page).
    var code = (error && error.code) || config.errors.fallback_code;
    var text = config.errors.runs[code] || config.errors.fallback;
    return { code: code, title: text.title, hint: text.hint, message: (error && error.message) || "" };
  }

  function retryStatus(data) {
    // Worded as web/errors.py's retry_status: what happened, what is done about it.
    var words = config.errors.runs[(data && data.code) || ""] || config.errors.runs[config.errors.fallback_code];
    var what = words.retrying || explain(data).title;
    var seconds = Number(data.retrying_in) || 0;
    var when = !seconds ? words.at_once : "asking again in " + seconds + " s…";
    return what + " — " + when + " Nothing is lost.";
  }

  function errorBox(error) {
    var e = explain(error);
    var node = el("div", "error-box");
    node.setAttribute("data-code", e.code);
    node.append(el("p", "error-title", e.title), el("p", "error-hint", e.hint));
    if (e.message) node.append(el("p", "error-detail", e.message));
    return node;
  }

  function setStatus(text, working) {
    if (!statusLine) return;
    statusLine.textContent = text || "";
    statusLine.classList.toggle("working", Boolean(working && text));
  }

  function showAlert(text) {
    if (!alertBox) return;
    alertBox.textContent = text || "";
    alertBox.hidden = !text;
  }

  function nearBottom() {
    return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 160;
  }
  function toBottom() { window.scrollTo(0, document.documentElement.scrollHeight); }

  function userBubble(kind, text, note) {
    var msg = el("div", "msg msg-user msg-" + kind);
    msg.append(el("p", "who", "You" + (kind === "supplement" ? " · supplement" + (note ? " (" + note + ")" : "") : "")));
    msg.append(el("div", "bubble bubble-user plain", text));
    return msg;
  }

  function placeholderSection(runId) {
    var section = el("section", "run");
    section.id = "run-" + runId;
    section.setAttribute("data-run-id", String(runId));
    section.setAttribute("data-status", "queued");
    section.setAttribute("data-live", "1");
    var area = el("div", "live");
    area.setAttribute("data-live-area", "");
    section.append(area);
    return section;
  }

  function loadRun(runId, asked) {
    // asked: the run was just started from this page (a question, Continue), so if it is
    // already over, nothing else will show how it ended.
    return request("GET", url("fragment", runId)).then(function (result) {
      var section = result.ok ? fromHTML(result.data.html) : placeholderSection(runId);
      var existing = document.getElementById("run-" + runId);
      if (existing) existing.replaceWith(section); else transcript.append(section);
      if (section.querySelector("[data-undo-compaction]")) undoOffersElsewhereRemove(section);
      var empty = document.getElementById("empty-note");
      if (empty) empty.remove();
      markPins();
      if (asked && result.ok && !result.data.active) {
        // Already over when its page came (a request refused at once, on a busy server):
        // no stream will end it, so its end is shown here — the meter's figure and the words.
        if (result.data.meter) meterSet(result.data.meter);
        setStatus(endingWords(result.data), false);
      }
      return section;
    });
  }

  // ---------------------------------------------------------------- pins (CTX-50)
  // A pinned message stays word for word in what the agent reads, through every summary.
  // The runs' HTML is kept by the server whatever the pins are, so their state is set here
  // from the session's pins: read as the page opens, then from each answer of the pins API.
  var pins = {};

  function pinWords(pin, summarized) {
    var words = pin["default"] ? "Pinned: the goal" : (pin.by === "agent" ? "Pinned by the agent" : "Pinned");
    return words + (summarized ? " (summarized for lack of room)" : "");
  }

  function markPins() {
    if (!transcript) return;
    var summarized = {};
    transcript.querySelectorAll(".pins-summarized[data-pin-seqs]").forEach(function (note) {
      note.getAttribute("data-pin-seqs").split(" ").forEach(function (seq) { if (seq) summarized[seq] = true; });
    });
    transcript.querySelectorAll("[data-pin-seq]").forEach(function (button) {
      var seq = button.getAttribute("data-pin-seq");
      var pin = pins[seq];
      var holder = button.closest(".msg, details.step");
      var mark = holder ? holder.querySelector(".pin-mark") : null;
      button.setAttribute("data-pinned", pin ? "true" : "false");
      button.querySelector(".pin-label").textContent = pin ? "Unpin" : "Pin";
      if (holder) holder.classList.toggle("is-pinned", !!pin);
      if (mark) {
        mark.hidden = !pin;
        mark.textContent = pin ? pinWords(pin, summarized[seq]) : "";
      }
    });
  }

  function pinsSet(items) {
    pins = {};
    (items || []).forEach(function (pin) { pins[String(pin.seq)] = pin; });
    markPins();
  }

  function pinsRefresh() {
    if (!config.urls.pins) return;
    request("GET", config.urls.pins).then(function (result) { if (result.ok) pinsSet(result.data.items); });
  }

  function pinToggle(button) {
    var seq = button.getAttribute("data-pin-seq");
    var pinned = !!pins[seq];
    button.disabled = true;
    var asked = pinned ? request("DELETE", url("pin", seq)) : request("POST", config.urls.pins, { seq: Number(seq) });
    asked.then(function (result) {
      button.disabled = false;
      if (!result.ok) {
        showAlert(requestError(result));
        return;
      }
      showAlert("");
      pinsSet(result.data.items);
      if (!live) setStatus(pinned ? "Unpinned: this message may be summarized like the others."
                                  : "Pinned: this message stays word for word through every summary.", false);
      button.focus();
    });
  }

  // ---------------------------------------------------------------- the context meter
  var meter = document.getElementById("context-meter");
  var meterFigures = document.getElementById("context-figures");
  var compactButton = document.getElementById("compact-now");

  function figure(n) { return Number(n || 0).toLocaleString("en-US"); }

  // While an answer streams the meter follows it with the browser's own rough count
  // (characters / 4, said as such) on top of the server's latest figure, until the
  // server measures the step (context_measured) and its figure replaces the guess.
  var CHARS_PER_TOKEN = 4;
  var meterLast = null;
  var meterExtraChars = 0;

  function meterReading(m) {
    // Read as the server reads it (runloop/meter.py, meter_shown): the figure is the next
    // request's size, which may pass the trigger, or the maximum, before that request is
    // summarized; the bar stops at its maximum and the words say what happens next.
    var tokens = Math.max(0, Number(m.tokens || 0));
    var maximum = Math.max(0, Number(m.effective_input_tokens || 0));
    return { value: Math.min(tokens, maximum), pastTrigger: !!m.trigger_tokens && tokens >= m.trigger_tokens,
             pastMaximum: tokens > maximum };
  }

  function meterLabel(m) {
    // Worded as the server words it (web/presenters.py, meter_label).
    var reading = meterReading(m);
    var failed = m.failed_request ? " in the request that failed" : "";
    var text = (m.measured_by === "estimate" ? "about " : "") + figure(m.tokens) +
      (reading.pastMaximum ? " tokens" + failed + ", more than the " + figure(m.effective_input_tokens) + " one request may hold"
                           : " of " + figure(m.effective_input_tokens) + " tokens" + failed);
    if (m.streaming) text += " (a rough count in the browser while the answer streams)";
    if (m.trigger_tokens) {
      text += " · summarized at " + figure(m.trigger_tokens);  // what it aims for: the legend
      // A summary being prepared is committed when ready, or sooner if the request would not fit.
      if (reading.pastTrigger && !failed) {
        text += reading.pastMaximum ? " · earlier messages will be summarized before the next answer"
          : compactionHeld ? " · summarizing is held back for now (" + compactionHeld + ")"
          : preparedState === "preparing" ? " · earlier messages will be summarized once the summary being prepared is ready"
          : " · earlier messages will be summarized before the next answer";
      }
    }
    return text;
  }

  // CTX-44 and CTX-51: past the trigger, a run may say summarizing is held back (after a
  // failed summary, or the person's Undo) until the conversation grows or time passes.
  var HELD_WORDS = {
    throttled_after_failure: "the last attempt failed; it is tried again once the conversation grows by a tenth " +
      "or in ten minutes",
    held_after_undo: "you undid the last summary; it resumes once the conversation grows by a tenth"
  };
  var compactionHeld = "";

  function meterHeld(reason) {
    var words = HELD_WORDS[reason] || "";
    if (words === compactionHeld) return;
    compactionHeld = words;
    meterRelabel();
  }

  function meterLegend(m) {
    var legend = document.getElementById("meter-legend");
    if (!legend) return;
    legend.hidden = !m.trigger_tokens;
    var values = { prepare: m.prepare_tokens, trigger: m.trigger_tokens, target: m.target_tokens,
                   maximum: m.effective_input_tokens };
    legend.querySelectorAll("[data-legend]").forEach(function (node) {
      node.textContent = figure(values[node.getAttribute("data-legend")]);
    });
  }

  function meterMark(name, value, max) {
    var mark = document.querySelector("[data-mark='" + name + "']");
    if (!mark) return;
    mark.hidden = !(value && max);
    if (!mark.hidden) mark.style.left = Math.min(100, (100 * value) / max).toFixed(2) + "%";
  }

  function meterSet(m) {
    if (!meter || !m || !m.effective_input_tokens) return;
    meterLast = m;
    meterExtraChars = 0;
    meterShow(m);
  }

  function meterGrow(chars, again) {
    // What the browser sent or received since the server's last figure: the question, the streamed answer.
    if (!meterLast || (!chars && !again)) return;
    meterExtraChars += chars;
    var m = {};
    for (var name in meterLast) m[name] = meterLast[name];
    m.tokens = (meterLast.tokens || 0) + Math.ceil(meterExtraChars / CHARS_PER_TOKEN);
    m.measured_by = "estimate";
    m.failed_request = false;
    m.streaming = true;
    meterShow(m);
  }

  function meterShow(m) {
    meter.max = m.effective_input_tokens;
    meter.value = meterReading(m).value;  // never above its maximum
    meter.setAttribute("data-tokens", String(m.tokens || 0));
    if (m.target_tokens) meter.low = m.target_tokens; else meter.removeAttribute("low");
    if (m.trigger_tokens) meter.high = m.trigger_tokens; else meter.removeAttribute("high");
    var label = meterLabel(m);
    meter.textContent = label;
    if (meterFigures) meterFigures.textContent = label;
    meterMark("target", m.target_tokens, m.effective_input_tokens);
    meterMark("trigger", m.trigger_tokens, m.effective_input_tokens);
    meterMark("prepare", m.prepare_tokens, m.effective_input_tokens);
    meterLegend(m);
  }

  function meterRelabel() {
    // The words depend on the summary's state too (being prepared or not).
    if (!meter || !meterLast) return;
    if (meterExtraChars) meterGrow(0, true); else meterShow(meterLast);
  }

  // CTX-45: a summary prepared in the background, so that compacting takes no waiting.
  var preparedNote = document.getElementById("prepared-note");
  // Only what is known: a prepared summary is used if the conversation it covers is
  // unchanged when summarizing is needed; otherwise a new one is made then.
  var PREPARED_WORDS = {
    preparing: "Preparing a summary of earlier messages in the background; you can go on meanwhile.",
    ready: "A summary of earlier messages is ready in advance; it is used when summarizing is needed, " +
           "if what it covers has not changed."
  };
  var preparedState = null;
  var preparedTimer = null;

  function preparedSet(status) {
    var was = preparedState;
    preparedState = PREPARED_WORDS[status] ? status : null;
    if (was !== preparedState) meterRelabel();
    if (!preparedNote) return;
    // One state at a time: while earlier messages are being summarized, that is what is said.
    var shown = compacting ? null : preparedState;
    preparedNote.textContent = shown ? PREPARED_WORDS[shown] : "";
    preparedNote.hidden = !shown;
    preparedNote.setAttribute("data-prepared", shown || "");
  }

  // ---------------------------------------------------------------- a compaction under way
  // Said in the status line, one state at a time, with how long it has taken and, for a
  // summary made in parts, how many parts are done (compaction_progress).
  var compacting = null;  // {started: ms, done: parts done, of: parts planned, retrying: bool}
  var compactingTimer = null;

  function compactingWords() {
    var text = "Summarizing earlier messages";
    if (compacting.awaited) text += " (finishing the summary prepared in the background)";
    if (compacting.of > 1 || compacting.done) {
      text += ": " + compacting.done + " of " + compacting.of + (compacting.of === 1 ? " part" : " parts") + " done";
    }
    if (compacting.retrying) text += ", asking the model again";
    var seconds = Math.floor((Date.now() - compacting.started) / 1000);
    return text + "… " + (seconds >= 1 ? seconds + " s" : "");
  }

  function compactingShow() {
    if (!compacting) return;
    setStatus(compactingWords().trim(), true);
  }

  function compactingStart(data) {
    meterHeld(null);
    if (!compacting) compacting = { started: Date.now(), done: 0, of: 0, retrying: false, awaited: false };
    if (data && data.prepared_awaited) compacting.awaited = true;
    clearInterval(compactingTimer);
    compactingTimer = setInterval(compactingShow, 1000);
    preparedSet(preparedState);  // hidden meanwhile
    compactSync();
    compactingShow();
  }

  function compactingProgress(data) {
    if (!compacting) compactingStart();
    var of = Number(data.of) || 1;
    compacting.of = Math.max(of, compacting.of);
    if (data.ok) {
      compacting.done = Math.min(compacting.of, Math.max(compacting.done, Number(data.segment || 0) + 1));
      compacting.retrying = false;
    } else {
      compacting.retrying = true;
    }
    compactingShow();
  }

  function compactingEnd() {
    if (!compacting) return;
    compacting = null;
    clearInterval(compactingTimer);
    preparedSet(preparedState);
    compactSync();
  }

  // Compact now is offered only when it can start: not while an answer is being written
  // (the run summarizes by itself when it needs to) nor while a summary is being made.
  function compactSync() {
    if (!compactButton) return;
    var why = compacting ? "Not available: earlier messages are being summarized now."
      : live ? "Not available while the agent is answering; it summarizes by itself when it needs room."
      : compactRequested ? "Asking for a summary…" : "";
    compactButton.disabled = !!why;
    if (why) compactButton.setAttribute("title", why); else compactButton.removeAttribute("title");
    var whyNode = document.getElementById("compact-why");
    if (whyNode) whyNode.textContent = why;
  }
  var compactRequested = false;

  function preparedRefresh(startedAt, waitMs) {
    // Ask the session how its summary goes (GET /api/v1/sessions/{id}: prepared_summary);
    // while one is being prepared and no run is followed, ask again later.
    clearTimeout(preparedTimer);
    request("GET", config.urls.session).then(function (result) {
      if (live || !result.ok || !result.data) return;  // a working run's events say it from now on
      var state = result.data.prepared_summary;
      preparedSet(state ? state.status : null);
      preparedWatch(startedAt, waitMs);
    });
  }

  function preparedWatch(startedAt, waitMs) {
    clearTimeout(preparedTimer);
    startedAt = startedAt || Date.now();
    waitMs = waitMs || PREPARED_POLL_MS;
    if (live || preparedState !== "preparing" || Date.now() - startedAt > PREPARED_WATCH_MS) return;
    preparedTimer = setTimeout(function () {
      preparedRefresh(startedAt, Math.min(waitMs * 1.5, PREPARED_POLL_MAX_MS));
    }, waitMs);
  }

  function watchCompaction(runId) {
    // A manual compaction of a finished run is done by a worker: follow that run's events
    // until it says how it went, then show the run again (with its summary marker).
    var section = document.getElementById("run-" + runId);
    var after = section ? Number(section.getAttribute("data-last-seq") || 0) : 0;
    var source = new EventSource(url("events", runId) + "?after=" + after);
    var ended = false;
    var end = function (text) {
      if (ended) return;
      ended = true;
      source.close();
      clearTimeout(timer);
      compactingEnd();
      setStatus(text, false);
      loadRun(runId);
      preparedRefresh();  // a compaction ends every summary prepared of the view it replaced
    };
    var timer = setTimeout(function () {
      end("Summarizing is taking longer than expected; it goes on in the background.");
    }, COMPACTION_WATCH_MS);
    source.addEventListener(EVENT.CONTEXT_MEASURED, function (event) {
      try { meterSet(JSON.parse(event.data)); } catch (e) { /* a malformed event changes nothing */ }
    });
    source.addEventListener(EVENT.COMPACTION_STARTED, function (event) {
      try { compactingStart(JSON.parse(event.data) || {}); } catch (e) { compactingStart(); }
    });
    source.addEventListener(EVENT.COMPACTION_PROGRESS, function (event) {
      try { compactingProgress(JSON.parse(event.data) || {}); } catch (e) { /* a malformed event changes nothing */ }
    });
    COMPACTION_ENDS.forEach(function (type) {
      source.addEventListener(type, function (event) {
        var data = {};
        try { data = JSON.parse(event.data) || {}; } catch (e) { /* the words below still fit */ }
        // CTX-47: a compaction that only folded older tool results summarized nothing.
        var tiers = data.tiers || [];
        end(type === EVENT.COMPACTED && tiers.indexOf("mask") >= 0 && tiers.indexOf("summary") < 0
            ? "Older tool results were folded to save room; open one to read it whole." : COMPACTION_END_WORDS[type]);
      });
    });
  }

  function compactNow() {
    if (!compactButton || compactButton.disabled) return;
    compactRequested = true;
    compactSync();
    showAlert("");
    request("POST", config.urls.compact).then(function (result) {
      compactRequested = false;
      if (!result.ok) {
        compactSync();
        showAlert(requestError(result));
        return;
      }
      if (result.data.status === "queued") {
        compactingStart();
        watchCompaction(result.data.run);
      } else {
        // The working run summarizes before its next step; its events show it.
        compactSync();
        setStatus("The agent will summarize earlier messages before its next step.", true);
      }
    });
  }

  // ---------------------------------------------------------------- one working run
  function LiveRun(section, after, written) {
    this.section = section;
    this.written = written || {};  // supplement texts by id, for the ones the events announce
    this.id = Number(section.getAttribute("data-run-id"));
    this.lastSeq = after || 0;
    this.area = section.querySelector("[data-live-area]");
    if (!this.area) {
      this.area = el("div", "live");
      this.area.setAttribute("data-live-area", "");
      section.append(this.area);
    }
    this.block = null;      // the text block being streamed: {bubble, from}
    this.thinking = null;
    this.steps = {};
    this.received = {};     // supplement ids the run has announced
    this.source = null;
    this.reader = null;     // the asking response's events, while they are read (askStreaming)
    this.done = false;
    this.finishing = false;
    this.retryMs = 1000;
    this.lastActivity = Date.now();
    this.watchdog = null;
    this.approvalPoll = null;
  }

  // Tool calls waiting for the person's approval (static/web/approvals.js): their cards,
  // the decisions sent from them, and what another tab decided.
  var APPROVAL_WORDS = config.approvalWords;
  var approvals = window.AgentLoomApprovals && transcript ? new window.AgentLoomApprovals({
    transcript: transcript, words: APPROVAL_WORDS, labels: config.toolLabels,
    url: function (runId) { return url("approvals", runId); },
    send: function (path, body) { return request("POST", path, body); },
    explain: requestError, alert: showAlert,
    changed: function (section) { if (live && live.section === section) live.approvalsChanged(); }
  }) : null;

  // A queued run a worker could not start yet because its person (or space) has as many
  // answers in progress as allowed: it starts by itself as soon as one of them ends.
  function serverWaitWords(data) {
    var until = data.until ? new Date(data.until) : null;
    if (!until || isNaN(until.getTime())) return String(data.text || waitingWords("model_server", 0));
    var hhmm = until.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    return "Waiting for the model server until " + hhmm + ": it asked us to wait before asking again. " +
      "Nothing is lost; the answer goes on by itself then.";
  }

  function waitingWords(reason, limit) {
    if (reason === "model_server") {
      return "Waiting for the model server: it asked us to wait before asking again. " +
        "Nothing is lost; the answer goes on by itself then.";
    }
    var many = limit ? limit + (limit === 1 ? " answer" : " answers") : "as many answers as allowed";
    if (reason === "space_limit") {
      return "Waiting: this space already has " + many + " in progress at once. " +
        "This question starts as soon as one of them ends.";
    }
    return "Waiting for your earlier questions: you already have " + many + " in progress at once. " +
      "This one starts as soon as one of them ends.";
  }

  // CAT-11: a call waits for the model server, which answers only so many requests at once.
  function modelWaitingWords(concurrency) {
    var n = Number(concurrency) || 1;
    var at_once = n === 1 ? "one request" : n + " requests";
    return "Waiting for the model server (it answers " + at_once + " at a time)…";
  }

  LiveRun.prototype.start = function (events) {
    this.section.setAttribute("data-live", "1");
    var queued = this.section.getAttribute("data-status") === "queued";
    var waiting = this.section.getAttribute("data-waiting");
    var notBefore = this.section.getAttribute("data-not-before");
    var words = waiting === "model_server" && notBefore ? serverWaitWords({ until: notBefore })
      : waiting ? waitingWords(waiting, 0) : "Waiting for a worker…";
    var forPerson = this.section.getAttribute("data-status") === "waiting";
    // Waiting for a person is said as such: not "Working…", nothing runs meanwhile.
    setStatus(queued ? words : forPerson ? APPROVAL_WORDS.runWaiting : "Working…", !forPerson);
    if (events) this.read(events); else this.connect();
    var self = this;
    this.watchdog = setInterval(function () { self.check(); }, WATCHDOG_MS);
    this.approvalPoll = setInterval(function () { self.approvalsCheck(); }, APPROVAL_POLL_MS);
  };

  LiveRun.prototype.approvalsCheck = function () {
    // A call waits here: was it decided elsewhere (another tab, the API)? The event says
    // so too; this also reaches a page whose stream is down (GET /chat/sessions/{id}/state).
    if (this.done || this.finishing || !approvals || document.hidden || !config.urls.state ||
        !approvals.waiting(this.section)) return;
    var self = this;
    request("GET", config.urls.state + "?after=" + this.id).then(function (result) {
      if (!result.ok || self.done || self.finishing) return;
      if (result.data.active_run !== self.id) {
        self.finish();  // stopped elsewhere, or over: shown as it ended
        return;
      }
      approvals.reconcile(self.section, result.data.approvals);
    });
  };

  LiveRun.prototype.approvalRequested = function (data) {
    var step = this.steps[String(data.call_id || "")];
    if (step) this.stepSet(step, "awaiting", config.stepStatus.awaiting);
    this.section.removeAttribute("data-waiting");
    this.section.setAttribute("data-status", "waiting");
    if (approvals) approvals.requested(this.section, this.area, step ? step.details : null, data);
    setStatus(APPROVAL_WORDS.runWaiting, false);
    if (approvals) approvals.sidebar(config.sessionId, true);
  };

  LiveRun.prototype.approvalDecided = function (data) {
    var step = this.steps[String(data.call_id || "")];
    if (step && data.decision === "approved") this.stepSet(step, "requested", "approved");
    else if (step && data.decision) this.stepSet(step, "denied", config.stepStatus.denied);
    if (approvals) approvals.decided(this.section, data);
  };

  LiveRun.prototype.approvalsChanged = function () {
    // The status line says what the run waits for: the person while a call still waits,
    // then that the run goes on (it is queued again once every waiting call is decided).
    if (this.section.getAttribute("data-status") !== "waiting") return;
    var waiting = approvals.waiting(this.section);
    setStatus(waiting ? APPROVAL_WORDS.runWaiting : APPROVAL_WORDS.goesOn, !waiting);
    approvals.sidebar(config.sessionId, waiting > 0);
  };

  LiveRun.prototype.read = function (reader) {
    // The events of the response that asked the question (askStreaming). If it ends or
    // breaks before the run is over, the run is followed as always: an EventSource from
    // the last event shown, which then reconnects by itself.
    var self = this;
    var decoder = new TextDecoder();
    var pending = "";
    this.reader = reader;
    var frame = function (text) {
      var id = null, type = "", data = [];
      text.split("\n").forEach(function (line) {
        if (line.indexOf("id: ") === 0) id = line.slice(4);
        else if (line.indexOf("event: ") === 0) type = line.slice(7);
        else if (line.indexOf("data: ") === 0) data.push(line.slice(6));
      });
      if (id !== null && EVENT_TYPES.indexOf(type) >= 0) self.receive(type, { lastEventId: id, data: data.join("\n") });
    };
    var fallBack = function () {
      if (self.reader !== reader) return;
      self.reader = null;
      if (self.done || self.finishing) return;
      self.disconnected = true;  // said as the EventSource says it, and "Reconnected" once it opens
      setStatus("Connection lost — reconnecting…", true);
      self.connect();
    };
    var pump = function () {
      return reader.read().then(function (chunk) {
        if (self.reader !== reader) return;
        if (chunk.done) return fallBack();
        pending += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
        var end;
        while ((end = pending.indexOf("\n\n")) >= 0) {
          frame(pending.slice(0, end));
          pending = pending.slice(end + 2);
          if (self.reader !== reader) return;
        }
        return pump();
      });
    };
    pump().catch(fallBack);
  };

  LiveRun.prototype.stopReading = function () {
    var reader = this.reader;
    this.reader = null;
    if (reader) reader.cancel().catch(function () { /* already ended */ });
  };

  LiveRun.prototype.connect = function () {
    if (this.done) return;
    var self = this;
    // `after` only matters for this first request; the browser's own reconnections
    // send Last-Event-ID, which the server prefers.
    var source = new EventSource(url("events", this.id) + "?after=" + this.lastSeq);
    this.source = source;
    EVENT_TYPES.forEach(function (type) {
      source.addEventListener(type, function (event) { self.receive(type, event); });
    });
    source.onopen = function () {
      self.retryMs = 1000;
      self.failures = 0;
      if (self.disconnected) {
        self.disconnected = false;
        setStatus("Reconnected. Working…", true);
      }
    };
    source.onerror = function () {
      if (self.done || source !== self.source) return;
      self.disconnected = true;
      // Each failed try to get back; after a few the server is unreachable, not just a blip.
      self.failures = (self.failures || 0) + 1;
      setStatus(self.failures > UNREACHABLE_AFTER
        ? "The server cannot be reached — still trying. Nothing is lost; check your connection."
        : "Connection lost — reconnecting…", true);
      if (source.readyState === EventSource.CLOSED) {
        // The browser gave up (an HTTP error, not a drop): retry ourselves, backing off.
        source.close();
        setTimeout(function () { if (source === self.source) self.connect(); }, self.retryMs);
        self.retryMs = Math.min(self.retryMs * 2, 15000);
      }
    };
  };

  LiveRun.prototype.close = function () {
    this.done = true;
    this.stopReading();
    if (this.source) this.source.close();
    clearInterval(this.watchdog);
    clearInterval(this.approvalPoll);
  };

  LiveRun.prototype.check = function () {
    // A run can end without a run_finished event reaching us (a reaped worker): ask.
    if (this.done || this.finishing || Date.now() - this.lastActivity < QUIET_MS) return;
    var self = this;
    request("GET", url("run", this.id)).then(function (result) {
      if (result.ok && !ACTIVE[result.data.status]) self.finish();
    });
  };

  LiveRun.prototype.receive = function (type, event) {
    var seq = Number(event.lastEventId);
    if (this.done || !(seq > this.lastSeq)) return;  // already shown (a replay overlap)
    this.lastSeq = seq;
    this.lastActivity = Date.now();
    var data = {};
    try { data = JSON.parse(event.data) || {}; } catch (e) { data = {}; }
    var stick = nearBottom();
    this.apply(type, data, seq);
    if (stick) toBottom();
  };

  LiveRun.prototype.apply = function (type, data, seq) {
    var main = !data.instance || data.instance === "main";
    switch (type) {
      case EVENT.RUN_WAITING:
        if (data.reason === "approval") {
          this.section.setAttribute("data-status", "waiting");
          setStatus(APPROVAL_WORDS.runWaiting, false);
        } else if (data.reason === "model_server") {
          // Back in the queue until the model's server's time (LOOP-3): said with the time
          // in the reader's own zone; the answer goes on by itself then.
          this.section.setAttribute("data-status", "queued");
          this.section.setAttribute("data-waiting", "model_server");
          setStatus(serverWaitWords(data), true);
        } else if (this.section.getAttribute("data-status") === "queued") {
          setStatus(waitingWords(data.reason, data.limit), true);
        }
        break;
      case EVENT.MODEL_WAITING:
        setStatus(modelWaitingWords(data.concurrency), true);
        break;
      case EVENT.MODEL_WAITED:
        setStatus("Working…", true);
        break;
      case EVENT.RUN_STARTED:
        // Started again after a person's decision is no Resume: the run goes on.
        var decided = this.section.getAttribute("data-status") === "waiting";
        this.section.removeAttribute("data-waiting");
        this.section.setAttribute("data-status", "running");
        setStatus(data.attempt && !decided ? "Resumed — working…" : "Working…", true);
        break;
      case EVENT.APPROVAL_REQUESTED:
        this.closeText(seq, true);
        this.approvalRequested(data);
        break;
      case EVENT.APPROVAL_DECIDED:
        this.approvalDecided(data);
        break;
      case EVENT.MESSAGE_DELTA:
        if (main) this.appendText(String(data.text || ""), seq);
        break;
      case EVENT.THINKING_DELTA:
        if (main) this.appendThinking(String(data.text || ""));
        break;
      case EVENT.TOOL_CALL_DETECTED:
        this.closeText(seq, true);
        this.stepDetected(data);
        break;
      case EVENT.TOOL_STARTED:
        this.stepSet(this.step(data), "running", "running");
        setStatus("Running " + (data.name ? toolLabel(data.name) : "a tool") + "…", true);
        break;
      case EVENT.TOOL_PROGRESS:
        this.stepProgress(data);
        break;
      case EVENT.TOOL_FINISHED:
        this.stepFinished(data);
        if (approvals) approvals.ran(this.section, String(data.call_id || ""));
        setStatus("Working…", true);
        break;
      case EVENT.SUPPLEMENT_RECEIVED:
        this.supplementReceived(String(data.id || ""));
        break;
      case EVENT.COMPACTION_STARTED:
        if (main) compactingStart(data);
        break;
      case EVENT.COMPACTION_PROGRESS:
        if (main) compactingProgress(data);
        break;
      case EVENT.PROMPT_TRUNCATED:
        // CAT-10: the server cut the prompt without refusing: the answer shown so far read a
        // conversation without its beginning; it is dropped and the question asked again.
        if (main && this.block) {
          this.block.bubble.textContent = "";
          this.block.from = seq;
        }
        this.notice(String(data.message || "The model's server dropped part of this conversation; it is " +
                           "summarized to fit and the question asked once more."), seq);
        break;
      case EVENT.COMPACTION_FAILED:
        if (main) compactingEnd();
        this.notice("Compacting earlier messages did not succeed; the run goes on with what fits.", seq);
        break;
      case EVENT.COMPACTION_SKIPPED:
        // The trigger fired while a summary was still being prepared: it is committed later.
        if (main) compactingEnd();
        if (main) meterHeld(data.reason);
        if (data.reason === "summary_being_prepared") preparedSet("preparing");
        break;
      case EVENT.COMPACTION_PREPARING:
        preparedSet("preparing");
        break;
      case EVENT.COMPACTION_PREPARED:
        preparedSet("ready");
        break;
      case EVENT.COMPACTED:
        if (main) {
          // CTX-47: which tier ran -- older tool results folded, with no summary, or a summary;
          // CTX-48: a summary the platform wrote from the records says so, in plain words.
          var tiers = data.tiers || [];
          compactingEnd();
          this.notice(tiers.indexOf("summary") < 0 && tiers.indexOf("mask") >= 0 ? config.foldedNotice
                      : data.summary_source === "code" ? config.compactedByCodeNotice : config.compactedNotice, seq);
          setStatus("Working…", true);
          preparedSet(null);
        }
        break;
      case EVENT.CONTEXT_MEASURED:
        // A main step is over (or a compaction): what streams next is the next step's,
        // shown after any supplement sent meanwhile, as the records order them.
        this.closeText(seq, true);
        meterSet(data);
        break;
      case EVENT.PLAN_UPDATED:
        if (main) this.plan(data.steps || []);
        break;
      case EVENT.INPUT_REQUESTED:
        this.closeText(seq, true);
        this.question(data);
        break;
      case EVENT.INPUT_ANSWERED:
        this.questionAnswered(data);
        break;
      case EVENT.SUB_INSTANCE_STARTED:
        setStatus("A sub-agent is working on a delegated task…", true);
        break;
      case EVENT.SUB_INSTANCE_FINISHED:
        setStatus("Working…", true);
        break;
      case EVENT.RUN_ERROR:  // never "error": EventSource would also call its connection-lost handler
        this.error(data, main, seq);
        break;
      case EVENT.RUN_FINISHED:
        this.closeText(seq, false);
        this.finish();
        break;
    }
  };

  LiveRun.prototype.appendText = function (text, seq) {
    if (!text) return;
    if (!this.block) {
      var msg = el("div", "msg msg-assistant");
      msg.append(el("p", "who", config.agentName));
      var bubble = el("div", "bubble bubble-assistant plain streaming");
      msg.append(bubble);
      this.area.append(msg);
      this.block = { bubble: bubble, from: seq - 1 };
    }
    this.block.bubble.append(document.createTextNode(text));  // text, never markup
    meterGrow(text.length);
  };

  LiveRun.prototype.closeText = function (boundarySeq, render) {
    var block = this.block;
    this.block = null;
    this.thinking = null;
    if (!block) return;
    block.bubble.classList.remove("streaming");
    if (!render) return;  // the whole run is re-rendered by the server at its end
    var query = "?after=" + block.from + "&upto=" + (boundarySeq - 1);
    request("GET", url("text", this.id) + query).then(function (result) {
      if (!result.ok || !block.bubble.isConnected) return;
      block.bubble.innerHTML = result.data.html;  // sanitised on the server (web/markdown.py)
      block.bubble.classList.remove("plain");
      block.bubble.classList.add("markdown");
    });
  };

  LiveRun.prototype.appendThinking = function (text) {
    if (!text) return;
    if (!this.thinking) {
      var details = el("details", "thinking");
      details.append(el("summary", null, "Thinking"));
      this.thinking = el("div", "plain");
      details.append(this.thinking);
      this.area.append(details);
    }
    this.thinking.append(document.createTextNode(text));
  };

  LiveRun.prototype.step = function (data) {
    var key = String(data.call_id || "");
    var step = this.steps[key];
    if (step) return step;
    var details = el("details", "step step-requested");
    details.setAttribute("data-call-id", key);
    var summary = el("summary");
    var status = el("span", "step-status", "requested");
    var duration = el("span", "step-duration");
    summary.append(el("span", "step-kind", "Tool"), " ", stepName(data.name || "tool"), " ", status, " ",
                   duration);
    var body = el("div", "step-body");
    details.append(summary, body);
    this.area.append(details);
    step = { details: details, status: status, duration: duration, body: body };
    this.steps[key] = step;
    return step;
  };

  function stepName(name) {
    var node = el("span", "step-name", toolLabel(name));
    node.setAttribute("data-tool", name);
    return node;
  }

  LiveRun.prototype.stepSet = function (step, cls, label) {
    step.details.className = "step step-" + cls;
    step.status.textContent = label;
  };

  LiveRun.prototype.stepDetected = function (data) {
    var step = this.step(data);
    // A memory call in words, as the server shows it after the run (web/memory_words.py).
    var memory = window.AgentLoomMemory;
    var memoryWords = memory ? memory.stepWords(data.name, data.arguments, config.memoryWords) : "";
    if (memoryWords) step.details.querySelector(".step-name").textContent = memoryWords;
    if (data.arguments) {
      step.body.append(el("p", "step-label", "Arguments"), argumentsBlock(data.arguments));
    }
    setStatus("The agent is calling " + (data.name ? toolLabel(data.name) : "a tool") + "…", true);
  };

  function argumentsBlock(arguments_) {
    // JSON indented, as the server shows it (transcript.arguments_pretty); always as text.
    var text = typeof arguments_ === "string" ? arguments_ : JSON.stringify(arguments_);
    try {
      var parsed = JSON.parse(text);
      if (parsed && typeof parsed === "object") text = JSON.stringify(parsed, null, 2);
    } catch (e) { /* not JSON: shown as it came */ }
    return el("pre", "step-pre", text);
  }

  LiveRun.prototype.stepProgress = function (data) {
    // A tool server's progress notification (TOOL-4): a bar when the total is known, and
    // the server's own words, as text.
    var step = this.step(data);
    if (!step.progress) {
      step.progress = el("progress", "step-progress");
      step.progressText = el("span", "step-progress-text");
      step.details.querySelector("summary").append(" ", step.progress, " ", step.progressText);
    }
    var done = Number(data.progress) || 0;
    var total = Number(data.total) || 0;
    if (total > 0) {
      step.progress.max = total;
      step.progress.value = Math.min(done, total);
    } else {
      step.progress.removeAttribute("value");  // indeterminate
    }
    var words = String(data.message || "");
    step.progress.setAttribute("aria-label", "Progress of " + (data.name ? toolLabel(data.name) : "the tool"));
    step.progressText.textContent = words || (total > 0 ? Math.round(100 * done / total) + "%" : "working");
  };

  LiveRun.prototype.stepFinished = function (data) {
    var step = this.step(data);
    var status = data.status || "ok";
    this.stepSet(step, status, config.stepStatus[status] || status);
    if (step.progress) {
      step.progress.remove();
      step.progressText.remove();
      step.progress = null;
    }
    if (typeof data.duration_ms === "number" && status !== "denied") {  // a denied call never ran
      step.duration.textContent = data.duration_ms < 1000 ? data.duration_ms + " ms"
        : (data.duration_ms / 1000).toFixed(1) + " s";
    }
  };

  LiveRun.prototype.plan = function (steps) {
    // The agent's checklist, beside the run while it works (update_plan); replaced whole.
    var aside = this.section.querySelector("[data-plan]");
    if (!aside) {
      aside = el("aside", "plan");
      aside.setAttribute("data-plan", "");
      aside.setAttribute("aria-label", "The agent's plan");
      var title = el("p", "plan-title", "Plan ");
      var count = el("span", "muted");
      count.setAttribute("data-plan-count", "");
      title.append(count);
      aside.append(title, el("ol", "plan-steps"));
      // After the question it belongs to, as the server places it (templates/web/_run.html).
      var question = this.section.querySelector(".msg-user, .notice");
      if (question && question.parentNode === this.section) question.after(aside); else this.section.prepend(aside);
    }
    var list = aside.querySelector("ol");
    list.textContent = "";
    var done = 0;
    steps.forEach(function (step) {
      var status = String(step.status || "pending");
      if (status === "done") done += 1;
      var item = el("li", "plan-step plan-" + status);
      item.append(el("span", "plan-status", config.planStatus[status] || status), " ",
                  el("span", "plan-text", String(step.step || "")));
      list.append(item);
    });
    aside.querySelector("[data-plan-count]").textContent = done + " of " + steps.length + " done";
  };

  // TOOL-10: a tool server asks the person during a call (static/web/inputs.js builds the card).
  LiveRun.prototype.question = function (data) {
    var runId = this.id;
    var node = window.AgentLoomInputs.card(data, function (body) {
      return request("POST", url("inputs", runId), body);
    });
    this.area.append(node);
    setStatus((data.server || "A tool server") + " is waiting for your answer…", true);
    var first = node.querySelector("input, select, a.input-open");
    if (first && nearBottom()) first.focus({ preventScroll: true });
  };

  LiveRun.prototype.questionAnswered = function (data) {
    window.AgentLoomInputs.done(document.getElementById("input-" + data.input_id), data.status);
    setStatus("Working…", true);
  };

  LiveRun.prototype.notice = function (text, seq) {
    this.closeText(seq, true);
    this.area.append(el("p", "notice notice-quiet", text));
  };

  LiveRun.prototype.error = function (data, main, seq) {
    var e = explain(data);
    if (data.retrying_in !== undefined && data.retrying_in !== null) {
      // A transient fault the loop retries: say so quietly; a reset drops the failed attempt's text.
      if (main && data.reset && this.block) {
        this.block.bubble.textContent = "";
        this.block.from = seq;
      }
      setStatus(retryStatus(data), true);
      return;
    }
    this.closeText(seq, true);
    this.area.append(errorBox(data));
    setStatus(e.title + ".", false);
  };

  LiveRun.prototype.supplementBubble = function (id) {
    var bubbles = this.section.querySelectorAll(".msg-supplement[data-supplement-id]");
    for (var i = 0; i < bubbles.length; i++) {
      if (bubbles[i].getAttribute("data-supplement-id") === id) return bubbles[i];
    }
    return null;
  };

  LiveRun.prototype.placeSupplement = function (text, id, received) {
    // After all the run has shown so far: the model reads it once the step answering now
    // is over (RUN-5), which is where the records, and so a reloaded page, put it. The
    // step still streaming goes on in its bubble above.
    var bubble = userBubble("supplement", text, received ? "received" : "sent");
    bubble.setAttribute("data-supplement-id", id);
    if (!received) bubble.setAttribute("data-pending", id);
    this.area.append(bubble);
  };

  LiveRun.prototype.echoSupplement = function (text, id) {
    if (!this.supplementBubble(id)) this.placeSupplement(text, id, Boolean(this.received[id]));
  };

  LiveRun.prototype.supplementReceived = function (id) {
    // The event can arrive before the POST that sent the supplement has answered, and a
    // reloaded page replays it: the text then comes from the page (this.written).
    this.received[id] = true;
    var bubble = this.supplementBubble(id);
    if (bubble) {
      bubble.removeAttribute("data-pending");
      bubble.querySelector(".who").textContent = "You · supplement (received)";
    } else if (this.written[id] !== undefined) {
      this.placeSupplement(this.written[id], id, true);
    }
    setStatus("Supplement received: the agent reads it at the next safe point.", true);
  };

  // Its cause (the output limit, or the server's context filling: CAT-12) is in the note under the answer.
  var CUT_WORDS = "The answer stopped before its end (the note under it says why) — Continue to get the rest.";

  function endingWords(data) {
    // A stopped run says so once, in the transcript ("You stopped this answer."); a cut or
    // empty answer is never "complete" and says what to do next (an error code's own
    // ending words are the server's, RunErrorCode.ended).
    var coded = data.ending && config.errors.runs[data.ending];
    if (data.ending === "cut") return CUT_WORDS;
    if (coded && coded.ended) return coded.ended;
    return { completed: "Answer complete.", cancelled: "",
      failed: "The run failed — see the message above.", interrupted: "Interrupted." }[data.status] || "";
  }

  LiveRun.prototype.finish = function () {
    if (this.finishing || this.done) return;
    this.finishing = true;
    this.stopReading();
    if (this.source) this.source.close();
    var self = this;
    request("GET", url("fragment", this.id)).then(function (result) {
      if (result.ok && result.data.active) {
        // It was resumed meanwhile (or a replay passed an earlier attempt's end): keep following.
        self.finishing = false;
        self.connect();
        return;
      }
      var hadFocus = self.section.contains(document.activeElement) || document.activeElement === stopButton;
      self.close();
      if (approvals) approvals.sidebar(config.sessionId, false);  // nothing of it waits any more
      if (live === self) live = null;
      if (result.ok) {
        self.section.replaceWith(fromHTML(result.data.html));
        if (result.data.meter) meterSet(result.data.meter);  // a failed request leaves its size
        pinsRefresh();  // the agent may have pinned (update_plan), and the run's messages are new
      } else {
        self.section.removeAttribute("data-live");
      }
      setMode("ask");
      attachedAlertClear();
      preparedRefresh();  // a summary may be prepared while the session is idle
      setStatus(result.ok ? endingWords(result.data) : "", false);
      if (hadFocus || document.activeElement === document.body) box.focus();
      if (nearBottom()) toBottom();
    });
  };

  // ---------------------------------------------------------------- attachments (attach.js, RUN-13)
  // Files upload into a session, so a new chat's first attached file starts its session
  // (POST /api/v1/sessions): from then on the page is that session's (docs/web.md).
  var attachInput = document.getElementById("attach-input");
  var sessionStarting = null;

  function sessionReady() {
    if (config.sessionId) return Promise.resolve(config.sessionId);
    if (!sessionStarting) {
      sessionStarting = request("POST", config.urls.sessions, { agent: config.agentId }).then(function (result) {
        if (!result.ok) {
          sessionStarting = null;
          return Promise.reject("the chat could not be started: " + requestError(result));
        }
        config.sessionId = result.data.id;
        config.startedHere = true;
        config.urls.questions = url("sessionQuestions", result.data.id);
        history.replaceState(null, "", url("sessionPage", result.data.id));
        return result.data.id;
      });
    }
    return sessionStarting;
  }

  var attachments = attachInput && window.AgentLoomAttachments ? new window.AgentLoomAttachments({
    input: attachInput,
    list: document.getElementById("attachment-chips"),
    dropTargets: [composer, transcript],
    uploadUrl: function () { return sessionReady().then(function (id) { return url("files", id); }); },
    csrfToken: function () { return cookie(config.csrfCookie); }
  }) : null;
  if (attachments && config.pendingFiles) attachments.restore(config.pendingFiles);  // after a reload

  function attachmentsBlock() {
    // Why the question cannot go yet, or "" when its files are ready.
    if (!attachments) return "";
    if (attachments.count("uploading")) return "Wait until the files have uploaded, then send.";
    if (attachments.count("failed")) return "Remove the files that could not be attached (marked in red), then send.";
    if (live && attachments.count()) {
      return "Files go with a new question: wait for this answer to end (or Stop it), then send.";
    }
    return "";
  }

  // ---------------------------------------------------------------- the composer
  function setMode(mode) {
    if (!composer) return;
    composer.setAttribute("data-mode", mode);
    if (mode === "supplement") {
      boxLabel.textContent = "Add to the running answer (supplement)";
      sendButton.textContent = "Send supplement";
      box.setAttribute("placeholder", "Add a detail or a correction while it works…");
      stopButton.hidden = false;
      stopButton.disabled = false;
    } else {
      var stopHadFocus = document.activeElement === stopButton;
      boxLabel.textContent = "Your question";
      sendButton.textContent = "Send";
      box.setAttribute("placeholder", askPlaceholder);
      stopButton.hidden = true;
      if (stopHadFocus) box.focus();
    }
    if (mode === "ask") compactingEnd();  // a run that ended (stopped, failed) mid-compaction
    compactSync();  // Compact now waits while a run works
  }

  function follow(section, after, written, events) {
    clearTimeout(preparedTimer);
    if (live) live.close();
    live = new LiveRun(section, after, written);
    setMode("supplement");
    live.start(events);
  }

  function ask(content) {
    if (!config.sessionId) return askFirst(content);
    var body = { content: content };
    var files = attachments ? attachments.ids() : [];
    if (files.length) body.files = files;
    return askStreaming(config.urls.questions, body).then(function (result) {
      if (!result.ok) {
        if (refusedForActiveRun(result)) return attachAfterRefusal(true);  // the text stays in the box
        showAlert(requestError(result));
        return;
      }
      if (attachments) attachments.clear();
      if (config.startedHere) {
        // A chat started by its first file: its own page (sidebar, Compact now) takes over.
        result.events.cancel().catch(function () { /* already ended */ });
        setStatus("Starting the chat…", true);
        window.location.replace(url("sessionPage", config.sessionId));
        return new Promise(function () {});
      }
      box.value = "";
      nameSession(content);
      meterGrow(content.length);  // the question is part of the next request
      return loadRun(result.data.id, true).then(function (section) {
        toBottom();
        if (section.getAttribute("data-live") === "1") follow(section, 0, undefined, result.events);
        else result.events.cancel().catch(function () { /* already ended */ });
      });
    });
  }

  function askFirst(content) {
    // A new chat is only a page until its first question: that creates the session, and
    // its page (where the answer streams) takes this one's place.
    return request("POST", config.urls.start, { agent: config.agentId, content: content }).then(function (result) {
      if (!result.ok) {
        showAlert(requestError(result));
        return;
      }
      setStatus("Starting the chat…", true);
      window.location.replace(result.data.url);
      return new Promise(function () {});  // the page is leaving: keep Send disabled
    });
  }

  function nameSession(question) {
    // The server titles a session after its first question; show it without a reload.
    var current = document.querySelector(".session-list a[aria-current='page'] .session-name");
    if (current && !transcript.querySelector("section.run")) current.textContent = question.trim().slice(0, 80);
    var heading = document.querySelector(".session-head [data-session-title]");  // static/web/sessions.js
    if (heading && !transcript.querySelector("section.run") && heading.textContent === "New chat") {
      heading.textContent = question.trim().slice(0, 80);
    }
  }

  function sendSupplement(content) {
    var run = live;
    return request("POST", url("supplements", run.id), { content: content }).then(function (result) {
      if (!result.ok) {
        showAlert(requestError(result));
        return;
      }
      box.value = "";
      if (live === run) run.echoSupplement(content, String(result.data.id || ""));
    });
  }

  function stopRun() {
    if (!live || !stopButton || stopButton.disabled) return;
    var run = live;
    stopButton.disabled = true;
    setStatus("Stopping…", true);
    request("POST", url("cancel", run.id)).then(function (result) {
      if (!result.ok) {
        stopButton.disabled = false;
        showAlert(requestError(result));
      } else if (!ACTIVE[result.data.status]) {
        run.finish();  // a queued run ends at once
      }
    });
  }

  // ---------------------------------------------------------------- other tabs and devices
  // The same session may be open in another tab or on another device, which asks, stops or
  // resumes too. While this page follows no run it asks the session, every few seconds and
  // only while it is visible (and at once when it is shown again), which run is working and
  // which runs are new (GET /chat/sessions/{id}/state): new finished runs are shown, a
  // working one is followed exactly as a reload follows it (docs/web.md). A plain request,
  // so an idle page holds no stream on the server.
  var STATE_POLL_MS = 4000;
  var stateAsking = null;
  var stateTimer = null;  // while set, this page asks the session every STATE_POLL_MS
  var attachedAlert = "";  // the words shown when a refused question attached this page to a run

  function runsShownLast() {
    var last = 0;
    transcript.querySelectorAll("section.run[data-run-id]").forEach(function (section) {
      last = Math.max(last, Number(section.getAttribute("data-run-id")) || 0);
    });
    return last;
  }

  function ownActionPending() {
    // This page is asking, resuming or continuing itself: what it gets back shows the run.
    return sending || Boolean(transcript.querySelector("[data-resume]:disabled, [data-continue]:disabled"));
  }

  function stateRunShow(runId, force) {
    // The run as the server renders it, in its place (or at the end when new); never over
    // a run this page has started following, or is starting itself, meanwhile.
    return request("GET", url("fragment", runId)).then(function (result) {
      if (!result.ok || live || (!force && ownActionPending())) return null;
      var section = fromHTML(result.data.html);
      var question = section.querySelector(".msg-user .bubble-user");
      if (question) nameSession(question.textContent);  // the session's first question titles it
      var existing = document.getElementById("run-" + runId);
      if (existing) existing.replaceWith(section); else transcript.append(section);
      if (section.querySelector("[data-undo-compaction]")) undoOffersElsewhereRemove(section);
      var empty = document.getElementById("empty-note");
      if (empty) empty.remove();
      return { section: section, data: result.data };
    });
  }

  function stateCheck(force) {
    // Resolves to the id of the run this page follows afterwards, 0 when none is working,
    // or null when the session could not be read.
    if (live) return Promise.resolve(live.id);
    if (!stateTimer || !composer || (!force && (document.hidden || ownActionPending()))) {
      return Promise.resolve(null);
    }
    if (stateAsking) {
      // A regular check under way stands back if this page starts something itself.
      return force ? stateAsking.then(function () { return stateCheck(true); }) : stateAsking;
    }
    stateAsking = request("GET", config.urls.state + "?after=" + runsShownLast()).then(function (result) {
      if (live) return live.id;
      if (result.status === 401 || result.status === 404) stateGone(result);
      if (!result.ok || (!force && ownActionPending())) return null;
      var active = result.data.active_run;
      var ids = result.data.runs.slice();
      if (active && ids.indexOf(active) < 0) ids.push(active);  // an older run resumed elsewhere
      var last = null;
      var shown = Promise.resolve();
      ids.forEach(function (id) {
        shown = shown.then(function () {
          return stateRunShow(id, force).then(function (run) { if (run) last = run; });
        });
      });
      return shown.then(function () {
        if (live) return live.id;
        if (active && !(last && last.data.id === active)) return null;  // its fragment could not be read
        if (!last) return 0;
        markPins();
        actionsOnLatestOnly();
        var stick = nearBottom();
        if (last.section.getAttribute("data-live") === "1") {
          follow(last.section, 0, last.data.supplements);  // replayed from its first event, as on a reload
        } else {
          if (last.data.meter) meterSet(last.data.meter);
          setStatus(endingWords(last.data), false);
          pinsRefresh();
        }
        if (stick) toBottom();
        return live ? live.id : 0;
      });
    }).then(function (followed) {
      stateAsking = null;
      return followed;
    }, function () {
      stateAsking = null;
      return null;
    });
    return stateAsking;
  }

  function actionsOnLatestOnly() {
    // Resume and Continue are offered on the session's latest run only: a run shown here
    // after them (asked elsewhere) makes an older run's offer untrue.
    var runs = transcript.querySelectorAll("section.run[data-run-id]");
    var latest = runs.length ? runs[runs.length - 1] : null;
    transcript.querySelectorAll("section.run .run-actions").forEach(function (actions) {
      if (!latest || !latest.contains(actions)) actions.remove();
    });
  }

  function refusedForActiveRun(result) {
    var error = result.status === 409 && result.data && result.data.error;
    return Boolean(error && error.code === "run_active");
  }

  function attachAfterRefusal(textKept) {
    // Refused because an answer is running (asked in another tab or on another device):
    // follow it here, and say what is on screen now and what happened to the text.
    return stateCheck(true).then(function (followed) {
      if (followed === 0) {
        showAlert("The answer that was running, asked from another tab or device, has ended meanwhile: it is " +
                  "shown above. " + (textKept ? "Your text is still in the box: send it again." : ""));
        return;
      }
      if (!followed) {
        showAlert(config.errors.requests.run_active);
        return;
      }
      attachedAlert = "An answer was already running in this session, asked from another tab or device: " +
        "it is shown above as it streams. " + (textKept
          ? "Your text is still in the box: press Send supplement to add it to that answer, or Stop to end " +
            "the answer, then send your text as a new question."
          : "Stop ends it; what you send meanwhile is added to it as a supplement.");
      showAlert(attachedAlert);
      if (box) box.focus();
    });
  }

  function attachedAlertClear() {
    // The run it spoke of has ended: its words (Send supplement, Stop) are no longer on screen.
    if (attachedAlert && alertBox && alertBox.textContent === attachedAlert) showAlert("");
    attachedAlert = "";
  }

  function stateGone(result) {
    // Logged out, or the session is no longer this person's (deleted, or its space left):
    // asking again every few seconds would change nothing.
    clearInterval(stateTimer);
    stateTimer = null;
    showAlert(result.status === 401 ? requestError(result)
      : "This chat can no longer be opened here: it was deleted, or you are no longer a member of its space. " +
        "Start a new chat from the list.");
  }

  if (composer && config.urls.state) {
    stateTimer = setInterval(function () { stateCheck(false); }, STATE_POLL_MS);
    document.addEventListener("visibilitychange", function () { if (!document.hidden) stateCheck(false); });
  }

  if (composer) composerOpenWhileFocused();

  function composerOpenWhileFocused() {
    // On a phone the composer is one line until it has the focus (chat.css, .is-open). Were
    // it to shrink as soon as the focus left, a press on any button above it (Resume, Pin,
    // Copy, Undo…) would move that button from under the finger between press and release,
    // and the click would land elsewhere: so it closes only once the press is over.
    var pressing = false;
    var closeWhenReleased = false;
    function close() { if (!composer.contains(document.activeElement)) composer.classList.remove("is-open"); }
    document.addEventListener("pointerdown", function () { pressing = true; }, true);
    ["pointerup", "pointercancel"].forEach(function (name) {
      document.addEventListener(name, function () {
        pressing = false;
        if (closeWhenReleased) {
          closeWhenReleased = false;
          setTimeout(close, 0);  // after the click this release makes
        }
      }, true);
    });
    composer.addEventListener("focusin", function () { composer.classList.add("is-open"); });
    composer.addEventListener("focusout", function () {
      if (pressing) closeWhenReleased = true; else setTimeout(close, 0);
    });
  }

  if (composer) {
    var sending = false;
    composer.addEventListener("submit", function (event) {
      event.preventDefault();
      var content = box.value;
      if (sending) return;
      if (!content.trim()) {
        showAlert("Write something first.");
        box.focus();
        return;
      }
      var blocked = attachmentsBlock();
      if (blocked) {
        showAlert(blocked);
        return;
      }
      sending = true;
      sendButton.disabled = true;
      showAlert("");
      var done = function () { sending = false; sendButton.disabled = false; };
      (live ? sendSupplement(content) : ask(content)).then(done, done);
    });
    box.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        composer.requestSubmit();
      }
    });
    stopButton.addEventListener("click", stopRun);
  }
  if (compactButton) {
    compactButton.addEventListener("click", compactNow);
  }
  meterSet(config.meter);
  preparedSet(config.prepared && config.prepared.status);
  pinsRefresh();

  transcript.addEventListener("click", function (event) {
    var button = event.target.closest("[data-pin-seq]");
    if (button && !button.disabled) pinToggle(button);
  });

  transcript.addEventListener("click", function (event) {
    var button = event.target.closest("[data-resume]");
    if (!button || live) return;
    var runId = Number(button.getAttribute("data-resume"));
    var section = document.getElementById("run-" + runId);
    button.disabled = true;
    request("POST", url("resume", runId)).then(function (result) {
      if (!result.ok) {
        button.disabled = false;
        if (refusedForActiveRun(result)) return attachAfterRefusal(false);
        showAlert(requestError(result));
        return;
      }
      showAlert("");
      var actions = section.querySelector(".run-actions");
      if (actions) actions.remove();
      follow(section, Number(section.getAttribute("data-last-seq") || 0));
      if (box) box.focus();
    });
  });

  transcript.addEventListener("click", function (event) {
    // Continue an answer cut at its output limit: a new run, with no question of its own,
    // streams the rest right under the cut answer.
    var button = event.target.closest("[data-continue]");
    if (!button || live) return;
    var runId = Number(button.getAttribute("data-continue"));
    button.disabled = true;
    showAlert("");
    request("POST", url("continue", runId)).then(function (result) {
      if (!result.ok) {
        button.disabled = false;
        if (refusedForActiveRun(result)) return attachAfterRefusal(false);
        showAlert(requestError(result));
        return;
      }
      var actions = button.closest(".run-actions");
      if (actions) actions.remove();
      return loadRun(result.data.id, true).then(function (section) {
        toBottom();
        if (section.getAttribute("data-live") === "1") follow(section, 0);
      });
    });
  });

  // ---------------------------------------------------------------- undo a summary (CTX-51)
  function undoOffersElsewhereRemove(section) {
    // Only the newest summary can be undone: a run that just compacted offers it on its own
    // marker, and an older marker's offer is no longer true (the server would refuse it).
    transcript.querySelectorAll(".summary-actions").forEach(function (actions) {
      if (!section.contains(actions)) actions.remove();
    });
  }

  transcript.addEventListener("click", function (event) {
    var button = event.target.closest("[data-undo-compaction]");
    if (!button || live || !config.urls.undoCompaction) return;
    var section = button.closest("section.run");
    var runId = section ? Number(section.getAttribute("data-run-id")) : 0;
    button.disabled = true;
    showAlert("");
    request("POST", config.urls.undoCompaction,
            { compaction: Number(button.getAttribute("data-undo-compaction")) }).then(function (result) {
      if (!result.ok) {
        button.disabled = false;
        showAlert(requestError(result));
        return;
      }
      setStatus(button.closest(".summary-actions").previousElementSibling &&
                button.closest(".summary-actions").previousElementSibling.classList.contains("folded-marker")
                ? "Folding undone: from your next question the agent reads those tool results in full again."
                : "Summary undone: from your next question the agent reads the earlier messages in full again.", false);
      preparedRefresh();  // a summary prepared of the view it replaced is discarded
      if (runId) loadRun(result.data.run || runId);  // its marker now says "summary undone"
    });
  });

  // ---------------------------------------------------------------- on load
  var working = transcript.querySelector("section.run[data-live='1']");
  if (working && composer) follow(working, 0, config.supplements);  // replay from the first event: a reload loses nothing
  else preparedWatch();
  toBottom();
  if (box && !working && window.matchMedia("(min-width: 561px)").matches) box.focus();
})();
