"""The local schema registry speaks the Confluent API: a schema registered under a subject is served by id."""

import json
import urllib.request

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
ORDERS_VALUE = {
    "type": "record",
    "name": "orders",
    "namespace": "shop",
    "fields": [
        {"name": "order_id", "type": "long"},
        {"name": "status", "type": ["null", "string"], "default": None},
    ],
}


def call(url: str, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": CONTENT_TYPE})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_registered_schema_is_fetched_by_its_id(schema_registry):
    assert schema_registry.endswith("/apis/ccompat/v7")
    registered = call(
        f"{schema_registry}/subjects/cdc_orders-value/versions", {"schema": json.dumps(ORDERS_VALUE)}
    )
    schema_id = registered["id"]
    assert isinstance(schema_id, int)

    fetched = call(f"{schema_registry}/schemas/ids/{schema_id}")
    assert json.loads(fetched["schema"]) == ORDERS_VALUE
    # The registry is shared by the session's tests: other subjects may be there too.
    assert "cdc_orders-value" in call(f"{schema_registry}/subjects")
    latest = call(f"{schema_registry}/subjects/cdc_orders-value/versions/latest")
    assert (latest["id"], latest["version"]) == (schema_id, 1)
