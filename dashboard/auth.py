"""Who changes a regression's status or triage fields in a ``--writable`` dashboard.

With an ``[auth]`` section in ``.streamlit/secrets.toml`` (Streamlit's own OIDC login: ``redirect_uri``,
``cookie_secret``, ``client_id``, ``client_secret``, ``server_metadata_url``; docs/dashboard.md), writing needs
a signed-in user (``st.login``), who is recorded on every status change and note. Configured but unusable
(Authlib missing): writing stays off, and the page says why. Without the section the dashboard says it is
unauthenticated and records the local user (``user@host``), which anyone who reaches the page can act as.
"""

from __future__ import annotations

import getpass
import importlib.util
import socket
from dataclasses import dataclass

import streamlit as st


@dataclass(frozen=True)
class Writer:
    """``name`` is recorded with a change; ``can_write`` is False until a configured sign-in is done."""

    name: str
    signed_in: bool
    configured: bool
    can_write: bool
    problem: str = ""


def local_user() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _configured() -> bool:
    try:
        return "auth" in st.secrets
    except (FileNotFoundError, KeyError, ValueError):  # no secrets.toml, or one that does not parse
        return False


def writer() -> Writer:
    """The person a write is recorded under, and whether they may write now."""
    if not _configured():
        return Writer(local_user(), signed_in=False, configured=False, can_write=True)
    if importlib.util.find_spec("authlib") is None:
        return Writer("", signed_in=False, configured=True, can_write=False,
                      problem="Sign-in is configured ([auth] in .streamlit/secrets.toml) but Authlib is not installed "
                      "(pip install 'mlaperf[auth]'); changes are off until it is.")
    user = st.user
    if not user.is_logged_in:
        return Writer("", signed_in=False, configured=True, can_write=False, problem="Sign in to change statuses.")
    name = str(user.get("email") or user.get("name") or user.get("sub") or "signed-in user")
    return Writer(name, signed_in=True, configured=True, can_write=True)


def sidebar(who: Writer) -> None:
    """The sign-in state in the sidebar of a writable dashboard: log in/out, or the unauthenticated note."""
    if not who.configured:
        st.caption(f"Unauthenticated: changes are recorded as `{who.name}` (configure sign-in in "
                   "`.streamlit/secrets.toml`, [auth]).")
    elif who.signed_in:
        st.caption(f"Signed in as `{who.name}`")
        if st.button("Log out"):
            st.logout()
    elif who.problem and "Authlib" in who.problem:
        st.warning(who.problem)
    elif st.button("Log in", help="Sign in with the configured identity provider to change statuses"):
        st.login()
