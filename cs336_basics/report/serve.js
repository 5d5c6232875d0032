
(function () {
  var box = document.getElementById("text");
  var status = document.getElementById("status");
  var maxBytes = Number(document.body.dataset.maxBytes);
  var sent = 0, timer = null;
  function el(tag, cls, text) {
    var x = document.createElement(tag);
    if (cls) x.className = cls;
    if (text !== undefined) x.textContent = text;
    return x;
  }
  function draw(k, r) {
    document.getElementById("stats-" + k).textContent = r.count + " tokens \u00b7 " + r.bytes + " bytes \u00b7 " +
      r.chars + " characters \u00b7 " + r.bytes_per_token + " bytes/token \u00b7 " + r.chars_per_token + " characters/token";
    var out = document.getElementById("tokens-" + k);
    out.textContent = "";
    r.tokens.forEach(function (t, n) {
      var s = el("span", "t c" + (n % 5) + (t[2] ? " part" : ""), t[2] ? "" : t[1]);
      s.dataset.id = t[0];
      s.title = "id " + t[0];
      out.appendChild(s);
    });
    out.dataset.count = r.count;
    document.getElementById("ids-" + k).textContent = r.tokens.map(function (t) { return t[0]; }).join(" ");
  }
  function send() {
    var text = box.value, mine = ++sent;
    if (new TextEncoder().encode(text).length > maxBytes) {
      status.textContent = "The text is longer than " + maxBytes + " bytes; only shorter texts are cut.";
      status.className = "note error";
      return;
    }
    fetch("/encode", {method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify({text: text})})
      .then(function (r) { return r.json(); })
      .then(function (r) {
        if (mine !== sent) return;
        if (r.error) { status.textContent = r.error; status.className = "note error"; return; }
        status.className = "note";
        r.tokenizers.forEach(function (one, k) { draw(k, one); });
        document.body.dataset.shown = mine;
        document.body.dataset.shownText = text;
      });
  }
  box.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(send, 120); });
  document.querySelectorAll(".tokens").forEach(function (out, k) {
    out.addEventListener("click", function (event) {
      var t = event.target.closest(".t");
      if (!t) return;
      out.querySelectorAll(".sel").forEach(function (x) { x.classList.remove("sel"); });
      t.classList.add("sel");
      fetch("/token?t=" + k + "&id=" + t.dataset.id).then(function (r) { return r.json(); }).then(function (r) {
        var info = document.getElementById("info-" + k), dl = el("dl");
        function row(name, value, cls) { dl.appendChild(el("dt", "", name)); var d = el("dd", cls || "", value); d.dataset.field = name; dl.appendChild(d); }
        row("id", String(r.id));
        row("token", r.token);
        row("bytes", r.bytes);
        row("merge", r.merge ? "#" + r.merge.rank + ": " + r.merge.left + " + " + r.merge.right : "none (a byte or special token)");
        row("count at the merge", r.count === null ? "unknown (no merge log)" : String(r.count));
        row("in training", r.occurrences === null ? "unknown" : r.occurrences + " occurrences");
        row("under-trained", r.under_trained.length ? "yes: " + r.under_trained.join("; ") : (r.in_training ? "no" : "no (only unreachability checked)"),
            r.under_trained.length ? "warn" : "");
        info.textContent = "";
        info.appendChild(dl);
        info.dataset.id = r.id;
      });
    });
  });
  if (box.value) send();
})();
