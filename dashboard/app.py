"""mlaperf dashboard entry point: ``streamlit run dashboard/app.py`` (or ``mlaperf dashboard``).

The store URL comes from env ``MLAPERF_DB`` (``--db``), write access from ``MLAPERF_DASHBOARD_WRITABLE``
(``--writable``), the repository link from ``MLAPERF_REPO_URL`` or the sidebar.
"""

from __future__ import annotations

import streamlit as st

from dashboard import auth, data, fmt, links, store_check, widgets
from dashboard import machines as machine_rule
from settings import env

# Pages live in views/, not pages/: a pages/ folder beside the entry script switches Streamlit to its
# legacy multipage mode on a session's first run, which would run a page without this router.

# No Material icons: Streamlit fetches their font from the internet, which fails offline.
st.set_page_config(page_title="mlaperf", layout="wide")

PAGES = [
    st.Page("views/overview.py", title="Overview", default=True),
    st.Page("views/summary.py", title="All benchmarks"),
    st.Page("views/throughput.py", title="Throughput vs concurrency"),
    st.Page("views/history.py", title="History"),
    st.Page("views/regressions.py", title="Regressions"),
    st.Page("views/compare.py", title="Compare commits"),
    st.Page("views/efficiency.py", title="Efficiency"),
]

page = st.navigation(PAGES)
links.arrive()  # before any widget: a followed in-app link's selections win over the previous page's
url = env.store_url()
st.session_state["_url"] = url
st.session_state["_writable"] = store_check.writable()

with st.sidebar:
    st.caption(f"Store: `{store_check.redact(url)}` ({'writable' if store_check.writable() else 'read-only'})")
    if st.button("Reload data", help="Drop cached queries (they refresh every few minutes anyway)"):
        data.clear_all()
    if store_check.writable():
        auth.sidebar(auth.writer())

if not widgets.store_gate(url):
    widgets.stop()
if (problem := data.config_problem()) is not None:  # a page's traceback otherwise (Overview, History, Compare)
    st.error(f"Configuration: {fmt.md_text(problem)}. Fix the file and reload.")
    widgets.stop()

machines = data.machines(url)
ordered = machine_rule.order(machines)  # the machine measured last first: the one the pages open on
gpu_of = dict(zip(machines["name"], machines["gpu_name"] if "gpu_name" in machines else [None] * len(machines),
                  strict=True))


def label(m: str) -> str:
    return f"{m} ({gpu_of[m]})" if gpu_of.get(m) and str(gpu_of[m]) != "none" else m


wanted = env.dashboard_machine()
if wanted and wanted not in ordered and not st.session_state.get("_machine_warned"):
    st.session_state["_machine_warned"] = True  # once a session: every page would repeat it
    problem = machine_rule.unknown(wanted, sorted(ordered))
    st.warning(f"`--machine` / `{env.DASHBOARD_MACHINE.name}`: {fmt.md_text(problem)}; showing "
               f"{fmt.md_text(next(iter(ordered), 'none'))}.")

with widgets.url_writes():  # the selections reach the URL once, when the page is done
    # Seeded here, not in the sidebar: a link's unknown machine is named above the page, not beside the box.
    widgets.seed("machine", wanted if wanted in ordered else next(iter(ordered), None), ordered, label="Machine",
                 format_func=label)
    with st.sidebar:
        widgets.url_selectbox("Machine", ordered, key="machine", default=wanted, format_func=label)
        st.text_input(
            "Repository URL", value=store_check.repo_url(), key="repo_url",
            help="Commits link to <URL>/commit/<sha> (GitHub/GitLab style); default from env MLAPERF_REPO_URL.",
        )
    page.run()
