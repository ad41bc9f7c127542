"""The test brokers' storage formats for any cluster id, including one the option parser could misread."""

from __future__ import annotations

from testkit.local_services import KafkaBroker


def test_a_cluster_id_that_starts_with_a_dash_formats_the_storage(tmp_path):
    # One random url-safe id in 64 starts with "-"; such an id once stopped a CI run before any Kafka test.
    broker = KafkaBroker(tmp_path)
    (tmp_path / "server.properties").write_text(broker._properties())
    broker.format_storage("-x2Yw9v1TnKb7Rz8pQm4LdA")
    meta = (tmp_path / "data" / "meta.properties").read_text()
    assert "cluster.id=-x2Yw9v1TnKb7Rz8pQm4LdA" in meta
