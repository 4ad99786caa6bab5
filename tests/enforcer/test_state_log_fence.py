"""Telling a fence from other transaction failures (enforcer/state_log.is_fence), on
kafka-python's own transaction manager: which error a fenced commit raises depends on which
answer brought the fence, so both ways must read as a fence."""

from __future__ import annotations

from types import SimpleNamespace

from kafka.errors import KafkaError, KafkaTimeoutError, ProducerFencedError
from kafka.producer.transaction_manager import TransactionManager

from enforcer.state_log import is_fence


def producer_holding(error: BaseException | None) -> SimpleNamespace:
    """A producer as state_log sees it: only its transaction manager, kafka-python's own."""
    manager = TransactionManager(transactional_id="kvq-enforcer.test", transaction_timeout_ms=1000)
    if error is not None:
        manager.transition_to_fatal_error(error)
    return SimpleNamespace(_transaction_manager=manager)


def test_the_fence_raised_by_the_call_itself_is_a_fence():
    assert is_fence(ProducerFencedError(), producer_holding(None))


def test_a_fence_from_an_earlier_answer_is_a_fence_though_the_call_raised_a_plain_error():
    error = KafkaError("Cannot execute transactional method because we are in an error state")
    assert is_fence(error, producer_holding(ProducerFencedError()))


def test_a_timeout_with_no_fence_held_is_not_a_fence():
    assert not is_fence(KafkaTimeoutError(), producer_holding(None))
    assert not is_fence(KafkaTimeoutError(), producer_holding(KafkaTimeoutError()))
