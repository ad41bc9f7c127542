"""Test support, not shipped in the wheel: the upstream model and TiCDC's encoders (``sample``), workloads for
the benchmarks (``workload``), varied DDL spellings (``ddl_spelling``) and local Kafka and schema-registry
services (``local_services``)."""
