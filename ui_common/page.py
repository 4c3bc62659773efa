"""Set-up shared by every dashboard page: config, kept widget state, Markdown escaping, the store.

Widgets whose key starts with ``model_`` or ``snip_`` keep their value across page switches:
Streamlit drops a widget's state on a page that does not draw it, so :func:`page_setup`
re-assigns those keys at the top of every page and :func:`keep` seeds them.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from memprobe_core.highlight import markdown_escape
from memprobe_core.paths import default_store_path
from memprobe_core.store import Store
from ui_common.job_runner import MODEL_LOCK, lock_status

FAKE_ENV = "MEMPROBE_UI_FAKE"
# Widget values kept across page switches (see the module docstring).
_PERSIST_PREFIXES = ("model_", "snip_")
# Set by the first page run of a browser session (see _leave_legacy_navigation).
_FIRST_RUN_DONE = "_memprobe_first_run_done"


def md(text: Any) -> str:
    """Markdown-escape any text (user or model supplied) for ``st.markdown``-family widgets.

    See :func:`memprobe_core.highlight.markdown_escape`; ``st.*`` never renders raw HTML without
    ``unsafe_allow_html``, which memprobe never sets.
    """
    return markdown_escape(text)


def keep(key: str, default: Any, options: Any = None) -> str:
    """Give a kept widget its value through session state (never also as a default argument).

    Returns the key, so a widget is written ``st.selectbox(..., key=keep("model_x", "a", opts))``.
    A kept value no longer among ``options`` falls back to ``default``.
    """
    value = st.session_state.get(key, default)
    if options is not None and value not in options:
        value = default
    st.session_state[key] = value
    return key


# Session-state prefix of the values carried between pages (Probe and Compare pick the same
# snippet, length and run size: a choice on one page is the other's on the next visit).
_CARRY = "_carried_"


def carried(key: str, field: str, default: Any, options: Any = None) -> str:
    """Like :func:`keep`, for a choice shared by the pages under the name ``field``.

    A value changed on this page since its last run becomes the shared one; otherwise the widget
    takes the shared value (the choice made last, on whichever page). Returns the key.
    """
    state = st.session_state
    seen = f"{key}__carried"
    if key in state and state[key] != state.get(seen):
        state[_CARRY + field] = state[key]  # changed here since: the newest choice
    value = state.get(_CARRY + field, state.get(key, default))
    if options is not None and value not in options:
        value = default
    state[key] = state[seen] = value
    return key


def fake_default() -> bool:
    """Whether ``MEMPROBE_UI_FAKE=1`` makes the fake backend the default model (tests, demos)."""
    return os.environ.get(FAKE_ENV, "") == "1"


def page_setup(title: str) -> None:
    """Page config, persisted widget state and the sidebar's job status line (plain words,
    ticking while a job runs: :func:`sidebar_status`)."""
    _leave_legacy_navigation()
    st.set_page_config(page_title=f"memprobe · {title}", page_icon="🔎", layout="wide")
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith(_PERSIST_PREFIXES):
            st.session_state[key] = st.session_state[key]
    sidebar_status()


# While a job holds the models, the sidebar's status line is redrawn this often (seconds).
STATUS_TICK_S = 2.0


def sidebar_status() -> None:
    """The sidebar's job status line (whether a job you start now runs at once or waits),
    redrawn every :data:`STATUS_TICK_S` seconds while a job holds the models: a small fragment
    of the sidebar, not a rerun of the page, so its "started 3 s ago" does not freeze while the
    job's own fragment redraws only itself. With no job running it is drawn once (no timer)."""
    busy = MODEL_LOCK.held_by() is not None
    with st.sidebar:
        st.fragment(run_every=STATUS_TICK_S if busy else None)(_status_line)()


def _status_line() -> None:
    status = lock_status(MODEL_LOCK.held_by(), session=session_tag(), now=time.time())
    st.caption(md(status))


def _leave_legacy_navigation() -> None:
    """Rerun a page that Streamlit ran without app.py, so app.py's ``st.navigation`` holds.

    A server whose entry point has a ``pages/`` folder starts in the legacy navigation
    (``PagesManager.uses_pages_directory``) until a script calls ``st.navigation``: a first visit
    straight to ``/Compare`` would run that page alone, under a sidebar listing "app". The rerun
    runs app.py, whose navigation then serves the same page (its URL path, so its page hash, is
    the same in both schemes); from then on the server stays on ``st.navigation``.

    Only a session's first run is rerun: it has no click a rerun would drop, and once any run
    has called ``st.navigation`` the server never falls back again. (AppTest restores the legacy
    flag before each of its runs; its later runs keep running a switched-to page alone.)
    """
    first_run = _FIRST_RUN_DONE not in st.session_state
    st.session_state[_FIRST_RUN_DONE] = True
    if first_run and PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


def session_tag() -> str:
    """A short id of this browser session: tells this tab's jobs from others' (never shown)."""
    if "_memprobe_session" not in st.session_state:
        st.session_state["_memprobe_session"] = uuid.uuid4().hex[:6]
    return st.session_state["_memprobe_session"]


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:

    return Store(path)


def get_store() -> Store | None:
    """The run store (one per process and path), or ``None`` with an error shown."""

    path = str(default_store_path())
    try:
        return _store(path)
    except Exception as exc:  # StoreError or an OS error: say which file and what to do
        st.error(
            md(
                f"Cannot open the run store {path}: {exc}. Set MEMPROBE_STORE to a writable file "
                "path and restart the dashboard."
            )
        )
        return None
