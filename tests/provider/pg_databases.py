"""A fresh PostgreSQL database on the test server (conftest.py ``pg_url``), one per test that needs an empty store:
the store tests against real PostgreSQL each drop and create their own by name."""

from __future__ import annotations


def fresh_database(pg_url: str, name: str) -> str:
    """Drop and create database ``name`` on ``pg_url``'s server; its URL."""
    import sqlalchemy as sa

    from llmsizer.provider.store import db_url

    eng = sa.create_engine(db_url(pg_url), isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.exec_driver_sql(f"DROP DATABASE IF EXISTS {name}")
        c.exec_driver_sql(f"CREATE DATABASE {name}")
    eng.dispose()
    return pg_url.rsplit("/", 1)[0] + "/" + name
