// Live progress bars of running jobs in the admin: poll the progress view every second for the
// jobs on this page that are still active, update bar, text, status and duration; stop when
// none is active.
(function () {
  "use strict";
  function active() { return Array.from(document.querySelectorAll("[data-job][data-active='1']")); }
  function update(id, state) {
    document.querySelectorAll("[data-job='" + id + "']").forEach(function (bar) {
      var track = bar.querySelector(".mcp-progress");
      track.classList.toggle("mcp-indeterminate", state.indeterminate);
      if (state.percent !== null) {
        track.querySelector("span").style.width = state.percent.toFixed(1) + "%";
        track.setAttribute("aria-valuenow", state.percent.toFixed(0));
      } else {
        track.removeAttribute("aria-valuenow");  // indeterminate: no value to announce
      }
      bar.querySelector(".mcp-progress-text").textContent = state.text;
      bar.dataset.active = state.active ? "1" : "0";
    });
    document.querySelectorAll("[data-job-status='" + id + "']").forEach(function (badge) {
      badge.textContent = state.label;
      badge.style.background = state.colour;
    });
    document.querySelectorAll("[data-job-duration='" + id + "']").forEach(function (cell) {
      cell.textContent = state.duration;
    });
  }
  function poll() {
    var bars = active();
    if (!bars.length) { return; }
    var query = bars.map(function (bar) { return "id=" + encodeURIComponent(bar.dataset.job); }).join("&");
    fetch(bars[0].dataset.url + "?" + query, {credentials: "same-origin"})
      .then(function (reply) { return reply.ok ? reply.json() : {jobs: {}}; })
      .then(function (data) { Object.keys(data.jobs).forEach(function (id) { update(id, data.jobs[id]); }); })
      .catch(function () {})
      .then(function () { window.setTimeout(poll, 1000); });
  }
  document.addEventListener("DOMContentLoaded", function () { window.setTimeout(poll, 1000); });
})();
