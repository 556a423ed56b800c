"""Sections of the parties outside the stack.

``[admission]`` webhooks, ``[[mirrors]]`` receivers, ``[replication]`` targets.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


AdmissionOperation = Literal[
    "delete_page", "purge_session", "purge_project", "purge_workspace", "move_project", "move_session",
    "delete_ledger"]


class AdmissionWebhook(BaseModel):
    """One ``[[admission.webhooks]]`` entry (``aimem_common.admission``): asked before each of
    its ``operations`` (default: all); ``on_failure`` decides when it cannot answer in time."""

    url: str
    operations: list[AdmissionOperation] = list(AdmissionOperation.__args__)  # type: ignore[attr-defined]
    timeout_s: float = Field(2.0, gt=0, le=30)
    on_failure: Literal["reject", "allow"] = "reject"
    headers: dict[str, str] = {}


class AdmissionSettings(BaseModel):
    """Webhooks called, in declaration order, before a destructive operation reaches the writer."""

    webhooks: list[AdmissionWebhook] = []


class MirrorSettings(BaseModel):
    """One ``[[mirrors]]`` receiver: every committed change (an ``aimem.evt.*`` event whose kind
    matches ``events``, fnmatch patterns; empty = every kind but ``observations.appended``) is
    POSTed to ``url`` as signed JSON by the maintainer (``aimem_maintainer.mirrors``)."""

    url: str
    name: str | None = Field(None, pattern=r"^[A-Za-z0-9_-]{1,40}$")  # durable consumer suffix
    secret: str | None = None  # HMAC-SHA256 key; or `secret_env`, the env var holding it
    secret_env: str | None = None
    events: list[str] = []
    timeout_s: float = Field(5.0, gt=0, le=60)
    max_backoff_s: float = Field(300.0, ge=1)


class ReplicationSettings(BaseModel):
    """Off-node copies: the wiki pushed to a git remote, the DB streamed by Litestream.

    Empty ``git_remote`` = no push; empty ``s3_bucket`` = no Litestream (``aimem up`` then
    starts none). The S3 keys are read from the standard ``AWS_ACCESS_KEY_ID`` /
    ``AWS_SECRET_ACCESS_KEY`` environment by Litestream itself, never stored here.
    """

    git_remote: str = ""  # any git URL: a bare repo path, ssh://, https:// (credentials via git)
    git_branch: str = "main"
    git_push_retry_max_s: float = 60.0  # backoff ceiling between failed pushes
    s3_bucket: str = ""
    s3_path: str = "aimem/db"
    s3_endpoint: str = ""  # MinIO, Garage, R2, moto: http(s)://host:port; empty = AWS
    s3_region: str = "us-east-1"
    s3_force_path_style: bool = True
    sync_interval_s: float = 1.0  # Litestream's WAL upload period (= the DB's RPO when healthy)
    litestream_socket: str = ""  # control socket the writer polls for the last sync; "" = <data_dir>/db/litestream.sock
    lag_poll_s: float = 5.0
    lag_alert_s: float = 300.0  # replication lag above this is "behind" (status, alert rule)
