"""Kafka's controller, split by concern: events, the event manager (one queue, one event at
a time), the context (what the active controller knows) and the controller itself."""

from actors.controller.controller import KafkaController
from actors.controller.event_manager import ControllerEventManager, QueuedEvent
from actors.controller.events import ControllerEvent, ControllerState

__all__ = ["ControllerEvent", "ControllerEventManager", "ControllerState", "KafkaController", "QueuedEvent"]
