"""Prices (SPEC §9): what a model's tokens cost in credits, and money itself — `Decimal`, never
float, quantised to the ledger's six places."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django.db.models import DecimalField

from credits.models import CREDIT_DIGITS, CREDIT_PLACES, ModelPrice

QUANTUM = Decimal(1).scaleb(-CREDIT_PLACES)  # 0.000001
ZERO = Decimal("0")
MAX_CREDITS = Decimal(10) ** (CREDIT_DIGITS - CREDIT_PLACES) - 1
#: The output field of every sum of credit amounts in SQL (usage totals and days, the ledger's
#: reconciliation): six places like one amount, four more digits since a sum may pass one amount's.
MONEY_SUM = DecimalField(max_digits=CREDIT_DIGITS + 4, decimal_places=CREDIT_PLACES)

#: Used when the configured system model has no row in the price table yet; the row is then
#: created with these values so that platform admins see (and can change) what is charged.
DEFAULT_SYSTEM_MODEL_PRICE = (Decimal("0.010000"), Decimal("0.030000"))


def money(value: Any) -> Decimal:
    """A credit amount from str/int/Decimal (floats are refused: they are not money)."""
    if isinstance(value, (float, bool)):
        raise ValueError("credit amounts must not be floats")
    try:
        amount = Decimal(str(value)).quantize(QUANTUM, rounding=ROUND_HALF_UP)
    except (InvalidOperation, ValueError) as exc:
        raise ValueError(f"not a credit amount: {value!r}") from exc
    if not amount.is_finite() or abs(amount) > MAX_CREDITS:
        raise ValueError("credit amount out of range")
    return amount


# --- prices --------------------------------------------------------------------------------------
def price_for(model_name: str) -> ModelPrice | None:
    return ModelPrice.objects.filter(model_name=model_name).first()


def price_json(price: ModelPrice) -> dict[str, str]:
    return {"model": price.model_name, "inputPer1k": str(price.input_per_1k), "outputPer1k": str(price.output_per_1k)}


def system_model_price(model_name: str) -> ModelPrice:
    price, _ = ModelPrice.objects.get_or_create(
        model_name=model_name,
        defaults={"input_per_1k": DEFAULT_SYSTEM_MODEL_PRICE[0], "output_per_1k": DEFAULT_SYSTEM_MODEL_PRICE[1]},
    )
    return price


def cost_of(price: ModelPrice, input_tokens: int, output_tokens: int) -> tuple[Decimal, Decimal]:
    per_thousand = Decimal(1000)
    input_cost = (Decimal(input_tokens) * price.input_per_1k / per_thousand).quantize(QUANTUM, rounding=ROUND_HALF_UP)
    output_cost = (Decimal(output_tokens) * price.output_per_1k / per_thousand).quantize(
        QUANTUM, rounding=ROUND_HALF_UP
    )
    return input_cost, output_cost
