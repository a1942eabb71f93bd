"""The admin of static tokens (``McpToken``): list, create (the token is shown once), revoke.

Revoking here takes effect on the next request on every process (auth/tokens.py's signals).
"""
from django import forms
from django.contrib import admin, messages
from django.utils import timezone

from ..models import McpToken


class TokenForm(forms.ModelForm):
    class Meta:
        model = McpToken
        fields = ("user", "name", "scope", "expires_at")


@admin.register(McpToken)
class McpTokenAdmin(admin.ModelAdmin):
    form = TokenForm
    list_display = ("prefix", "user", "name", "scope", "status", "created_at", "expires_at", "revoked_at")
    list_filter = ("revoked_at", "expires_at")
    search_fields = ("prefix", "name", "user__username")
    list_select_related = ("user",)
    raw_id_fields = ("user",)
    actions = ("revoke",)

    def get_readonly_fields(self, request, obj=None):
        # A token's owner and scope are what it was issued with; revoke it and issue another.
        return ("prefix", "user", "scope", "created_at", "revoked_at") if obj else ("prefix",)

    def save_model(self, request, obj, form, change):
        if not change:
            secret = McpToken.new_secret()
            obj.set_secret(secret)
            self.message_user(request, f"The new token, shown only now: {secret}", messages.WARNING)
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke selected tokens", permissions=["change"])
    def revoke(self, request, queryset):
        done = 0
        for token in queryset.filter(revoked_at=None):
            token.revoked_at = timezone.now()
            token.save(update_fields=["revoked_at"])  # the signal tombstones its cache entry
            done += 1
        self.message_user(request, f"Revoked {done} token(s).", messages.SUCCESS)
