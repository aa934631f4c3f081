"""gunicorn reads this file from the working directory by default (`gunicorn jeeves.wsgi` in the repo and the
image). Command-line flags still win; this only adds what a flag cannot: a worker that exits leaves its metrics
files behind for the counters it wrote (prometheus-client multiprocess mode, ground/metrics.py)."""


def child_exit(server, worker):
    from ground import metrics

    metrics.mark_process_dead(worker.pid)
