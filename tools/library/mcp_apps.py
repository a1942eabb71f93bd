"""The library's MCP Apps (docs/apps.md): views a host renders in a sandboxed iframe.

- ``ui://library/book-card``: a book's card, shown by ``book_card`` (needs ``view_book``);
- ``ui://library/book-editor``: a form shown by ``book_editor`` (needs ``view_book``) that
  changes the book's title from inside the iframe by calling ``book_retitle``, which needs
  ``change_book`` and is only for views (``visibility: ["app"]``, a host's filter: the
  permission is what refuses a reader).

A view is rendered for the caller, never with a call's arguments: the book comes to it as the
tool's ``structuredContent``, through the host.
"""
from typing import Optional

import pydantic
from typing_extensions import TypedDict

from django.db.models import Q

from mcp_transport import Context, ToolError, ToolResult, app, tool

from .models import Book

#: What the admin previews the views with (MCP -> Apps).
SAMPLE = {"id": 1, "title": "The Left Hand of Darkness", "author": "Ursula K. Le Guin", "year": 1969, "genre": "Novel"}

app("ui://library/book-card", template="library/apps/book_card.html", title="Book card",
    description="A book's card: its title, author, year and genre.",
    static=["library/apps/view.css", "library/apps/bridge.js", "library/apps/book_card.js"], prefers_border=True,
    sample=SAMPLE)

app("ui://library/book-editor", template="library/apps/book_editor.html", title="Book editor",
    description="Changes a book's title from inside the view.",
    static=["library/apps/view.css", "library/apps/bridge.js", "library/apps/book_editor.js"], prefers_border=True,
    sample=SAMPLE)


class BookCard(TypedDict):
    id: int
    title: str
    author: str
    year: Optional[int]
    genre: str


def _card(book) -> BookCard:
    return {"id": book.pk, "title": book.title, "author": book.author.name, "year": book.year,
            "genre": book.get_genre_display()}


def _readable(user):
    """The books ``user`` may read, as the book_* tools' (BookTools.get_queryset)."""
    books = Book.objects.select_related("author")
    if user.is_staff:
        return books
    return books.filter(Q(public=True) | (Q(owner=user) if user.is_authenticated else Q(pk__in=[])))


def _book(ctx, book_id):
    book = _readable(ctx.user).filter(pk=book_id).first()
    if book is None:
        raise ToolError(f"No book {book_id} that you may read.")
    return book


@tool(ui="ui://library/book-card", permission="library.view_book", annotations={"readOnlyHint": True},
      output_schema=pydantic.TypeAdapter(BookCard).json_schema())
def book_card(ctx: Context, book_id: int) -> ToolResult:
    """Show a book as a card.

    Args:
        book_id: The book's id.
    """
    card = _card(_book(ctx, book_id))
    # The text is what a host without apps shows (and what the model reads); the view gets
    # structuredContent ("Tools MUST return meaningful content array even when UI is available").
    year = f" ({card['year']})" if card["year"] else ""
    summary = f"{card['title']} by {card['author']}{year}, {card['genre'].lower()}."
    if ctx.client_supports_apps:
        summary = f"Shown in the book card: {summary}"
    return ToolResult(content=[{"type": "text", "text": summary}], structured_content=card)


@tool(ui="ui://library/book-editor", permission="library.view_book", annotations={"readOnlyHint": True})
def book_editor(ctx: Context, book_id: int) -> BookCard:
    """Open a book in an editor where its title can be changed.

    Args:
        book_id: The book's id.
    """
    return _card(_book(ctx, book_id))


@tool(ui={"resourceUri": "ui://library/book-editor", "visibility": ["app"]}, permission="library.change_book")
def book_retitle(ctx: Context, book_id: int, title: str) -> BookCard:
    """Change a book's title (the book editor's button).

    Args:
        book_id: The book's id.
        title: Its new title.
    """
    book = _book(ctx, book_id)
    if not (ctx.user.is_staff or book.owner_id == ctx.user.pk):
        raise ToolError(f"You may not change the book {book_id}.")
    title = title.strip()
    if not title or len(title) > Book._meta.get_field("title").max_length:
        raise ToolError("A title has 1 to 200 characters.")
    book.title = title
    book.save(update_fields=["title"])
    return _card(book)
