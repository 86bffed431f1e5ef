// Live updates without a reload: the server sends the page's fragments (server-rendered
// HTML) over server-sent events whenever what they show changes; each goes into the
// section of the same id. EventSource reconnects by itself if the stream drops.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var url = document.body.getAttribute("data-events");
  if (!url || !window.EventSource) {
    if (live) live.textContent = "not live (reload to update)";
    return;
  }
  function say(text, css) {
    if (!live) return;
    live.textContent = text;
    live.className = "live " + css;
  }
  var source = new EventSource(url);
  source.onopen = function () { say("live", "on"); };
  source.onerror = function () { say("reconnecting…", "off"); };
  source.onmessage = function (event) {
    var message = JSON.parse(event.data);
    var fragments = message.fragments || {};
    Object.keys(fragments).forEach(function (id) {
      var section = document.getElementById(id);
      if (section) section.innerHTML = fragments[id];
    });
    document.body.setAttribute("data-version", String(message.version));
    var now = new Date();
    say("live · updated " + now.toLocaleTimeString(), "on");
  };
})();
