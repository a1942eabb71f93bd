// The admin's preview of an MCP Apps view (admin/mcp_apps.py): this page plays the host of the
// spec's postMessage protocol for the sandboxed iframe. It answers ui/initialize, and once the
// view says ui/notifications/initialized ("The Host MUST NOT send any request or notification to
// the View before it receives an initialized notification") hands it the tool's input and a
// result carrying the sample structuredContent. Requests it does not serve (a view's own
// tools/call) are answered with an error: the preview changes nothing. The page runs this before
// the iframe exists (it comes first), so that the view's ui/initialize cannot come before it listens.
(function () {
  "use strict";
  var sample = JSON.parse(document.getElementById("mcp-app-sample").textContent);
  function frame() { return document.getElementById("mcp-app-preview"); }
  function send(message) { frame().contentWindow.postMessage(message, "*"); }
  window.addEventListener("message", function (event) {
    if (!frame() || event.source !== frame().contentWindow) { return; }
    var message = event.data || {};
    if (message.jsonrpc !== "2.0") { return; }
    if (message.method === "ui/initialize") {
      send({jsonrpc: "2.0", id: message.id, result: {
        protocolVersion: "2026-01-26", hostInfo: {name: "django-mcp-transport admin preview", version: "1"},
        hostCapabilities: {}, hostContext: {theme: "light", displayMode: "inline"}}});
    } else if (message.method === "ui/notifications/initialized") {
      send({jsonrpc: "2.0", method: "ui/notifications/tool-input", params: {arguments: {}}});
      send({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: {
        content: [{type: "text", text: JSON.stringify(sample)}], structuredContent: sample}});
    } else if (message.method === "ui/notifications/size-changed" && message.params && message.params.height) {
      frame().style.height = Math.ceil(message.params.height) + "px";
    } else if (message.id !== undefined && message.method) {
      send({jsonrpc: "2.0", id: message.id, error: {code: -32601,
            message: "The admin's preview does not call " + message.method + "."}});
    }
  });
}());
