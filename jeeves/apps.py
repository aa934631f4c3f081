from django.apps import AppConfig


class JeevesConfig(AppConfig):
    name = "jeeves"
    verbose_name = "Jeeves"
