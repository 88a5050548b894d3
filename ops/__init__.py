"""Team tooling around the Pulumi program: shared state, pull-request previews, CI.

Modules (none imports the program, the providers or the lab):

- :mod:`ops.s3_backend` — the S3-compatible DIY backend: the exact ``pulumi login`` URL,
  lock inspection, and a plaintext-secret audit of the stored state objects
  (``python -m ops.s3_backend url|locks|audit``).
- :mod:`ops.preview_events` — typed models of the engine events that
  ``pulumi preview --json`` streams, and their parser (pure).
- :mod:`ops.preview_markdown` — the pull-request Markdown summary, a pure function of the
  parsed preview.
- :mod:`ops.preview_report` — runs ``pulumi preview`` with the policy pack and writes the
  summary (``python -m ops.preview_report``).
- :mod:`ops.estate_plan` — which stacks of a split estate a change touches, their order and the
  run's summary (pure); :mod:`ops.estate` runs them through ``pulumi.automation``
  (``python -m ops.estate preview|up|refresh|destroy``).

See ``docs/environments.md`` for how environments, backends and secrets fit together.
"""
