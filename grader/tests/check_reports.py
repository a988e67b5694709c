#!/usr/bin/python3
"""check_reports.py RESULTS_JSON JUNIT_XML: the grader's reports are valid.

results.json must be what Gradescope reads (a score, and tests each with a
name, score, max_score, status, output and visibility); the JUnit file must
parse as XML with one testcase per test and the same failures. Exits 1 with
the reason otherwise.
"""
import json
import sys
import xml.etree.ElementTree as ET


def main(json_path, xml_path):
    with open(json_path) as f:
        r = json.load(f)
    tests = r["tests"]
    assert isinstance(r["score"], (int, float)), "score is not a number"
    assert tests, "no tests"
    for t in tests:
        for key in ("name", "score", "max_score", "status", "output", "visibility"):
            assert key in t, f"test {t.get('name')} has no {key}"
        assert t["status"] in ("passed", "failed"), t["status"]
        assert t["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
        if t["max_score"] > 0:   # a test worth no points (the grader's self-test, a build check) just says
            assert (t["status"] == "passed") == (t["score"] == t["max_score"]), t["name"]
        assert 0 <= t["score"] <= t["max_score"], t["name"]
    assert r["score"] == sum(t["score"] for t in tests), "score is not the sum of the tests"
    root = ET.parse(xml_path).getroot()
    cases = root.findall(".//testcase")
    failures = root.findall(".//testcase/failure")
    assert len(cases) == len(tests), f"{len(cases)} testcases for {len(tests)} tests"
    # A check that passed but earns no point (its run's gates failed) is
    # "failed" with no points in results.json, and a pass in JUnit.
    unearned = sum(t["status"] == "failed" and t["output"].startswith("no points") for t in tests)
    failed = sum(t["status"] == "failed" for t in tests) - unearned
    assert len(failures) == failed, f"{len(failures)} JUnit failures for {failed} failed tests"
    assert int(root.get("failures")) == failed
    print(f"reports valid: {len(tests)} tests, {failed} failed, score {r['score']}")


if __name__ == "__main__":
    try:
        main(sys.argv[1], sys.argv[2])
    except (AssertionError, KeyError, ValueError, ET.ParseError) as e:
        print(f"invalid report: {e!r}")
        sys.exit(1)
