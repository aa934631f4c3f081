from django.apps import AppConfig
from django.core import checks


class RetrievalConfig(AppConfig):
    name = "retrieval"

    def ready(self) -> None:
        checks.register(relevance_model_check)


def relevance_model_check(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """`manage.py check` (and every management command) names a missing or stale relevance model."""
    from retrieval import relevance

    try:
        relevance.load()
    except relevance.StaleScorer as exc:
        return [
            checks.Error(
                str(exc), hint="python bench/retrieval_qa.py --offline evalsets/train --fit", id="retrieval.E001"
            )
        ]
    return []
