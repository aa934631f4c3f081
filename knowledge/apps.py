from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        from django.core.signals import request_finished, request_started

        from knowledge import receipts

        # The webhook leaves its admission's COMMIT, or the receipt of a message admitted in Redis, to after the
        # response (receipts.request_finished), and the answer to the next request's start.
        request_started.connect(receipts.request_started, dispatch_uid="knowledge.receipts.request_started")
        request_finished.connect(receipts.request_finished, dispatch_uid="knowledge.receipts.settle")
