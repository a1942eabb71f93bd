"""The library's books as a Django REST Framework API, published as MCP tools by
``register_viewset`` (tools/library/mcp_tools.py; docs/models.md, "A DRF viewset as tools").
Every rule is the viewset's own: permissions, throttle, filters, pagination, serializers."""
from django.db.models import Q
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework import filters, pagination, permissions, serializers, throttling, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from .models import Book


class ShelfSerializer(serializers.ModelSerializer):
    class Meta:
        model = Book
        fields = ["id", "title", "author", "year", "genre", "public"]

    def validate_year(self, year):
        if year is not None and year > 2100:
            raise serializers.ValidationError("A book from the future? Give the year it was published.")
        return year


class StaffShelfSerializer(ShelfSerializer):
    """What staff read: the internal note too."""

    class Meta(ShelfSerializer.Meta):
        fields = [*ShelfSerializer.Meta.fields, "internal_note"]


class ViewPermissions(permissions.DjangoModelPermissions):
    """Django's model permissions, reads included (DRF's own ask none for GET)."""

    perms_map = {**permissions.DjangoModelPermissions.perms_map, "GET": ["%(app_label)s.view_%(model_name)s"]}


class OwnerOrStaffWrites(permissions.BasePermission):
    """Anyone who sees a book may read it; only its owner or staff change it."""

    def has_object_permission(self, request, view, book):
        return request.method in permissions.SAFE_METHODS or request.user.is_staff or book.owner_id == request.user.pk


class ShelfThrottle(throttling.UserRateThrottle):
    rate = "20/minute"


class ShelfPages(pagination.PageNumberPagination):
    page_size = 10


class ShelfViewSet(viewsets.ModelViewSet):
    queryset = Book.objects.all()
    serializer_class = ShelfSerializer
    permission_classes = [ViewPermissions, OwnerOrStaffWrites]
    throttle_classes = [ShelfThrottle]
    filter_backends = [DjangoFilterBackend, filters.SearchFilter, filters.OrderingFilter]
    filterset_fields = {"year": ["gte", "lte"], "genre": ["exact"]}
    search_fields = ["title", "author__name"]
    ordering_fields = ["title", "year"]
    ordering = ["title", "id"]
    pagination_class = ShelfPages

    def get_queryset(self):
        books = super().get_queryset()
        user = self.request.user
        if user.is_staff:
            return books
        return books.filter(Q(public=True) | Q(owner=user)) if user.is_authenticated else books.filter(public=True)

    def get_serializer_class(self):
        return StaffShelfSerializer if self.request.user.is_staff else ShelfSerializer

    def perform_create(self, serializer):
        serializer.save(owner=self.request.user)

    @action(detail=True, methods=["patch"])  # PATCH: DjangoModelPermissions asks change_book
    def publish(self, request, pk=None):
        """Make one of your books public."""
        book = self.get_object()
        book.public = True
        book.save(update_fields=["public"])
        return Response(self.get_serializer(book).data)
