// The book card: shows the structuredContent of book_card's result.
(function () {
  "use strict";
  function show(book) {
    document.getElementById("title").textContent = book.title;
    document.getElementById("author").textContent = book.author;
    document.getElementById("year").textContent = book.year ? "(" + book.year + ")" : "";
    document.getElementById("genre").textContent = book.genre;
    document.getElementById("card").setAttribute("aria-busy", "false");
  }
  mcpView.on("ui/notifications/tool-result", function (result) {
    if (result.structuredContent) { show(result.structuredContent); }
  });
  mcpView.ready("library-book-card");
}());
