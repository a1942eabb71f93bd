// The book editor: shows book_editor's result, and saves a new title with book_retitle, a
// tools/call the host sends to the server with the user's credentials. A button, not a form:
// hosts' sandboxes may leave out allow-forms, which blocks a form's submission.
(function () {
  "use strict";
  var book = null, editor = document.getElementById("editor"), status = document.getElementById("status");
  function show(card) {
    book = card;
    document.getElementById("title").value = card.title;
    document.getElementById("author").textContent = card.author;
    document.getElementById("save").disabled = false;
    editor.setAttribute("aria-busy", "false");
  }
  function report(text, failed) {
    status.textContent = text;
    status.className = failed ? "error" : "";
  }
  mcpView.on("ui/notifications/tool-result", function (result) {
    if (result.structuredContent) { show(result.structuredContent); }
  });
  document.getElementById("save").addEventListener("click", function () {
    var title = document.getElementById("title").value;
    mcpView.request("tools/call", {name: "book_retitle", arguments: {book_id: book.id, title: title}})
      .then(function (result) {
        if (result.isError) { report((result.content[0] || {}).text || "Refused.", true); return; }
        show(result.structuredContent);
        report("Saved: " + result.structuredContent.title, false);
      }, function (error) { report((error && error.message) || "Refused.", true); });
  });
  mcpView.ready("library-book-editor");
}());
