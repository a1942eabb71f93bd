"""Running one request, inline in the web process or in a Celery worker: the request's stream of
messages, background jobs (submit, watch, cancel) and the worker's task. Knows no HTTP shell."""
