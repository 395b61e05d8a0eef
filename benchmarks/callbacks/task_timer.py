"""Wall time per task, summed over the play's hosts' shared run, written as JSON when the run ends.

Benchmarks enable it (ANSIBLE_CALLBACK_PLUGINS=benchmarks/callbacks, ANSIBLE_CALLBACKS_ENABLED=task_timer,
TASK_TIMER_JSON=out.json) to see which tasks a stage's time goes to; ansible-core ships no such callback.
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: task_timer
type: aggregate
short_description: wall time per task, as JSON
description:
  - Records when each task starts; a task's time runs until the next task (or the play's end) starts.
  - Writes [{task, role, seconds}] sorted by time to the file named by TASK_TIMER_JSON.
requirements:
  - enabled in the callbacks_enabled setting
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_timer"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._current = None
        self._started = None
        self._times = []

    def _close(self):
        if self._current is not None:
            self._times.append({**self._current, "seconds": round(time.monotonic() - self._started, 3)})
            self._current = None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def _start(self, task):
        self._close()
        role = task._role.get_name() if task._role else ""  # pylint: disable=protected-access
        self._current = {"task": task.get_name(), "role": role}
        self._started = time.monotonic()

    def v2_playbook_on_play_start(self, play):
        self._close()

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("TASK_TIMER_JSON")
        if path:
            with open(path, "w", encoding="utf-8") as handle:
                json.dump(sorted(self._times, key=lambda t: -t["seconds"]), handle, indent=1)
