// The spec's postMessage protocol (SEP-1865, "Communication Protocol"), without an SDK: the view
// is a small MCP client of its host. window.mcpView.request(method, params) -> Promise of the
// result; mcpView.on(method, handler) for the host's notifications; mcpView.ready() sends
// ui/initialize then ui/notifications/initialized ("The Host MUST NOT send any request or
// notification to the View before it receives an initialized notification").
(function () {
  "use strict";
  var nextId = 1, pending = {}, handlers = {};
  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) { return; }
    var message = event.data;
    if (!message || message.jsonrpc !== "2.0") { return; }
    if (message.id !== undefined && pending[message.id]) {
      var waiting = pending[message.id];
      delete pending[message.id];
      if (message.error) { waiting.reject(message.error); } else { waiting.resolve(message.result); }
    } else if (message.method && handlers[message.method]) {
      handlers[message.method](message.params || {});
    } else if (message.method && message.id !== undefined) {
      window.parent.postMessage({jsonrpc: "2.0", id: message.id, result: {}}, "*");  // ping, teardown
    }
  });
  function request(method, params) {
    var id = nextId++;
    return new Promise(function (resolve, reject) {
      pending[id] = {resolve: resolve, reject: reject};
      window.parent.postMessage({jsonrpc: "2.0", id: id, method: method, params: params || {}}, "*");
    });
  }
  window.mcpView = {
    request: request,
    on: function (method, handler) { handlers[method] = handler; },
    ready: function (name) {
      return request("ui/initialize", {appInfo: {name: name, version: "1.0.0"}, appCapabilities: {},
                                       protocolVersion: "2026-01-26"}).then(function (result) {
        window.parent.postMessage({jsonrpc: "2.0", method: "ui/notifications/initialized", params: {}}, "*");
        return result;
      });
    }
  };
}());
