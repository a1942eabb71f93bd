"""A paginator that never counts a whole table: it counts at most ``cap`` rows.

``COUNT(*)`` over millions of rows is a full scan on PostgreSQL; ``COUNT`` over a ``LIMIT cap``
subquery stops at the cap. Past the cap the admin says "cap+" and the last pages are reached
by sorting the other way, filtering or searching.
"""
from django.core.paginator import Paginator
from django.utils.functional import cached_property

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
