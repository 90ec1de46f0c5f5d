"""Storage: artifacts on disk and the SQLite metadata database. Used by run/ and cli/, never by plan/."""
