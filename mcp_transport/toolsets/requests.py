"""The request a ModelAdmin's methods are called with: the caller's user, and nothing else."""
from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest


def request_for(user) -> HttpRequest:
    """A GET request of ``user``, for the ModelAdmin's methods."""
    request = HttpRequest()
    request.method = "GET"
    request.META["SCRIPT_NAME"] = ""  # the admin's pages read it (an action may build one)
    request.user = user or AnonymousUser()
    return request
