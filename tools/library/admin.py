from django.contrib import admin

from .models import Author, Book


@admin.register(Author)
class AuthorAdmin(admin.ModelAdmin):
    list_display = ("name", "country")
    search_fields = ("name",)
    list_filter = ("country",)
    actions = ["clear_country"]

    @admin.action(description="Clear the country", permissions=["change"])
    def clear_country(self, request, queryset):
        count = queryset.update(country="")
        self.message_user(request, f"Cleared the country of {count} author(s).")


@admin.register(Book)
class BookAdmin(admin.ModelAdmin):
    list_display = ("title", "author", "year", "owner", "public")
    search_fields = ("title", "author__name")
    list_filter = ("genre", "public")
