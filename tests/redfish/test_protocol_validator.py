"""DMTF's redfish-protocol-validator against the BMC simulator in the lab's mode (HTTPS, sessions).

The validator runs as its own console script from the project venv; the password goes in a
0600 config file, not on its command line. Every assertion must PASS, or be NOT_TESTED and listed
with its reason in ``lab/redfish_sim/CONFORMANCE.md`` (a newly untested assertion fails here).
"""

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "lab" / "redfish_sim" / "CONFORMANCE.md"
#: PASS count of the run recorded in CONFORMANCE.md; fewer means something stopped being tested.
MIN_PASS = 250


def _validator() -> str:
    exe = Path(sys.executable).parent / "rf_protocol_validator"
    if not exe.exists():
        found = shutil.which("rf_protocol_validator")
        if found is None:
            pytest.skip("redfish-protocol-validator not installed (run `make setup`)")
        return found
    return str(exe)


def documented_not_tested() -> set[str]:
    """Assertion ids in the NOT_TESTED section of CONFORMANCE.md."""
    text = CONFORMANCE.read_text(encoding="utf-8")
    section = text.split("## NOT_TESTED", 1)[1]
    return set(re.findall(r"`([A-Z][A-Z0-9_]+)`", section))


def run_validator(url: str, username: str, password: str, ca_bundle: str, workdir: Path) -> list[dict]:
    """Run the validator against ``url``; the rows of its TSV report (Assertion, Result, ...)."""
    config = workdir / "rpv.ini"
    report = workdir / "report"
    config.write_text(f"[Authentication]\nuser = {username}\npassword = {password}\n"
                      f"[Connection]\nrhost = {url}\nca-bundle = {ca_bundle}\n"
                      f"[Reporting]\nreport-dir = {report}\nreport-type = tsv\n", encoding="utf-8")
    config.chmod(0o600)
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override the validator's own ca-bundle
    env = {**os.environ, "REQUESTS_CA_BUNDLE": ca_bundle, "CURL_CA_BUNDLE": ca_bundle}
    proc = subprocess.run([_validator(), "-c", str(config)], cwd=workdir, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    tsvs = sorted(report.glob("*.tsv"))
    assert tsvs, f"no report; validator said:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert password not in proc.stdout + proc.stderr
    with tsvs[-1].open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


@pytest.mark.slow
def test_simulator_passes_the_protocol_validator_in_lab_mode(sim, tmp_path):
    rows = run_validator(sim.url("dpu-tls"), sim.username, sim.password, sim.ca_bundle, tmp_path)
    counts = Counter(r["Result"] for r in rows)
    failures = [f"{r['Assertion']} {r['Method']} {r['URI']}: {r['Message']}"
                for r in rows if r["Result"] == "FAIL"]
    assert failures == [], "\n".join(failures)
    untested = {r["Assertion"] for r in rows if r["Result"] == "NOT_TESTED"}
    unexplained = untested - documented_not_tested()
    assert not unexplained, f"not tested and not explained in {CONFORMANCE.name}: {sorted(unexplained)}"
    assert counts["PASS"] >= MIN_PASS, counts


def test_conformance_doc_lists_reasons():
    """The N/A list is not empty and every listed id looks like a validator assertion."""
    ids = documented_not_tested()
    assert len(ids) > 30 and all(re.fullmatch(r"(PROTO|REQ|RESP|SEC|SERV)_[A-Z0-9_]+", i) for i in ids)
