
(function () {
  var box = document.getElementById("sample-text");
  if (!box) return;
  var info = document.getElementById("hover-info");
  var lit = [];
  box.addEventListener("mouseover", function (event) {
    var t = event.target.closest(".t");
    if (!t) return;
    lit.forEach(function (x) { x.classList.remove("hl"); });
    lit = Array.prototype.slice.call(box.querySelectorAll('.t[data-id="' + t.dataset.id + '"]'));
    lit.forEach(function (x) { x.classList.add("hl"); });
    info.textContent = t.title + "  (" + lit.length + " in this sample)";
  });
  document.body.dataset.sampleTokens = box.querySelectorAll(".t").length;
})();
