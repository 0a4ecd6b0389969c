"""Choices whose labels are what people read (translated where a page shows them)."""

from __future__ import annotations

from django.db import models


class LabelledChoices(models.TextChoices):
    @classmethod
    def label_of(cls, value: str) -> str:
        """The label of a stored value (in the active language), or the value itself for one
        this code no longer knows."""
        return str(cls(value).label) if value in cls.values else value
