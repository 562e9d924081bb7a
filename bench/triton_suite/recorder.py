"""A pytest plugin that writes every test's outcome and first error line to the JSON file
named by ``TRITON_SUITE_RESULTS`` (``-p bench.triton_suite.recorder``)."""

from __future__ import annotations

import json
import os

_RESULTS: dict[str, list] = {}


def _message(report) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        return str(crash.message)
    if isinstance(report.longrepr, tuple):  # a skip: (file, line, reason)
        return str(report.longrepr[-1])
    return str(report.longrepr or "")


def pytest_runtest_logreport(report) -> None:
    if report.when == "call" or report.outcome != "passed":
        if report.nodeid in _RESULTS and _RESULTS[report.nodeid][0] != "passed":
            return  # keep the first failure (setup's, or call's before teardown's)
        outcome = "skipped" if report.skipped else report.outcome
        if hasattr(report, "wasxfail"):
            outcome = "xfail" if report.skipped else "xpass"
        _RESULTS[report.nodeid] = [outcome, _message(report)[:500]]
        if len(_RESULTS) % FLUSH_EVERY == 0:
            _write()


#: Results are written every so many tests too, so that a run stopped by a time limit
#: (a GPU machine's) still leaves what it measured.
FLUSH_EVERY = 200
_CONTROLLER = True


def pytest_configure(config) -> None:
    global _CONTROLLER
    _CONTROLLER = not hasattr(config, "workerinput")  # the controller writes (xdist forwards reports)


def _write() -> None:
    path = os.environ.get("TRITON_SUITE_RESULTS")
    if path and _CONTROLLER:
        with open(path + ".part", "w") as handle:
            json.dump(_RESULTS, handle, indent=0, sort_keys=True)
        os.replace(path + ".part", path)


def pytest_sessionfinish(session) -> None:
    _write()
