"""Alembic environment for the mlaperf store.

mlaperf runs migrations programmatically (``db.engine.upgrade``), handing over an open connection in
``config.attributes["connection"]``; no alembic.ini is needed. Running the ``alembic`` tool directly
also works: it uses ``sqlalchemy.url`` from its config if set, else ``settings.env.store_url()``.
"""

from __future__ import annotations

from alembic import context

from db.engine import make_engine
from db.models import Base
from settings.env import store_url

config = context.config
target_metadata = Base.metadata


def run_offline() -> None:
    context.configure(
        url=config.get_main_option("sqlalchemy.url") or store_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        # render_as_batch: SQLite can only ALTER tables by copying them.
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(config.get_main_option("sqlalchemy.url") or store_url())
    try:
        with engine.begin() as conn:
            context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
