"""bench/results.json after a run of some steps keeps what it did not measure (bench.run.merged_results)."""

from __future__ import annotations

from bench.run import STEPS, merged_results

WHOLE = {
    "started": "2026-11-25T20:38:49+00:00",
    "minutes": 58.0,
    "smoke": False,
    "load_average_at_start": [2.0],
}
LATER = {
    "started": "2026-11-29T01:50:00+00:00",
    "minutes": 9.1,
    "smoke": False,
    "load_average_at_start": [0.4],
}


def test_a_partial_run_overwrites_its_keys_keeps_the_others_and_says_which_run_measured_each_step():
    previous = {**WHOLE, "decode_canal_json_vs_orjson": 0.238, "tables_100_vs_1": 28.04}
    merged = merged_results(
        previous, LATER, {"tables_100_vs_1": 9.5, "jobs_per_extra_table": 7.0}, ["tables"]
    )
    assert merged["decode_canal_json_vs_orjson"] == 0.238
    assert merged["tables_100_vs_1"] == 9.5 and merged["jobs_per_extra_table"] == 7.0
    assert merged["steps"]["tables"] == LATER
    assert merged["steps"]["decode"] == WHOLE  # a file from before steps were recorded: one whole run
    assert set(merged["steps"]) == set(STEPS)
    assert merged["started"] == LATER["started"]


def test_a_second_partial_run_keeps_the_first_ones_step_facts():
    first = merged_results({**WHOLE, "a": 1.0}, LATER, {"b": 2.0}, ["tables"])
    again = {**LATER, "started": "2026-11-30T00:00:00+00:00"}
    second = merged_results(first, again, {"c": 3.0}, ["decode"])
    assert second["steps"]["tables"] == LATER and second["steps"]["decode"] == again
    assert (second["a"], second["b"], second["c"]) == (1.0, 2.0, 3.0)


def test_a_whole_run_starts_from_nothing():
    merged = merged_results({}, LATER, {"x": 1.0}, list(STEPS))
    assert merged == {**LATER, "steps": dict.fromkeys(STEPS, LATER), "x": 1.0}
