"""Mirror helpers: signature, event filter, backoff, durable names."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from aimem_common import config
from aimem_common.config import MirrorSettings
from aimem_maintainer import mirrors


def test_signature_is_hmac_sha256_of_the_raw_body():
    body = b'{"id":"evt-1"}'
    assert mirrors.sign("k", body) == "sha256=" + hmac.new(b"k", body, hashlib.sha256).hexdigest()


def test_event_filter_default_skips_observations_and_patterns_match():
    m = MirrorSettings(url="http://x/")
    assert mirrors.wanted(m, "page.changed") and not mirrors.wanted(m, "observations.appended")
    m = MirrorSettings(url="http://x/", events=["*.purged", "page.changed"])
    assert mirrors.wanted(m, "session.purged") and mirrors.wanted(m, "page.changed")
    assert not mirrors.wanted(m, "handoff.opened")


def test_backoff_doubles_up_to_the_cap():
    m = MirrorSettings(url="http://x/", max_backoff_s=10)
    assert [mirrors.backoff_s(m, n) for n in (1, 2, 3, 4, 5, 9)] == [1, 2, 4, 8, 10, 10]


def test_durable_names_and_secret_env(tmp_path):
    assert mirrors.durable_name(MirrorSettings(url="http://x/", name="audit")) == "mirror-audit"
    assert mirrors.durable_name(MirrorSettings(url="http://x/")).startswith("mirror-")
    s = config.load(tmp_path, environ={"MS": "sec"}, mirrors=[{"url": "http://x/", "secret_env": "MS"}])
    assert s.resolved_env["MS"] == "sec"
    with pytest.raises(config.ConfigError):
        config.load(tmp_path, environ={}, mirrors=[{"url": "http://x/", "secret_env": "MS"}])
