"""The library's models as MCP tools (docs/models.md): ``book_*`` from a ModelToolset,
``author_*`` from the AuthorAdmin and ``shelf_*`` from a DRF viewset. Each needs the caller's
model permission; a reader sees the public books and its own, and only staff read a book's
internal note. The library's skills are in skills/ (docs/skills.md), but for one, below."""
from pathlib import Path

from django.db.models import Q

from mcp_transport import skill
from mcp_transport.toolsets import ModelToolset, register, register_admin, register_viewset

from .api import ShelfViewSet
from .models import Author, Book


@register
class BookTools(ModelToolset):
    model = Book
    fields = ["id", "title", "author", "year", "genre", "public", "internal_note", "added"]
    filters = {"author": ["exact"], "year": ["gte", "lte"], "genre": ["exact", "in"], "title": ["icontains"]}
    search_fields = ["title", "author__name"]
    ordering = ["title", "year", "added"]
    page_size = 20
    create = update = delete = True
    form_fields = ["title", "author", "year", "genre", "public"]
    resources = subscribe = True
    background = True  # book_list_all: the whole query as a Celery job, with progress
    background_chunk = 100

    def get_queryset(self, ctx):
        books = super().get_queryset(ctx)
        if ctx.user.is_staff:
            return books
        mine = Q(owner=ctx.user) if ctx.user.is_authenticated else Q()
        return books.filter(Q(public=True) | mine)

    def get_fields(self, ctx):
        fields = super().get_fields(ctx)
        return fields if ctx.user.is_staff else [name for name in fields if name != "internal_note"]

    def has_object_permission(self, ctx, action, book):
        return action == "view" or ctx.user.is_staff or (ctx.user.is_authenticated and book.owner_id == ctx.user.pk)

    def save(self, ctx, form, created):
        if created:
            form.instance.owner = ctx.user
        return form.save()


register_admin(Author, create=True, actions=True)
register_viewset(ShelfViewSet, name="shelf")

# A skill only users who may change books see (docs/skills.md): kept out of skills/, which every
# caller's skills come from, and registered here with its permission.
skill(Path(__file__).parent / "staff_skills" / "library-curation", permission="library.change_book")
