"""The base model and field types both inbound protocols (sidecar v1, Roman) validate with: what a peer may send.

Poison is refused at the edge with a 400 naming the field, never answered 503 (which a sender retries
forever): a NUL or another control character in an id or a name (PostgreSQL cannot store NUL), a
timestamp outside the accepted range (one that overflows a time zone conversion would block its
channel's extraction). A NUL inside message text is removed instead: the message is kept.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# A message's time: Wire's server clock, so never far ahead; a device offline for long delivers late.
MAX_AHEAD = timedelta(days=1)
MAX_BEHIND = timedelta(days=5 * 365)


def _printable(value: str) -> str:
    if _CONTROL.search(value):
        raise PydanticCustomError("control_character", "a NUL or control character is not allowed here")
    return value


def _sane_time(value: datetime) -> datetime:
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    now = datetime.now(UTC)
    try:
        in_range = now - MAX_BEHIND <= aware <= now + MAX_AHEAD
    except OverflowError:  # beyond what a datetime can hold once converted to UTC
        in_range = False
    if not in_range:
        raise PydanticCustomError("timestamp_out_of_range", "a time more than a day ahead or five years behind")
    return aware


def _without_nul(value: str) -> str:
    return value.replace("\x00", "")


Ident = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_printable)]
Name = Annotated[str, Field(max_length=512), AfterValidator(_printable)]
MessageTime = Annotated[datetime, AfterValidator(_sane_time)]
MessageText = Annotated[str, AfterValidator(_without_nul)]


class Schema(BaseModel):
    """A JSON object a peer sends: keys Jeeves does not know are ignored (a peer may add some), and it is frozen."""

    model_config = ConfigDict(extra="ignore", frozen=True)
