from django.apps import AppConfig
from django.core import checks


class PipelineConfig(AppConfig):
    name = "pipeline"

    def ready(self) -> None:
        checks.register(offline_engine_check)


def offline_engine_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`manage.py check` (and every management command) names a missing or stale learned artefact."""
    from pipeline.offline import artefacts, contradiction, model

    errors = []
    for load in (model.load, contradiction.model):
        try:
            load()
        except artefacts.ArtefactError as exc:
            errors.append(checks.Error(str(exc), hint="python manage.py jeeves train", id="pipeline.E001"))
    return errors
