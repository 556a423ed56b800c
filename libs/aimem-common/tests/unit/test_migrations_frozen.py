"""Shipped migrations are frozen: each text is pinned by its sha256, and the run-time trigram
helpers (``db.trigram``) still index exactly as those migrations' triggers do."""

from __future__ import annotations

import hashlib

from aimem_common.db import schema, trigram

# sha256 of each shipped MIGRATION_N's text (utf-8). Never edit an entry: a new migration adds one.
SHIPPED = {
    1: "be305a14e89655c6ac7ca3636306d73734665f06a020c8df8ef23a57d1a804e4",
    2: "983cb5c4ccf9ac81b652d0757db927aaeaa11f11b82d6e369e341ee65725368a",
    3: "5cc3e82ae0830151d0a0a636f76365f0a076201fb7875d0bb26b3eaff0ac09e3",
    4: "d10e51086fe4598c849d197eca70225c11aec76102eaae35c059cd675bf8c81a",
    6: "09d1e44c3c11b7cc79cbce8a2db876a5aa4113f5ed4e384966f6a846a8be8913",
    7: "56d9ecf03ac176190473d7b2687a190ea74a5fe34926ab682ff4ce3ba873459b",
    8: "e3d441f9466dd000cd1d3a731f6e1ae6aa222470b3bd12a0d897555cdfa46e17",
    9: "99ba26465ac71ae75e4200638513ccf4127a1f95c62133472ce8425f4622dd33",
    10: "8598e86b20c521dead7d1e219b4a90015536a636a754041d6dede6435416fc2d",
    11: "baa4f67c43ea0c432ecd41338a0cbdf2d1525db669497526a41f994bdc44884f",
    12: "6ab2a33d403e520cd41ecc261a7ffab302adc1618beea8e3954a452749ab346c",
    13: "dda1a9962fc81fb45fb40594b0ab40c6b47c711ca641fc8120a1205a1be29600",
    14: "05b01aa60ce80f3c439b8c20fff916ed349f694c87894b64f0dad3898ffe051b",
    15: "2a7a00737462249a97c03c69766d46dfdcbf80b3ed51890ad154211c7b06fa22",
    16: "d4a3149dd561380d2709af2160a18eb4e33b8bdab206b4c8c18be5dfe6397448",
    17: "754501ac101b1119b8d3adf84b083d81f79838be8aeddacbab3c54cb1bd7773a",
    18: "183de5564bfd2bfdde3e5e23fd298d3925d37610dae67241ab32aa5356e1e4a8",
    19: "0d2b0b5cac010d7e4665a52d4c9aaeba3cd24c560ee87aa314c6019789ea01bd",
    20: "64b1eeade9b6fb662ce719e8153f269be8f2f2bd73b93150b7f81debedd31eab",
    21: "08178f4acb93262bee1a1afdba33fbaa9c830d0b141e80e53c5459dd204cddf6",
    22: "b5556ef34a93d89fe164a33b747872123d25aedd4670e1f147380c79140707fa",
    23: "bc99218177f4efcf61a1087dc9eab83d6c7e57437d298f91110fb53b687077e5",
    24: "4cb06a69ee8186cb7d43577d79d3fa4cb101d979d53f4f97bdeef1c3e01e57d9",
}


def test_every_shipped_migration_is_unchanged() -> None:
    """Each pinned migration's text hashes as it shipped; a newer one may follow, none may change."""
    present = dict(schema.MIGRATIONS)
    for version, digest in SHIPPED.items():
        assert version in present, f"shipped migration {version} was removed: migrations are forward-only"
        got = hashlib.sha256(present[version].encode("utf-8")).hexdigest()
        assert got == digest, (f"a shipped migration changed (MIGRATION_{version}): restore its text and "
                               "append a new one instead")


def test_new_migrations_only_follow_the_shipped_ones() -> None:
    """Versions ascend, and any migration not pinned here comes after every pinned one."""
    versions = [v for v, _ in schema.MIGRATIONS]
    assert versions == sorted(set(versions))
    assert all(v > max(SHIPPED) for v in versions if v not in SHIPPED)


def test_the_run_time_trigram_helpers_index_as_the_frozen_triggers() -> None:
    """A rebuild (``pages_tri_insert_sql``, ``observations_tri_insert_sql``) inserts what the
    migrations' statements and triggers insert, so a rebuilt index is the one triggers keep."""
    m12, m13 = dict(schema.MIGRATIONS)[12], dict(schema.MIGRATIONS)[13]
    assert trigram.pages_tri_insert_sql("p") + ";\n" in m12
    for row in ("new", "old"):
        assert f"AND {trigram.unspaced_sql(row)} BEGIN" in m12
    assert trigram.observations_tri_insert_sql("o") + ";\n" in m13
    assert f"{trigram.TRI_PAD}'" in m13 and trigram.UNSPACED_GLOB in m13
