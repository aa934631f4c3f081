"""Fault injection for the chaos suite's processes (on their PYTHONPATH only, never Jeeves' own code).

JEEVES_CHAOS_PUBLISH_FAULT=refuse:N — every Nth publish of a classify task raises, as a broker refusing it;
JEEVES_CHAOS_PUBLISH_FAULT=die:N    — every Nth publish goes through, then the process dies at once (before
                                      the receipt is written), as a web host losing power at the worst moment.
A publish is kombu's (`Producer.publish`) or, on the webhook's path, the Redis pipeline or script that queues the
task (an LPUSH, a gated EVAL or the admission script's EVALSHA onto a classify list, wire_bridge/ingest.py).
"""

import os

_SPEC = os.environ.get("JEEVES_CHAOS_PUBLISH_FAULT", "")
if _SPEC:
    import kombu.messaging

    _mode, _, _every = _SPEC.partition(":")
    _count = {"n": 0}
    _real = kombu.messaging.Producer.publish

    def _publish(self, body, routing_key=None, *args, **kwargs):
        if routing_key == "classify":
            _count["n"] += 1
            if _count["n"] % int(_every) == 0:
                if _mode == "refuse":
                    raise ConnectionError("chaos: the broker refused the publish")
                result = _real(self, body, routing_key, *args, **kwargs)
                os._exit(1)
                return result
        return _real(self, body, routing_key, *args, **kwargs)

    kombu.messaging.Producer.publish = _publish

    import redis.client

    _real_execute = redis.client.Pipeline.execute

    def _queues_classify(pipe) -> bool:
        for args, _options in pipe.command_stack:
            if args[0] == "LPUSH" and str(args[1]).startswith("classify"):
                return True
            if args[0] == "EVAL" and any(str(k).startswith("classify") for k in args[3 : 3 + int(args[2])]):
                return True
        return False

    def _execute(self, *args, **kwargs):
        if _queues_classify(self):
            _count["n"] += 1
            if _count["n"] % int(_every) == 0:
                if _mode == "refuse":
                    raise redis.ConnectionError("chaos: the broker refused the publish")
                result = _real_execute(self, *args, **kwargs)
                os._exit(1)
                return result
        return _real_execute(self, *args, **kwargs)

    redis.client.Pipeline.execute = _execute

    import redis.commands.core

    _real_script = redis.commands.core.Script.__call__

    def _script(self, keys=(), args=(), client=None):
        # The webhook's admission script (wire_bridge/ingest.py, `_ADMIT`) queues the task with the rest.
        if any(str(k).startswith("classify") for k in keys) and (not args or args[0] != "fill"):
            _count["n"] += 1
            if _count["n"] % int(_every) == 0:
                if _mode == "refuse":
                    raise redis.ConnectionError("chaos: the broker refused the publish")
                result = _real_script(self, keys, args, client)
                os._exit(1)
                return result
        return _real_script(self, keys, args, client)

    redis.commands.core.Script.__call__ = _script

# JEEVES_CHAOS_CLOCK_SHIFT_S=S — this process's clock runs S seconds ahead of everyone else's (time-machine
# moves the C-level clock too), as a host whose NTP has drifted.
_SHIFT = os.environ.get("JEEVES_CHAOS_CLOCK_SHIFT_S", "")
if _SHIFT:
    import time

    import time_machine

    time_machine.travel(time.time() + float(_SHIFT), tick=True).start()
