"""Signals sent by memory_engine and the one-line receivers that enqueue background work."""

from django.dispatch import Signal

#: Sent after a generation is completed (status completed or failed); ``generation_id``.
generation_completed = Signal()
