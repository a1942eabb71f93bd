"""What keeps long admin lists cheap: a paginator that never counts a whole table, and the
action checkbox written directly instead of through a form widget's template.

The paginator counts at most ``cap`` rows.

``COUNT(*)`` over millions of rows is a full scan on PostgreSQL; ``COUNT`` over a ``LIMIT cap``
subquery stops at the cap. Past the cap the admin says "cap+" and the last pages are reached
by sorting the other way, filtering or searching.
"""
from django.contrib.admin import helpers
from django.core.paginator import Paginator
from django.utils.functional import cached_property
from django.utils.html import format_html

#: Rows counted at most for a page list.
COUNT_CAP = 5000


class CappedPaginator(Paginator):
    cap = COUNT_CAP

    @cached_property
    def count(self) -> int:
        return self.object_list.order_by()[: self.cap].count()

    @property
    def capped(self) -> bool:
        return self.count >= self.cap


class FastListMixin:
    """For ModelAdmins that list many rows: the action checkbox of each row as plain HTML, the
    same markup Django's CheckboxInput renders, without a template render per row (a quarter
    of a 100-row list's time)."""

    def action_value(self, obj) -> str:
        """What the row's checkbox posts for the actions (the primary key)."""
        return obj.pk

    def action_checkbox(self, obj):
        return format_html('<input type="checkbox" name="{}" value="{}" class="action-select" '
                           'aria-label="Select this object for an action - {}">',
                           helpers.ACTION_CHECKBOX_NAME, self.action_value(obj), str(obj))
