"""When the writer gathers a small batch (``pacing.lingers`` and ``ArrivalRate``)."""

from __future__ import annotations

from types import SimpleNamespace

from aimem_common.config import WriterSettings
from aimem_writer.pacing import LINGER_MIN_EXPECTED, ArrivalRate, lingers


def _expected(rate: ArrivalRate, w: WriterSettings) -> float:
    return rate.per_s * w.batch_linger_ms / 1000


def _feed(per_s: float, size: int = 1, seconds: float = 3.0) -> ArrivalRate:
    """Batches of ``size`` commands at ``per_s`` commands a second for ``seconds``."""
    rate, now = ArrivalRate(), 100.0
    for _ in range(int(seconds * per_s / size)):
        rate.observe(size, now)
        now += size / per_s
    return rate


def test_a_trickle_is_applied_at_once_and_a_stream_is_gathered() -> None:
    w = WriterSettings()  # 50 ms
    assert _expected(_feed(10), w) < LINGER_MIN_EXPECTED  # a hook every 100 ms: no wait
    assert _expected(_feed(500, size=3), w) >= LINGER_MIN_EXPECTED  # 500 ev/s in threes: gathered
    assert abs(_feed(500, size=3).per_s - 500) < 25  # the decaying count: within 5 %


def test_a_quiet_spell_resets_the_rate_quickly() -> None:
    rate = _feed(500, size=3)
    rate.observe(1, 10_000.0)  # the first hook after a long pause
    rate.observe(1, 10_000.5)
    assert rate.per_s * 0.05 < LINGER_MIN_EXPECTED, rate.per_s


def _msg(reply: str | None = None):
    return SimpleNamespace(headers={"Aimem-Reply-To": reply} if reply else None)


def test_only_small_batches_nobody_waits_on_linger() -> None:
    w = WriterSettings()
    assert lingers([_msg(), _msg()], w)
    assert not lingers([_msg(), _msg("_INBOX.x")], w)  # a caller waits
    assert not lingers([_msg()] * w.batch_linger_msgs, w)  # large enough
    assert not lingers([], w)
    assert not lingers([_msg()], w.model_copy(update={"batch_linger_ms": 0}))


def _fetched(n_cmds: int, pending: int = 0):
    """A fetched message carrying ``n_cmds`` commands (a bundle above 1), ``pending`` behind it."""
    headers = {"Aimem-Bundle": str(n_cmds)} if n_cmds > 1 else None
    return SimpleNamespace(headers=headers, metadata=SimpleNamespace(num_pending=pending))


def test_fetches_are_sized_in_commands_whatever_a_message_carries(tmp_path) -> None:
    from aimem_common import config
    from aimem_writer.pacing import command_budget, fetch_size, first_fetch_size

    w = WriterSettings(batch_max_msgs=512, batch_max_msgs_behind=4096)
    settings = config.load(tmp_path, environ={}).model_copy(update={"writer": w})
    assert first_fetch_size(settings) == 512 // settings.ingress.bundle_max_cmds  # full bundles: 8
    assert first_fetch_size(settings.model_copy(update={"writer": w.model_copy(update={"batch_max_msgs": 10})})) == 1
    assert fetch_size([_fetched(1)] * 4, w) == 512  # keeping up, lone commands
    assert fetch_size([_fetched(1), _fetched(1, pending=9)], w) == 4096  # behind
    assert fetch_size([_fetched(64, pending=9)] * 2, w) == 64  # behind, full bundles
    assert command_budget([_fetched(1)] * 10, w) == 512
    assert command_budget([_fetched(64)] * 9, w) == 4096  # in hand beyond one idle batch: behind
