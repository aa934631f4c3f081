from django.apps import AppConfig


class WireBridgeConfig(AppConfig):
    name = "wire_bridge"
