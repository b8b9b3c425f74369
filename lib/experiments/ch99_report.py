"""The verdict: the reproduction report gathers every chapter's claims; it trains nothing."""

from __future__ import annotations

from dataclasses import dataclass

from . import ChapterConfig

CHAPTER = "99_report"


@dataclass(frozen=True)
class Config(ChapterConfig):
    """The report has no experiment constants; it reads the claims the chapters saved."""


OVERRIDES: dict = {}
