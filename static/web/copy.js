/* AgentLoom chat — copy buttons on answers and code blocks. Plain JavaScript, no inline
 * code (the chat's CSP allows scripts from this site only).
 *
 * Each answer (.msg-assistant with a rendered bubble) gets a "Copy" button beside its Pin
 * button, and each code block of an answer one in its top right corner; chat.js swaps in
 * server-rendered runs as they end, so new ones are found by watching the transcript.
 * The buttons' visible words come from the stylesheet (data-copy-state), so an answer's
 * text never contains them, and the width never changes between "Copy" and "Copied". What
 * happened is said once in a polite live region: "Copied", or, where the browser gives no
 * clipboard (a page served over plain HTTP), the text is selected and the person is told
 * to press Ctrl+C.
 */
(function () {
  "use strict";

  var transcript = document.getElementById("transcript");
  if (!transcript) return;
  var SHOWN_MS = 2000;

  var said = document.createElement("p");
  said.id = "copy-status";
  said.className = "visually-hidden";
  said.setAttribute("aria-live", "polite");
  document.body.append(said);

  function button(label) {
    var node = document.createElement("button");
    node.type = "button";
    node.className = "copy-button";
    node.setAttribute("aria-label", label);
    node.setAttribute("data-copy-state", "");
    return node;
  }

  function equip() {
    transcript.querySelectorAll(".msg-assistant > .bubble-assistant.markdown").forEach(function (bubble) {
      var msg = bubble.parentNode;
      if (msg.querySelector(":scope > .copy-button")) return;
      var copy = button("Copy answer");
      copy.classList.add("copy-answer");
      bubble.after(copy);
    });
    transcript.querySelectorAll(".bubble-assistant.markdown pre").forEach(function (pre) {
      if (pre.parentNode.classList.contains("code-block")) return;
      var block = document.createElement("div");
      block.className = "code-block";
      pre.replaceWith(block);
      var copy = button("Copy code");
      copy.classList.add("copy-code");
      block.append(pre, copy);
    });
  }

  function textFor(copy) {
    if (copy.classList.contains("copy-code")) return copy.parentNode.querySelector("pre").textContent;
    return copy.parentNode.querySelector(".bubble-assistant").innerText;
  }

  function nodeFor(copy) {
    return copy.classList.contains("copy-code") ? copy.parentNode.querySelector("pre")
      : copy.parentNode.querySelector(".bubble-assistant");
  }

  function say(text) {
    said.textContent = "";
    // A new text node, a moment later: the same words said twice are still announced.
    setTimeout(function () { said.textContent = text; }, 50);
  }

  function byCommand(text, copy) {
    // Where navigator.clipboard is missing or refused: the older copy command on a scratch field.
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "copy-scratch";
    document.body.append(area);
    area.select();
    var ok = false;
    try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
    area.remove();
    copy.focus();
    return ok;
  }

  function selectFor(copy) {
    // Nothing could copy: select the text so the person can, and say how.
    var range = document.createRange();
    range.selectNodeContents(nodeFor(copy));
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function shown(copy, state) {
    copy.setAttribute("data-copy-state", state);
    clearTimeout(copy.copyTimer);
    copy.copyTimer = setTimeout(function () {
      copy.setAttribute("data-copy-state", "");
      said.textContent = "";
    }, SHOWN_MS);
  }

  function copied(copy) {
    shown(copy, "done");
    say("Copied");
  }

  function fallBack(copy, text) {
    if (byCommand(text, copy)) {
      copied(copy);
      return;
    }
    selectFor(copy);
    shown(copy, "selected");
    say("Copying is not available in this browser here: the text is selected, press Ctrl+C (or ⌘C) to copy it.");
  }

  transcript.addEventListener("click", function (event) {
    var copy = event.target.closest(".copy-button");
    if (!copy) return;
    var text = textFor(copy);
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(text).then(function () { copied(copy); },
                                               function () { fallBack(copy, text); });
    } else {
      fallBack(copy, text);
    }
  });

  equip();
  new MutationObserver(function (changes) {
    // A streamed word adds a text node: only new elements or a class changed (a streamed
    // bubble rendered as Markdown) can bring an answer or a code block.
    for (var i = 0; i < changes.length; i++) {
      var change = changes[i];
      if (change.type === "attributes" || Array.prototype.some.call(change.addedNodes, function (node) {
        return node.nodeType === 1;
      })) {
        equip();
        return;
      }
    }
  }).observe(transcript, {
    childList: true, subtree: true, attributes: true, attributeFilter: ["class"]
  });
})();
