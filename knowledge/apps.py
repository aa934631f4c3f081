from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge"

    def ready(self) -> None:
        from django.core.signals import request_finished

        from knowledge import receipts

        # The webhook's admission leaves its COMMIT's answer to be read after the response (receipts.settle).
        request_finished.connect(receipts.settle, dispatch_uid="knowledge.receipts.settle")
