"""Replication settings: several NATS URLs, Litestream's generated config, the status read side."""

from __future__ import annotations

import json
import time

from aimem_common import config
from aimem_common.replication import _parse_ts, litestream_config, litestream_env, read_status, write_status


def test_nats_url_takes_a_comma_separated_cluster(tmp_path):
    s = config.load(tmp_path, environ={"AIMEM_BUS__NATS_URL": "nats://a:4222, nats://b:4222,,nats://c:4222",
                                       "AIMEM_BUS__STREAM_REPLICAS": "3"})
    assert s.bus.nats_urls == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert s.bus.stream_replicas == 3
    assert config.load(tmp_path, environ={}).bus.nats_urls == ["nats://127.0.0.1:4222"]


def test_litestream_config_points_at_the_writer_db_and_keeps_secrets_out(tmp_path):
    s = config.load(tmp_path, environ={"AIMEM_REPLICATION__S3_BUCKET": "aimem-db",
                                       "AIMEM_REPLICATION__S3_ENDPOINT": "http://127.0.0.1:9000",
                                       "AWS_SECRET_ACCESS_KEY": "never-in-config"})
    cfg = litestream_config(s)
    replica = cfg["dbs"][0]["replica"]
    assert cfg["dbs"][0]["path"] == str(tmp_path / "db" / "memory.sqlite")
    assert replica == {"type": "s3", "bucket": "aimem-db", "path": "aimem/db", "region": "us-east-1",
                       "sync-interval": "1s", "endpoint": "http://127.0.0.1:9000", "force-path-style": True}
    assert cfg["socket"]["path"] == str(tmp_path / "db" / "litestream.sock")
    assert "never-in-config" not in json.dumps(cfg)
    assert "AWS_CA_BUNDLE" not in litestream_env({"AWS_CA_BUNDLE": "/etc/ca.pem", "X": "1"})


def test_status_lag_grows_from_the_last_good_moment(tmp_path):
    s = config.load(tmp_path, environ={"AIMEM_REPLICATION__LAG_ALERT_S": "60"})
    (tmp_path / "db").mkdir()
    assert read_status(s) == {}
    now = time.time()
    write_status(s, {"db": {"enabled": True, "behind_since": now - 5},
                     "wiki": {"enabled": True, "behind_since": None}})
    st = read_status(s, now=now + 100)  # the writer died 100 s ago: its stale file keeps counting
    assert 104 < st["db"]["lag_s"] < 106 and st["db"]["behind"] is True
    assert st["wiki"]["lag_s"] == 0.0 and st["wiki"]["behind"] is False


def test_go_timestamps_with_nanoseconds_parse():
    assert abs(_parse_ts("2026-12-01T03:12:18.703432795Z") - 1796094738.703432) < 1e-3
