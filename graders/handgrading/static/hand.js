// grade hand: keyboard navigation and the points preview. Everything works without it (plain
// forms and links); this only adds keys and the live total. No data comes from anywhere but the page.
(function () {
  "use strict";
  function typing(e) {
    var t = e.target;
    return t && (t.tagName === "INPUT" && t.type !== "checkbox" || t.tagName === "TEXTAREA" || t.isContentEditable);
  }
  function go(id) {
    var a = document.getElementById(id);
    if (a && a.href) { window.location.href = a.href; return true; }
    return false;
  }
  function preview() {
    var form = document.getElementById("mark-form"), out = document.getElementById("preview");
    if (!form || !out) { return; }
    var max = parseFloat(form.dataset.max), typed = document.getElementById("points").value.trim();
    if (typed !== "") { out.textContent = typed; return; }
    var boxes = form.querySelectorAll("input[name=item]"), sum = 0, any = false;
    boxes.forEach(function (b) { if (b.checked) { sum += parseFloat(b.dataset.points); any = true; } });
    out.textContent = any || form.dataset.touched ? String(Math.round(Math.min(max, Math.max(0, sum)) * 10000) / 10000) : out.textContent;
  }
  function submit(action) {
    var button = document.querySelector("#mark-form button[value=" + action + "]");
    if (button) { button.click(); }
  }
  document.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); submit("save_next"); return; }
    if (e.key === "Escape" && typing(e)) { e.target.blur(); return; }
    if (typing(e) || e.ctrlKey || e.metaKey || e.altKey) { return; }
    var boxes = document.querySelectorAll("#mark-form input[name=item]");
    if (/^[1-9]$/.test(e.key) && boxes.length >= Number(e.key)) {
      e.preventDefault();
      var box = boxes[Number(e.key) - 1];
      box.checked = !box.checked;
      document.getElementById("mark-form").dataset.touched = "1";
      preview();
      return;
    }
    var handled = {
      j: function () { return go("next") || go("next-group"); },
      ArrowRight: function () { return go("next") || go("next-group"); },
      k: function () { return go("prev"); },
      ArrowLeft: function () { return go("prev"); },
      u: function () { return go("next-ungraded"); },
      g: function () { return go("to-groups"); },
      s: function () { submit("save"); return true; },
      c: function () { var c = document.getElementById("comment"); if (c) { c.focus(); } return !!c; },
      p: function () { var p = document.getElementById("points"); if (p) { p.focus(); } return !!p; }
    }[e.key];
    if (handled && handled()) { e.preventDefault(); }
  });
  document.addEventListener("change", function (e) {
    if (e.target && e.target.name === "item") { document.getElementById("mark-form").dataset.touched = "1"; preview(); }
  });
  document.addEventListener("input", function (e) { if (e.target && e.target.id === "points") { preview(); } });
  document.addEventListener("DOMContentLoaded", function () {
    var current = document.querySelector("aside.students li.current");
    if (current) { current.scrollIntoView({block: "center"}); }
  });
})();
