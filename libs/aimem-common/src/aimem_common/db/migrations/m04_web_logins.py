"""Migration 4: the web interface: users with passwords, server-side login sessions."""

from __future__ import annotations

# The web interface (query ``/web``): people log in with a password (argon2id hash, made by
# the query service; the plaintext never reaches the bus) or an API key, and hold a
# server-side session. The cookie carries a random token; only its sha256 is stored, so a
# copy of the DB cannot be replayed as a cookie. A session dies with its user (cascade), its
# API key (cascade on delete, revoked_at checked on read), a password change, or the root
# token it was opened with (``root_fp`` must match the configured token's fingerprint).
SQL = r"""
ALTER TABLE users ADD COLUMN password_hash TEXT;         -- argon2id encoded; NULL = no password login
ALTER TABLE users ADD COLUMN password_changed_at TEXT;

CREATE TABLE web_sessions (
  token_hash  TEXT PRIMARY KEY,                  -- sha256 hex of the cookie's token
  user_id     INTEGER REFERENCES users(id) ON DELETE CASCADE,   -- NULL = a root-token login
  api_key_id  INTEGER REFERENCES api_keys(id) ON DELETE CASCADE, -- set for an API-key login
  root_fp     TEXT,                              -- sha256 hex of the root token (root-token logins)
  created_at  TEXT NOT NULL,
  expires_at  TEXT NOT NULL,
  client      TEXT                               -- User-Agent at login (display only)
);
CREATE INDEX web_sessions_user ON web_sessions(user_id);
CREATE INDEX web_sessions_expiry ON web_sessions(expires_at);
"""
