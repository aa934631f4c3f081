"""The offline engine (model name `local`): Tier 1 classify and Tier 2 extract from cue phrases and patterns."""

from pipeline.offline.classify import classify
from pipeline.offline.extract import extract

__all__ = ["classify", "extract"]
