"""A small model set for "Expose your models" (docs/models.md): authors, and books that belong
to the user who added them."""
from django.conf import settings
from django.db import models


class Author(models.Model):
    name = models.CharField(max_length=100)
    country = models.CharField(max_length=2, blank=True, help_text="ISO 3166 country code")

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Book(models.Model):
    title = models.CharField(max_length=200)
    author = models.ForeignKey(Author, on_delete=models.PROTECT, related_name="books")
    year = models.IntegerField(null=True, blank=True)
    genre = models.CharField(max_length=20, choices=[("novel", "Novel"), ("essay", "Essay"), ("poetry", "Poetry")],
                             default="novel")
    public = models.BooleanField(default=True, help_text="Seen by every reader, not only its owner")
    #: Only staff read it (BookTools.get_fields).
    internal_note = models.TextField(blank=True)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True,
                              related_name="books")
    added = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.title
