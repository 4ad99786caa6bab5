"""SIGTERM and SIGINT stop a command even when they arrive inside a finalizer (kvq/interrupts.py):
Python drops an exception raised in a weakref callback, where py4j frees its Java objects."""

from __future__ import annotations

import subprocess
import sys
import textwrap

IN_A_CALLBACK = textwrap.dedent(
    """
    import os, signal, sys, threading, time, weakref
    from kvq import interrupts
    {patch}

    class Held:
        pass

    def freed(_):  # as py4j's _garbage_collect_object: the signal arrives while it runs
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):
            pass
        print("callback ended", flush=True)

    try:
        with interrupts.raised():
            held = Held()
            ref = weakref.ref(held, freed)
            del held
            time.sleep(30)  # the command's work: an interrupt ends it at once
            print("went on", flush=True)
    except interrupts.Interrupted as exc:
        print("interrupted", exc.name, flush=True)
        sys.exit(exc.exit_code)
    """
)


ARRIVING_IN_THE_HOOK = textwrap.dedent(
    """
    class ArrivesInTheHook(threading.Timer):
        # On a loaded machine the signal sent again arrived while the hook that sends it still
        # waited for its thread to start (1 run in 40): here the first one always does.
        sent = 0

        def start(self):
            ArrivesInTheHook.sent += 1
            if ArrivesInTheHook.sent == 1:
                self.function(*self.args)
            else:
                super().start()

    threading.Timer = ArrivesInTheHook
    """
)


def test_a_sigterm_arriving_in_a_weakref_callback_still_stops_the_command() -> None:
    assert_stopped(IN_A_CALLBACK.format(patch=""))


def test_a_sigterm_sent_again_arriving_before_the_hook_returned_still_stops_the_command() -> None:
    assert_stopped(IN_A_CALLBACK.format(patch=ARRIVING_IN_THE_HOOK))


def assert_stopped(program: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 143, (done.returncode, done.stdout, done.stderr)
    assert "interrupted SIGTERM" in done.stdout and "went on" not in done.stdout
    assert "Exception ignored" not in done.stderr


SIGNALLED_AGAIN_WHILE_CLEANING_UP = textwrap.dedent(
    """
    import os, signal, sys, time
    from kvq import interrupts

    try:
        with interrupts.raised():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(30)
            finally:  # the command's cleanup (servers stopped, tmpfs unmounted), signalled again
                os.kill(os.getpid(), signal.SIGTERM)
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.2)
                print("cleaned up", flush=True)
    except interrupts.Interrupted as exc:
        print("interrupted", exc.name, flush=True)
        sys.exit(exc.exit_code)
    """
)


def test_a_signal_during_the_cleanup_of_an_interrupted_command_does_not_cut_it_short() -> None:
    """As a `pkill` matching both a command and the `timeout` around it, or a second Ctrl-C: the
    cleanup runs to its end, and it is said once that the command is already stopping."""
    done = subprocess.run(
        [sys.executable, "-c", SIGNALLED_AGAIN_WHILE_CLEANING_UP],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 143, (done.returncode, done.stdout, done.stderr)
    assert done.stdout.splitlines() == ["cleaned up", "interrupted SIGTERM"]
    assert done.stderr.count("already stopping") == 1, done.stderr
    assert "SIGKILL" in done.stderr
