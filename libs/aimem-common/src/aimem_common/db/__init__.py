"""SQLite access: schema/migrations and role-specific connections."""
