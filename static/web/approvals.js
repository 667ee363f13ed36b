/* AgentLoom chat — tool calls waiting for the person's approval (TOOL-8/9). Plain
 * JavaScript, no build step.
 *
 * A card per waiting call, built from the run's approval_requested event exactly as the
 * server renders it for a page opened while the run waits (templates/web/_approval.html):
 * the tool as people know it, its description, its arguments (as text, never markup), why
 * it waits, and Approve / Approve for this session / Deny with an optional reason. A
 * decision is POSTed to /chat/runs/{id}/approvals with the page's CSRF token; the card's
 * buttons are disabled while it is on its way, and the card then says what was decided —
 * from the answer, from the approval_decided event (another tab's decision too), or from
 * the session's state that the chat asks every few seconds while a call waits. The words
 * are the server's (web/approval_cards.py, handed to the page as config.approvalWords).
 */
(function () {
  "use strict";

  var DECIDED = { approved: true, denied: true, expired: true, stopped: true };
  var made = 0;  // cards built here, for their reason fields' ids

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function prettyArguments(value) {
    // Indented JSON, as the server shows it (web/step_text.py arguments_pretty); always text.
    var text = typeof value === "string" ? value : JSON.stringify(value === undefined ? {} : value);
    try {
      var parsed = JSON.parse(text);
      if (parsed && typeof parsed === "object") text = JSON.stringify(parsed, null, 2);
    } catch (e) { /* not JSON: shown as it came */ }
    return text;
  }

  function Approvals(options) {
    this.words = options.words;
    this.labels = options.labels || {};
    this.url = options.url;      // runId -> the decision's address
    this.send = options.send;    // (path, body) -> Promise of {ok, status, data}
    this.explain = options.explain;  // a refused request -> words
    this.alert = options.alert;
    this.changed = options.changed || function () {};  // (section) after a card's state changes
    var self = this;
    options.transcript.addEventListener("click", function (event) {
      var button = event.target.closest(".approval [data-decide]");
      if (button && !button.disabled) self.decide(button);
    });
    options.transcript.addEventListener("keydown", function (event) {
      // Enter in the reason field denies with that reason, as the button beside it does.
      if (event.key !== "Enter" || !event.target.classList.contains("approval-reason")) return;
      event.preventDefault();
      var deny = event.target.closest(".approval").querySelector("[data-decide='deny']");
      if (deny && !deny.disabled) self.decide(deny);
    });
  }

  Approvals.prototype.find = function (section, callId) {
    // Call ids may repeat across steps: the card of that id still waiting, else the newest.
    var cards = section.querySelectorAll(".approval[data-approval-call]");
    var found = null;
    for (var i = cards.length - 1; i >= 0; i--) {
      if (cards[i].getAttribute("data-approval-call") !== callId) continue;
      if (cards[i].getAttribute("data-approval-status") === "awaiting") return cards[i];
      found = found || cards[i];
    }
    return found;
  };

  Approvals.prototype.build = function (data) {
    // As the call's step names it (config.toolLabels, web/tool_labels.py), else as recorded.
    var tool = String(data.tool || "");
    var label = Object.prototype.hasOwnProperty.call(this.labels, tool) ? this.labels[tool]
      : String(data.label || tool || "a tool");
    var card = el("div", "approval");
    card.setAttribute("role", "group");
    card.setAttribute("data-approval-call", String(data.call_id || ""));
    card.setAttribute("data-approval-status", "awaiting");
    card.setAttribute("aria-label", "Approval for " + label);
    var head = el("p", "approval-head");
    var name = el("span", "approval-tool", label);
    name.setAttribute("data-tool", tool);
    head.append(el("span", "approval-kind", "Approval needed"), " ", name);
    card.append(head);
    if (data.description) card.append(el("p", "approval-description", String(data.description)));
    var args = el("pre", "approval-arguments", prettyArguments(data.arguments));
    args.tabIndex = 0;
    args.setAttribute("aria-label", "Arguments of this call");
    card.append(el("p", "step-label", "Arguments"), args);
    if (data.why) card.append(el("p", "approval-why", String(data.why)));
    var state = el("p", "approval-state", this.words.waiting);
    state.setAttribute("role", "status");
    card.append(state);

    var actions = el("div", "approval-actions");
    var approve = el("button", "button button-primary", "Approve");
    approve.type = "button";
    approve.setAttribute("data-decide", "approve");
    var session = el("button", "button", "Approve for this session");
    session.type = "button";
    session.setAttribute("data-decide", "approve");
    session.setAttribute("data-scope", "session");
    session.title = "Approve this call, and later calls of " + label + " in this session without asking";
    var deny = el("span", "approval-deny");
    made += 1;
    var id = "approval-reason-live-" + made;
    var reasonLabel = el("label", "visually-hidden", "Reason for denying (optional)");
    reasonLabel.htmlFor = id;
    var reason = el("input", "approval-reason");
    reason.type = "text";
    reason.id = id;
    reason.maxLength = 2000;
    reason.autocomplete = "off";
    reason.placeholder = "Reason (optional)";
    var denyButton = el("button", "button button-deny", "Deny");
    denyButton.type = "button";
    denyButton.setAttribute("data-decide", "deny");
    deny.append(reasonLabel, reason, denyButton);
    actions.append(approve, session, deny);
    card.append(actions);
    return card;
  };

  Approvals.prototype.requested = function (section, area, step, data) {
    // The card right after its step (the place a replayed page gives it too); one the
    // server rendered for this call is moved there rather than shown twice.
    var found = this.find(section, String(data.call_id || ""));
    var card = found && found.getAttribute("data-approval-status") === "awaiting" ? found : this.build(data);
    if (step && step.parentNode) step.after(card); else area.append(card);
    var holder = section.querySelector("[data-approvals]");
    if (holder && !holder.children.length) holder.remove();
    this.changed(section);
    return card;
  };

  Approvals.prototype.wordsFor = function (status, reason, scope) {
    if (status === "approved") return scope === "session" ? this.words.approvedSession : this.words.approved;
    if (status === "denied") return reason ? this.words.deniedBecause.replace("{reason}", reason) : this.words.denied;
    if (status === "expired") return this.words.expired;
    if (status === "stopped") return this.words.stopped;
    return this.words.waiting;
  };

  Approvals.prototype.decided = function (section, data) {
    // approval_decided's data, the decision's answer, or one row of the session's state.
    var card = this.find(section, String(data.call_id || ""));
    var status = String(data.decision || data.status || "");
    if (!card || !DECIDED[status]) return;
    card.setAttribute("data-approval-status", status);
    card.querySelector(".approval-state").textContent = this.wordsFor(status, String(data.reason || ""),
                                                                      String(data.scope || ""));
    var actions = card.querySelector(".approval-actions");
    if (actions) {
      var focused = actions.contains(document.activeElement);
      actions.remove();
      if (focused) card.querySelector(".approval-arguments").focus();  // the focus stays on the card
    }
    this.changed(section);
  };

  Approvals.prototype.ran = function (section, callId) {
    // The approved call has run: "running now" is no longer true.
    var card = this.find(section, callId);
    if (card && card.getAttribute("data-approval-status") === "approved") {
      card.querySelector(".approval-state").textContent = this.words.ran;
    }
  };

  Approvals.prototype.waiting = function (section) {
    return section.querySelectorAll(".approval[data-approval-status='awaiting']").length;
  };

  Approvals.prototype.sidebar = function (sessionId, waiting) {
    // The sessions list marks a session whose run waits for its person, as the server
    // renders it (templates/web/_session_list.html) — here as soon as a call asks.
    var link = document.querySelector(".session-item[data-session-id='" + Number(sessionId) + "'] a");
    if (!link) return;
    var mark = link.querySelector(".session-waiting");
    if (waiting && !mark) link.append(el("span", "session-waiting", this.words.sessionWaiting));
    else if (!waiting && mark) mark.remove();
  };

  Approvals.prototype.reconcile = function (section, rows) {
    // The session's state (GET /chat/sessions/{id}/state): calls decided elsewhere.
    // Rows come in call order: for a call id used again in a later step, the newest is its state.
    var newest = {};
    (rows || []).forEach(function (row) { newest[String(row.call_id)] = row; });
    for (var callId in newest) {
      if (DECIDED[newest[callId].status]) this.decided(section, newest[callId]);
    }
  };

  Approvals.prototype.decide = function (button) {
    var card = button.closest(".approval");
    var section = card.closest("section.run[data-run-id]");
    if (!section) return;
    var buttons = card.querySelectorAll("[data-decide]");
    var reasonBox = card.querySelector(".approval-reason");
    var deny = button.getAttribute("data-decide") === "deny";
    var body = { call_id: card.getAttribute("data-approval-call"), decision: button.getAttribute("data-decide"),
                 scope: button.getAttribute("data-scope") || "call",
                 reason: deny && reasonBox ? reasonBox.value.trim() : "" };
    buttons.forEach(function (b) { b.disabled = true; });
    if (reasonBox) reasonBox.disabled = true;
    card.setAttribute("aria-busy", "true");
    var self = this;
    this.alert("");
    this.send(this.url(section.getAttribute("data-run-id")), body).then(function (result) {
      card.removeAttribute("aria-busy");
      if (result.ok) {
        self.decided(section, result.data);
        return;
      }
      var error = result.data && result.data.error;
      if (error && error.code === "already_decided") {
        // Decided meanwhile (another tab): its event, or the next look at the state, says how.
        self.alert(self.explain(result));
        return;
      }
      buttons.forEach(function (b) { b.disabled = false; });
      if (reasonBox) reasonBox.disabled = false;
      self.alert(self.explain(result));
      button.focus();
    });
  };

  window.AgentLoomApprovals = Approvals;
})();
