"""Fetch the Spark packages once (``make jars``), with retries, so network trouble fails early and clearly."""

from __future__ import annotations

import logging
import sys
import time

from ingest.errors import SparkSetupError
from ingest.spark import local_session

logger = logging.getLogger(__name__)
ATTEMPTS = 3


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    for attempt in range(1, ATTEMPTS + 1):
        try:
            spark = local_session(app_name="ticdc-ingest-warmup")
            spark.range(1).count()
            spark.stop()
            logger.info("Spark and Delta are ready")
            return 0
        except SparkSetupError as exc:
            logger.warning("attempt %d/%d: %s", attempt, ATTEMPTS, exc)
            time.sleep(5 * attempt)
    print("error: could not start Spark with Delta; see the messages above", file=sys.stderr)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
