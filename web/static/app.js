// ultraplan review pages: live updates and small conveniences. The pages work without it;
// this file only keeps them current. No inline scripts: the CSP forbids them.
(function () {
  "use strict";

  // --- forms: one submission each (double clicks are safe on the server too) ---
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.hasAttribute("data-once")) return;
    if (form.dataset.sent === "1") { event.preventDefault(); return; }
    form.dataset.sent = "1";
    form.setAttribute("aria-busy", "true");
    setTimeout(function () {
      form.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    }, 0);
  });

  // Back/forward cache: a page restored after a post must be usable again.
  window.addEventListener("pageshow", function (event) {
    if (!event.persisted) return;
    document.querySelectorAll("form[data-sent]").forEach(function (form) {
      delete form.dataset.sent;
      form.removeAttribute("aria-busy");
      form.querySelectorAll("button").forEach(function (b) { b.disabled = false; });
    });
  });

  // --- times ---
  function ago(iso) {
    var s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (s < 45) return "just now";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.floor(s / 3600) + " h ago";
    return Math.floor(s / 86400) + " d ago";
  }
  function refreshTimes(root) {
    root.querySelectorAll("time[data-rel]").forEach(function (t) {
      var iso = t.getAttribute("datetime");
      if (iso) t.textContent = ago(iso);
    });
    root.querySelectorAll("time[data-local]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime") || "");
      if (!isNaN(d)) {
        t.textContent = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
        t.title = t.getAttribute("datetime");
      }
    });
  }

  function say(text) {
    var live = document.getElementById("live");
    if (live && live.textContent !== text) live.textContent = text;
  }

  // --- sessions list: poll the rows fragment ---
  function pollList(table) {
    var body = table.querySelector("tbody");
    var url = table.getAttribute("data-refresh");
    var last = null;
    function tick() {
      if (document.hidden) return;
      fetch(url, { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (r) {
          if (r.status === 401) { clearInterval(timer); return null; }
          return r.ok ? r.text() : null;
        })
        .then(function (html) {
          if (html === null || html === last) return;
          last = html;
          body.innerHTML = html;
          refreshTimes(body);
        })
        .catch(function () {});
    }
    var timer = setInterval(tick, 4000);
  }

  // --- session page: server-sent events ---
  function swapRegion(el, region) {
    if (el.dataset.key === region.key) return;
    var kept = {};
    el.querySelectorAll("textarea[id]").forEach(function (t) {
      if (t.value !== t.defaultValue) kept[t.id] = t.value;
    });
    var open = {};
    el.querySelectorAll("details[id]").forEach(function (d) { open[d.id] = d.open; });
    var focused = document.activeElement && el.contains(document.activeElement) ? document.activeElement.id : "";
    var plan = el.querySelector("[data-plan]");
    var planBefore = plan ? plan.getAttribute("data-plan") : "";
    var hadQuestion = !!el.querySelector("#question");
    var wasExecuting = !!el.querySelector("#changes .working");
    el.innerHTML = region.html;
    el.dataset.key = region.key;
    var planNow = el.querySelector("[data-plan]");
    // Inputs and open sections survive a re-render unless a different plan took the place.
    var samePlan = (planNow ? planNow.getAttribute("data-plan") : "") === planBefore;
    Object.keys(open).forEach(function (id) {
      var d = document.getElementById(id);
      if (d && d.tagName === "DETAILS" && samePlan) d.open = open[id];
    });
    Object.keys(kept).forEach(function (id) {
      var t = document.getElementById(id);
      if (t && t.tagName === "TEXTAREA" && (samePlan || id === "answer")) t.value = kept[id];
    });
    if (focused) {
      var f = document.getElementById(focused);
      if (f) f.focus();
    }
    refreshTimes(el);
    markBlocks(el);
    markCommented(el);
    if (planNow && planNow.querySelector("#decide") && !samePlan) say("A plan is ready for your review.");
    else if (el.querySelector("#question") && !hadQuestion) say("The agent has a question for you.");
    else if (wasExecuting && el.querySelector("#changes") && !el.querySelector("#changes .working")) say("Remote execution finished: the changes are shown.");
  }

  function apply(update) {
    var timeline = document.getElementById("timeline");
    (update.ops || []).forEach(function (op) {
      var target = document.getElementById(op.into);
      if (op.op === "result" && target) {
        target.innerHTML = op.html;
      } else if (op.op === "result") {
        timeline.insertAdjacentHTML("beforeend", '<li class="entry orphan"><div class="entry-body">' + op.html + "</div></li>");
      } else if (op.into !== "timeline" && target) {
        target.insertAdjacentHTML("beforeend", op.html);
      } else {
        timeline.insertAdjacentHTML("beforeend", op.html);
      }
    });
    (update.regions || []).forEach(function (pair) {
      var el = document.getElementById("region-" + pair[0]);
      if (el) swapRegion(el, pair[1]);
    });
    var root = document.querySelector("[data-stream]");
    if (root && update.last) root.setAttribute("data-last-event", String(update.last));
  }

  function stream(root) {
    var url = root.getAttribute("data-stream") + "?after=" + encodeURIComponent(root.getAttribute("data-last-event") || "0");
    var source = new EventSource(url);
    source.addEventListener("open", function () { say("Live"); });
    source.addEventListener("update", function (event) {
      try { apply(JSON.parse(event.data)); } catch (e) { /* a bad frame is skipped */ }
    });
    source.addEventListener("error", function () {
      say(source.readyState === EventSource.CLOSED ? "Live updates stopped. Reload the page." : "Reconnecting…");
    });
  }

  // Inline comments: a selection inside the plan, or the focused block (press C), fills the
  // comment form's passage; the blocks are made focusable after every re-render.
  var BLOCKS = "p, li, h1, h2, h3, h4, h5, h6, pre, blockquote, td, th";

  function markBlocks(root) {
    var plan = root.querySelector("[data-commentable]");
    if (!plan) return;
    plan.querySelectorAll(BLOCKS).forEach(function (b) {
      if (b.querySelector(BLOCKS)) return;
      b.setAttribute("tabindex", "0");
      b.setAttribute("data-block", "");
    });
  }

  // What a block reads, as the server's plain_text reads a quote.
  function plain(text) {
    return (text || "").replace(/[*_`~#>\[\]]/g, "").replace(/\s+/g, " ").trim();
  }

  // Mark the block each listed comment is about, and point it at the comment.
  function markCommented(root) {
    var plan = root.querySelector("#plan-body");
    if (!plan) return;
    var blocks = Array.prototype.filter.call(plan.querySelectorAll(BLOCKS), function (b) {
      return !b.querySelector(BLOCKS);
    });
    root.querySelectorAll("#comment-list > li[data-plain]").forEach(function (li) {
      var want = li.getAttribute("data-plain");
      var hit = blocks.filter(function (b) { return want && plain(b.textContent).indexOf(want) >= 0; })[0];
      if (!hit) return;
      hit.classList.add("commented");
      var ids = (hit.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
      if (ids.indexOf(li.id) < 0) ids.push(li.id);
      hit.setAttribute("aria-describedby", ids.join(" "));
    });
  }

  function quoteInto(text, focusBody) {
    var quote = document.getElementById("comment-quote");
    var body = document.getElementById("comment-body");
    text = (text || "").trim();
    if (!quote || !text) return;
    quote.value = text;
    if (focusBody && body) body.focus();
    say("Passage chosen: write your comment.");
  }

  document.addEventListener("mouseup", function (event) {
    var plan = event.target.closest && event.target.closest("[data-commentable]");
    if (!plan) return;
    var sel = window.getSelection();
    if (!sel || sel.isCollapsed || !plan.contains(sel.anchorNode) || !plan.contains(sel.focusNode)) return;
    quoteInto(sel.toString(), false);
  });

  document.addEventListener("keydown", function (event) {
    var block = event.target.closest && event.target.closest("[data-commentable] [data-block]");
    if (!block || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "c" || event.key === "C") {
      event.preventDefault();
      var sel = window.getSelection();
      var text = sel && !sel.isCollapsed && block.contains(sel.anchorNode) ? sel.toString() : block.textContent;
      quoteInto(text, true);
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    markBlocks(document);
    markCommented(document);
    // A notice belongs to the form post that led here, not to a later reload.
    if (/[?&]notice=/.test(location.search) && window.history.replaceState) {
      history.replaceState(null, "", location.pathname + location.hash);
    }
    refreshTimes(document);
    setInterval(function () { refreshTimes(document); }, 30000);
    var table = document.querySelector("table[data-refresh]");
    if (table) pollList(table);
    var root = document.querySelector("[data-stream]");
    if (root && "EventSource" in window) stream(root);
  });
})();
