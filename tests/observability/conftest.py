"""The lab fixtures of the composer's end-to-end tests (``tests/composer/conftest.py``), for the
lab tests here: ``make_deployed`` is the chart's Deployment on the real node serving a fresh
scenario (its own Director simulator, kwok Nodes and namespace)."""

from __future__ import annotations

from tests.composer.conftest import (  # noqa: F401  (fixtures, found by name)
    composer_image,
    composer_lab,
    lab_api,
    make_deployed,
    real_node,
)
