
(function () {
  var box = document.getElementById("text");
  var mirror = document.getElementById("mirror");
  var shown = {tokens: [], chars: []};  // what each column drew, and the text it was cut from, by code point
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
      var s = el("span", "t c" + (n % 5) + (t[2] ? " part" : "") + (t[1].indexOf("\n") >= 0 ? " nl" : ""), t[2] ? "" : t[1]);
      s.dataset.id = t[0];
      s.dataset.n = n;
      s.title = "id " + t[0];
      out.appendChild(s);
    });
    out.dataset.count = r.count;
    shown.tokens[k] = r.tokens;
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
        highlight(null);
        r.tokenizers.forEach(function (one, k) { draw(k, one); });
        shown.chars = Array.from(text);  // the server's spans count code points, as Array.from does
        document.body.dataset.shown = mine;
        document.body.dataset.shownText = text;
      });
  }
  // The span of token t ([id, shown, part, start, end]) marked in the mirror under the text box; none
  // for null, or while the box holds other text than the tokens were cut from.
  function highlight(t) {
    mirror.textContent = "";
    document.querySelectorAll(".t.over").forEach(function (x) { x.classList.remove("over"); });
    if (!t || t[3] === null || box.value !== document.body.dataset.shownText) return;
    var mark = el("mark", "", shown.chars.slice(t[3], t[4]).join(""));
    mirror.appendChild(document.createTextNode(shown.chars.slice(0, t[3]).join("")));
    mirror.appendChild(mark);
    mirror.appendChild(document.createTextNode(shown.chars.slice(t[4]).join("")));
    var top = mark.offsetTop, bottom = top + mark.offsetHeight;
    if (top < box.scrollTop || bottom > box.scrollTop + box.clientHeight) {
      box.scrollTop = Math.max(0, top - box.clientHeight / 3);  // the scroll event moves the mirror too
    }
  }
  box.addEventListener("scroll", function () { mirror.scrollTop = box.scrollTop; });
  box.addEventListener("input", function () { highlight(null); clearTimeout(timer); timer = setTimeout(send, 120); });
  document.querySelectorAll(".tokens").forEach(function (out, k) {
    out.addEventListener("mouseover", function (event) {
      var t = event.target.closest(".t");
      if (!t) return;
      highlight(shown.tokens[k][Number(t.dataset.n)]);
      t.classList.add("over");
    });
    out.addEventListener("mouseleave", function () { highlight(null); });
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
