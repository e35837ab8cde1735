import json
import os
from typing import List, Literal, Optional


def add_entry(
    item: str,
    amount: int,
    category: Optional[Literal["food", "rent", "other"]] = None,
    tags: Optional[List[str]] = None,
    refund: Optional[bool] = None,
):
    """Add an expense to the ledger.

    The amount is in the ledger's currency.
    Args:
        item: What was bought
        amount: The price, in cents
        category: Where it goes
        tags: Labels for the entry
        refund: Whether it is money back
    """
    return {"item": item, "amount": amount, "category": category, "tags": tags, "refund": refund}


def show_env():
    """Report what the ledger's functions see of their environment."""
    names = [
        "LLM_AGENT_NAME",
        "LLM_AGENT_FUNC",
        "LLM_AGENT_ROOT_DIR",
        "LLM_AGENT_CACHE_DIR",
        "LLM_ROOT_DIR",
        "LLM_AGENT_RAW_JSON",
        "LLM_AGENT_VAR_OWNER",
        "LLM_AGENT_VAR_CURRENCY",
        "ROOT_ENV",
        "AGENT_ENV",
        "SHARED_ENV",
    ]
    found = {name: os.environ.get(name, "") for name in names}
    found["PATH"] = os.environ["PATH"]
    return "".join(f"{k}={v}\n" for k, v in found.items())


def total(since: Optional[str] = None):
    """Total of the ledger

    Args:
        since: Only entries from this day on
    """
    return _format(f"0 {os.environ['LLM_AGENT_VAR_CURRENCY']}")


def _format(text):
    return f"total: {text}\n"


def _instructions():
    return f"You keep the ledger of {os.environ['LLM_AGENT_VAR_OWNER']}."
