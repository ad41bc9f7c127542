"""databricks.yml: valid for the bundle's own job models, and every reference in it resolves in this project.

databricks-bundles ships no JSON schema, but its job classes are generated from the bundle schema and
refuse unknown fields; the rest (entry points, parameters, variables, paths) is checked against the project.
"""

from __future__ import annotations

import re
import sys
from importlib import import_module
from pathlib import Path

import pytest
import yaml
from databricks.bundles.jobs import Job

from ingest.cli import _params, _parser
from ingest.config import IngestConfig
from ingest.model import TableId

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).parents[2]
BUNDLE = yaml.safe_load((ROOT / "databricks.yml").read_text())
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
JOBS = BUNDLE["resources"]["jobs"]
JOB_REF = re.compile(r"\{\{job\.parameters\.([^}]+)\}\}")
VAR_REF = re.compile(r"\$\{var\.([A-Za-z0-9_]+)\}")


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _resolve_variables(text: str) -> str:
    return VAR_REF.sub(lambda m: str(BUNDLE["variables"][m.group(1)]["default"]), text)


def test_both_jobs_are_there():
    entry_points = {t["python_wheel_task"]["entry_point"] for job in JOBS.values() for t in job["tasks"]}
    assert entry_points == {"ticdc-ingest-mirror", "ticdc-ingest-backfill"}


@pytest.mark.parametrize("name", sorted(JOBS))
def test_job_matches_the_bundle_job_model(name):
    job = Job.from_dict(JOBS[name])  # raises on a misspelled or misplaced field
    assert job.tasks and all(task.python_wheel_task for task in job.tasks)


@pytest.mark.parametrize("name", sorted(JOBS))
def test_wheel_task_entry_point_exists_in_the_package(name):
    scripts = PROJECT["project"]["scripts"]
    for task in JOBS[name]["tasks"]:
        wheel = task["python_wheel_task"]
        assert _normalized(wheel["package_name"]) == _normalized(PROJECT["project"]["name"])
        module, _, function = scripts[wheel["entry_point"]].partition(":")
        assert callable(getattr(import_module(module), function))


@pytest.mark.parametrize("name", sorted(JOBS))
def test_every_job_parameter_reference_is_defined_and_needs_no_escaping(name):
    job = JOBS[name]
    defined = {p["name"] for p in job["parameters"]}
    for task in job["tasks"]:
        for value in task["python_wheel_task"]["named_parameters"].values():
            for ref in JOB_REF.findall(value):
                assert ref in defined, f"{name}: {{{{job.parameters.{ref}}}}} is not a job parameter"
                # Dynamic value references allow letters, digits and underscores without backticks.
                assert re.fullmatch(r"[A-Za-z0-9_]+", ref), ref


@pytest.mark.parametrize("name", sorted(JOBS))
def test_default_parameters_make_a_valid_config_through_the_cli(name):
    job = JOBS[name]
    defaults = {p["name"]: _resolve_variables(str(p["default"])) for p in job["parameters"]}
    for task in job["tasks"]:
        named = task["python_wheel_task"]["named_parameters"]
        argv = [f"--{k}={JOB_REF.sub(lambda m: defaults[m.group(1)], v)}" for k, v in named.items()]
        arguments = ["run", *argv]  # what the wheel entry point hands to main()
        config = IngestConfig.from_params(_params(_parser().parse_args(arguments)))
        # By default the mirror is catalog tables by name: no path but the Kafka checkpoint's volume.
        assert config.by_name and config.target_catalog == defaults["catalog"] and not config.target_path
        location = config.mirror.address(TableId("shop", "orders"))
        assert location == "`main`.`tidb_shop`.`orders`"
        if config.kafka is not None:
            assert config.checkpoint_location.startswith("/Volumes/")


def test_variables_referenced_are_defined():
    text = (ROOT / "databricks.yml").read_text()
    assert set(VAR_REF.findall(text)) <= set(BUNDLE["variables"])


def test_the_wheel_artifact_is_what_the_tasks_install():
    (artifact,) = BUNDLE["artifacts"].values()
    assert artifact["type"] == "whl" and artifact["build"] == "python -m build --wheel"
    assert (ROOT / artifact["path"] / "pyproject.toml").exists()
    for job in JOBS.values():
        environments = {e["environment_key"]: e["spec"] for e in job.get("environments", [])}
        for task in job["tasks"]:
            if "environment_key" in task:  # serverless: the wheel is a dependency of the task's environment
                assert "./dist/*.whl" in environments[task["environment_key"]]["dependencies"]
            else:
                assert {"whl": "./dist/*.whl"} in task["libraries"]  # where `python -m build` writes


def test_the_serverless_mirror_runs_available_now_on_a_periodic_trigger():
    job = JOBS["ticdc_mirror_serverless"]
    trigger = next(p["default"] for p in job["parameters"] if p["name"] == "trigger")
    assert trigger == "available-now"  # serverless streaming supports no other trigger
    assert "periodic" in job["trigger"] and "job_clusters" not in job
    assert all("environment_key" in task and "job_cluster_key" not in task for task in job["tasks"])
