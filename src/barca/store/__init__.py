"""Storage: results in an artifact store (store.artifact_store: the project's local directory,
or another store behind the same interface) and the SQLite metadata database. Used by engine/
and cli/, never by plan/."""
