"""LIQID wire facts the Director client treats as data, each with the place LIQID publishes it.

Sources (read with the repository names below):

- ``liqidinc/liqidsdk-java``: ``liqidsdk/src/com/liqid/sdk/LiqidClientBase.java`` (base client),
  ``liqidsdk/mock/com/liqid/sdk/mock/MockLiqidClient.java`` (LIQID's mock Director),
  ``liqidsdk/generated/com/liqid/sdk/PreDevice.java``;
- ``liqidinc/liqidsdk-go``: ``liqidsdk/client.go``, ``liqidsdk/types_gen.go``;
- ``liqidinc/kubint``: ``src/com/liqid/k8s/Constants.java`` (a tool written against real Directors).

Anything the Director does that LIQID's published code does not show is marked as this
project's assumption where it is used.
"""

from __future__ import annotations

import re

from .errors import DirectorConflictError, DirectorError, DirectorNotFoundError

__all__ = [
    "DEFAULT_DIGEST_LABEL",
    "HEALTHY_DEVICE_STATES",
    "JOB_FAILURE",
    "JOB_PENDING",
    "JOB_POLL_INTERVAL_SECONDS",
    "JOB_TIMEOUT_SECONDS",
    "MESSAGE_RULES",
    "NA",
    "classify_message",
]

#: The Director's placeholder for an absent value: ``PreDevice.mach_id`` of a device in a group's
#: free pool (``PreDevice.java:136-156``), its ``mname`` and ``owner_id``, and a user description
#: that is not set (``MockLiqidClient.java:265,1512``; ``IntegrationTests.java:246``).
NA = "n/a"

#: ``device_state`` values of a working device. LIQID's mock gives every device
#: ``"active | online"`` (``MockLiqidClient.java:243``); no other value is published, so this set
#: is the one to extend when a real Director shows another working state.
HEALTHY_DEVICE_STATES: frozenset[str] = frozenset({"active | online"})

#: ``command_execution_state`` of a job that still runs / that failed (``LiqidClientBase.java:30-31``).
JOB_PENDING = "Pending"
JOB_FAILURE = "FAILURE"

#: Pause between polls of a job link, seconds (``LiqidClientBase.java:194``: 1000 ms).
JOB_POLL_INTERVAL_SECONDS = 1.0

#: Longest wait for a job, seconds (``LiqidClientBuilder.java:16``:
#: ``DEFAULT_MAX_ASYNC_WAIT_TIME_IN_SECONDS = 300``).
JOB_TIMEOUT_SECONDS = 300.0

#: Fixed digest label. Like LIQID's clients (kubint ``Constants.java:87`` uses ``"KubInt"``;
#: ``client.go:259-263`` deletes the label before creating it) one label per tool, so a digest
#: left by a crashed run is replaced, not leaked. ``slurm`` is reserved (``client.go:247``).
DEFAULT_DIGEST_LABEL = "composable-gpu"

#: Error message pattern -> exception class. The texts are those of LIQID's mock
#: (``MockLiqidClient.java``); the codes the Director puts beside them are not published, so the
#: message decides where it matches, the HTTP status otherwise.
MESSAGE_RULES: tuple[tuple[re.Pattern[str], type[DirectorError], str], ...] = (
    (re.compile(r"is already being edited"), DirectorConflictError, "MockLiqidClient.java:1622,2742"),
    (re.compile(r"is not in edit mode"), DirectorConflictError, "MockLiqidClient.java:519,549"),
    (re.compile(r"is not being edited"), DirectorConflictError, "MockLiqidClient.java:1324,2697"),
    (re.compile(r"is not in the system free pool"), DirectorConflictError, "MockLiqidClient.java:847"),
    (re.compile(r"does not exist"), DirectorNotFoundError, "MockLiqidClient.java:531"),
)


def classify_message(messages: list[str]) -> type[DirectorError] | None:
    """The exception class LIQID's wording calls for, or ``None`` when no rule matches.

    Example: ``classify_message(["Machine 0x00000001 is already being edited"])`` is
    :class:`~.errors.DirectorConflictError`.
    """
    for text in messages:
        for pattern, cls, _source in MESSAGE_RULES:
            if pattern.search(text):
                return cls
    return None
