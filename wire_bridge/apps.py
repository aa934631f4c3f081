from django.apps import AppConfig


class WireBridgeConfig(AppConfig):
    name = "wire_bridge"

    def ready(self) -> None:
        from wire_bridge import state  # noqa: F401 - connects the flush on secure to every state change
