"""Message history: the thread's last messages in the conversation (spec §2.5), and the thread itself in
every lifecycle event (it owns threads and messages in the store)."""

from memstack.history.layer import MessageHistoryLayer

__all__ = ["MessageHistoryLayer"]
