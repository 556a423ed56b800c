// aimem web: live updates over server-sent events. Progressive enhancement only: every
// screen works without this file. Untrusted values are set with textContent and
// setAttribute, never as HTML.
"use strict";
(function () {
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  if (!main || !live || !main.dataset.events || !window.EventSource) return;
  var list = live.querySelector("ul");
  var base = main.dataset.base;
  var timeline = document.querySelector("ol.timeline");
  var MAX_ITEMS = 50;

  function pageHref(path) {
    return base + "/page/" + path.split("/").map(encodeURIComponent).join("/");
  }

  function add(text, href, linkText) {
    var li = document.createElement("li");
    li.appendChild(document.createTextNode(text + " "));
    if (href) {
      var a = document.createElement("a");
      a.setAttribute("href", href);
      a.textContent = linkText;
      li.appendChild(a);
    }
    list.insertBefore(li, list.firstChild);
    while (list.children.length > MAX_ITEMS) list.removeChild(list.lastChild);
    live.hidden = false;
  }

  var source = new EventSource(main.dataset.events);
  source.addEventListener("page.changed", function (e) {
    var d = JSON.parse(e.data);
    if (d.action === "deleted") add("Page deleted: " + d.path, null, "");
    else add("Page " + (d.action || "changed") + ":", pageHref(d.path), d.path);
  });
  source.addEventListener("observations.appended", function (e) {
    var d = JSON.parse(e.data);
    var kinds = (d.kinds || []).join(", ");
    add(d.count + " new observation" + (d.count === 1 ? "" : "s") + " (" + kinds + ") in session",
        base + "/sessions/" + encodeURIComponent(d.session_id), d.session_id);
    if (timeline && timeline.dataset.session === d.session_id) {
      var note = document.getElementById("timeline-new");
      if (!note) {
        note = document.createElement("p");
        note.id = "timeline-new";
        note.className = "notice";
        timeline.parentNode.insertBefore(note, timeline);
      }
      note.textContent = "This session has new observations: reload to see them.";
    }
  });
  source.addEventListener("session.ended", function (e) {
    var d = JSON.parse(e.data);
    add("Session ended:", d.session_id ? base + "/sessions/" + encodeURIComponent(d.session_id) : null, d.session_id || "");
  });
  ["handoff.opened", "handoff.accepted", "handoff.cancelled"].forEach(function (kind) {
    source.addEventListener(kind, function (e) {
      var d = JSON.parse(e.data);
      add("Handoff #" + d.handoff_id + " " + kind.split(".")[1] + ":", base + "/handoffs?status=any", "handoffs");
    });
  });
  source.addEventListener("message.sent", function () {
    add("A message was sent:", base + "/handoffs", "messages");
  });
})();
