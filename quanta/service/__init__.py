"""The scheduler service: the REST API (app), its state (store), accounting and the client."""

MAX_TAIL = 100_000      # the most log lines `quanta logs -n` / GET /v1/jobs/{id}/logs?tail= give
