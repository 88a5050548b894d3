"""LazyPool: no thread before the first submit, close waits for what was submitted, a later submit
starts a fresh pool."""

import threading
import time

from composer.shell.lazy_pool import LazyPool


def _threads(prefix: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(prefix)]


def test_no_thread_starts_before_the_first_submit() -> None:
    pool = LazyPool(2, "lazy-test-idle")
    assert _threads("lazy-test-idle") == []
    assert pool.submit(lambda: 7).result(timeout=5) == 7
    assert _threads("lazy-test-idle") != []
    pool.close()
    assert _threads("lazy-test-idle") == []


def test_close_waits_for_every_submitted_call_and_a_later_submit_starts_again() -> None:
    pool = LazyPool(1, "lazy-test-close")
    done: list[int] = []

    def slow(i: int) -> None:
        time.sleep(0.05)
        done.append(i)

    for i in range(3):
        pool.submit(slow, i)
    pool.close()
    assert done == [0, 1, 2]  # one worker keeps their order; close returned after all three
    assert pool.submit(lambda: "again").result(timeout=5) == "again"
    pool.close()


def test_an_exception_is_raised_by_the_future() -> None:
    pool = LazyPool(1, "lazy-test-error")

    def fail() -> None:
        raise RuntimeError("boom")

    future = pool.submit(fail)
    pool.close()
    assert isinstance(future.exception(), RuntimeError)
