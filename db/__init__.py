"""mlaperf's store: SQLAlchemy models, engines (SQLite default, PostgreSQL by URL), Alembic migrations,
asv results ingestion and the queries the dashboard and the regression detector use.

Public surface: ``db.models``, ``db.engine`` (default_url, make_engine, upgrade, check_schema),
``db.ingest.ingest_paths``, ``db.queries``, ``db.cli.register``.
"""
