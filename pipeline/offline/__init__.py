"""The offline engine (model name `local`): Tier 1 and Tier 2 from heads learned on evalsets/train."""

from pipeline.offline.classify import classify, classify_many
from pipeline.offline.extract import LOOKAHEAD, extract

__all__ = ["LOOKAHEAD", "classify", "classify_many", "extract"]
