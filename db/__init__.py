"""mlaperf's store: SQLAlchemy models, engines (SQLite default, PostgreSQL by URL), Alembic migrations,
asv results ingestion and the queries the dashboard and the regression detector use.

Public surface: ``db.models``, ``db.engine`` (make_engine, upgrade, check_schema,
StoreError, store_error), ``db.ingest.ingest_paths``, ``db.limits`` (what ingest accepts; docs/ingest.md),
``db.queries``, ``db.store_commands.register``.
"""
