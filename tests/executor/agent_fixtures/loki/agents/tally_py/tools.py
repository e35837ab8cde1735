import os
from typing import List, Literal, Optional


def count_batch(label: str, size: int, weight: Optional[float] = None,
                kind: Literal["new", "used"] = "new", notes: List[str] = None, rush: bool = False):
    """Count a batch of things.

    Args:
        label: The batch's label
        size: How many are in it
        weight: The weight of one, in grams
        kind: The condition
        notes: Remarks on the batch
        rush: Whether it is urgent
    """
    return {"label": label, "size": size, "weight": weight, "kind": kind, "notes": notes, "rush": rush}


def show_env():
    """Report what the tally's functions see of their environment."""
    names = ["LLM_AGENT_NAME", "LLM_AGENT_FUNC", "LLM_AGENT_ROOT_DIR", "LLM_AGENT_CACHE_DIR", "LLM_ROOT_DIR",
             "LLM_AGENT_RAW_JSON", "LLM_AGENT_VAR_TEAM", "LLM_AGENT_VAR_UNIT", "ROOT_ENV", "AGENT_ENV", "SHARED_ENV"]
    lines = [f"{name}={os.environ.get(name, '')}\n" for name in names]
    lines.append(f"PATH={os.environ['PATH']}\n")
    return "".join(lines)


def countBy(*keys: str, **options):
    """Count by keys."""
    return {"keys": list(keys), "options": options}


def _instructions():
    """The tally's instructions, made when the agent starts."""
    return f"You count {os.environ['LLM_AGENT_VAR_UNIT']} for team {os.environ['LLM_AGENT_VAR_TEAM']}."
