"""The dashboard's arithmetic and its SVG charts (pure functions; the pages themselves are
tested against a live server in tests/integration/test_admin.py)."""
import re

import pytest

from mcp_transport.admin import dashboard
from mcp_transport.admin.charts import Series, line_chart, nice_ceiling


@pytest.mark.parametrize("value, top", [(0, 1), (0.3, 0.5), (1, 1), (7, 10), (12, 20), (23, 25), (260, 500),
                                        (1001, 2000)])
def test_axis_tops_are_round_numbers_at_or_above_the_maximum(value, top):
    assert nice_ceiling(value) == pytest.approx(top)


def test_rates_per_minute_between_samples_with_a_gap_at_a_counter_reset():
    samples = [{"t": 0, "get_requests": 0}, {"t": 30, "get_requests": 10}, {"t": 60, "get_requests": 40},
               {"t": 90, "get_requests": 5}]  # Redis restarted: counters back near zero
    assert dashboard.per_minute(samples, ["get_requests"]) == [None, 20, 60, None]


def test_share_per_interval_is_a_percentage_of_what_happened_in_it():
    samples = [{"t": 0, "get_requests": 10, "get_resumes": 5}, {"t": 60, "get_requests": 30, "get_resumes": 10},
               {"t": 120, "get_requests": 30, "get_resumes": 10}]
    assert dashboard.ratio_per_interval(samples, ["get_resumes"], ["get_requests"]) == [None, 25, None]


def test_cards_from_a_reading():
    reading = {"get_requests": 200, "get_resumes": 50, "replay_hits:redis": 45, "replay_hits:database": 3,
               "replay_failures:unknown": 2, "sessions_closed:expired": 7, "open_streams": 12,
               "open_streams_max_per_session": 3, "sessions_with_open_streams": 9,
               "store": {"buffer_entries": 1234, "events_appended": 5000,
                         "evicted": {"capacity": 10, "ttl": 5, "session_cap": 0}}}
    cards = {card.label: card for card in dashboard.cards(reading)}
    assert cards["Reconnects (GET)"].detail.startswith("25% with Last-Event-ID")
    assert cards["Replays"].value == "48 ok" and cards["Replay hit rate"].value == "96%"
    assert cards["Buffered events"].value == "1,234" and cards["Evictions"].value == "15"
    assert cards["Open streams"].detail.startswith("max 3 per session")


def test_chart_draws_each_series_and_breaks_lines_at_gaps():
    html = str(line_chart([0, 60, 120, 180], [Series("a", [1, None, 3, 4]), Series("b", [2, 2, 2, 2])]))
    assert html.count("<polyline") == 2  # a: one point, then a two-point run; b: one line
    assert html.count("<circle") == 1
    assert re.findall(r'class="key"><i style="background:(#[0-9A-F]{6})"></i>(\w)', html) == [
        ("#0072B2", "a"), ("#E69F00", "b")]
    assert ">5<" in html  # the axis top: 4 rounded up


def test_chart_without_enough_samples_says_so():
    assert "Not enough samples yet" in str(line_chart([0], [Series("a", [1])]))
    assert "Not enough samples yet" in str(line_chart([0, 1], [Series("a", [None, None])]))


def test_time_labels_stand_at_the_start_middle_and_end_of_the_axis_whatever_the_samples():
    """Samples bunched at the end (one from ten minutes ago, then the last few seconds: a
    dashboard opened soon after a restart) once put the middle label on the middle sample,
    under the last label at the right end of the axis."""
    html = str(line_chart([0, 594, 596, 598, 600], [Series("a", [1, 2, 3, 4, 5])]))
    labels = re.findall(r'<text x="([\d.]+)" y="184" class="axis time" text-anchor="(\w+)">([\d:]+)</text>', html)
    assert labels == [("52.0", "start", "00:00"), ("300.0", "middle", "00:05"), ("548.0", "end", "00:10")]
