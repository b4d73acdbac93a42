"""Sizes as the runtime that reads them: Kubernetes resource quantities and Docker byte sizes.

The two grammars differ and a file is judged by the one its runtime uses. ``64g`` is 64 GiB to Docker
and not a Kubernetes quantity at all; ``400000m`` is 400 bytes to Kubernetes (``m`` is milli) and an
error to Docker. A size that its runtime would reject is reported, never turned into a number.

No maintained library is used for Kubernetes quantities: the ``kubernetes`` client's
``kubernetes.utils.quantity.parse_quantity`` would pull the whole API client (and its dependencies)
into a server that only needs one grammar. The function below follows the grammar of
k8s.io/apimachinery pkg/api/resource/quantity.go (``ParseQuantity``) and is tested against the cases
of its quantity_test.go (``TestQuantityParse``: valid, rounding, saturation and invalid tables).
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_CEILING, Decimal, localcontext

from .bounds import clip

# <quantity> ::= <signedNumber><suffix>; <number> ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
# <suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>; the exponent is an integer with its sign.
# No whitespace anywhere: ParseQuantity rejects " 1" and "1 ".
_QUANTITY = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)")
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# ParseQuantity rounds a non-zero value up to nano precision (0.5e-9 is 1n) and caps a binary one at
# 2^63-1 (9Ei parses as that; 12E, decimal, stays 12e18).
_MAX = Decimal(2**63 - 1)
_NANO = Decimal("1e-9")

QUANTITY_FORM = "a Kubernetes quantity such as 64Gi, 500M or 1e9"


def parse_quantity(text: str) -> Decimal:
    """The value of a Kubernetes quantity, exact; ValueError saying why when Kubernetes would reject it."""
    m = _QUANTITY.fullmatch(text)
    if m is None:
        raise ValueError(f"{clip(text, 40)!r} is not {QUANTITY_FORM} (binary Ki..Ei, decimal n u m k M G T P E, or eN)")
    sign, number, suffix = m.groups()
    with localcontext() as ctx:
        ctx.prec = len(text) + 40  # exact: the digits given, a 2^60 factor and nano places all fit
        ctx.Emax, ctx.Emin = MAX_EMAX, MIN_EMIN  # 1e999999999 saturates rather than overflowing
        value = Decimal(number)
        if suffix in _BINARY:
            value *= Decimal(2) ** _BINARY[suffix]
        elif len(suffix) > 1:  # an exponent; a lone E is the exa suffix
            if len(suffix) > 20:  # ParseQuantity reads the exponent as an int64
                raise ValueError(f"{clip(text, 40)!r} has an exponent beyond int64; it is not a quantity")
            value = value.scaleb(int(suffix[1:]))
        else:
            value = value.scaleb(_DECIMAL[suffix])
        if suffix in _BINARY:
            value = min(value, _MAX)
        places = value.as_tuple().exponent
        if value != 0 and isinstance(places, int) and places < -9:  # finer than nano: round up, to 1n at least
            value = max(value.quantize(_NANO, rounding=ROUND_CEILING), _NANO)
    return -value if sign == "-" else value


def quantity_bytes(text: str) -> int:
    """A memory quantity in whole bytes, rounded up as Quantity.Value() does (400000m is 400).
    ValueError for what is not a quantity and for a negative size, which the API server refuses."""
    value = parse_quantity(text)
    if value < 0:
        raise ValueError(f"{clip(text, 40)!r} is negative; a memory size is 0 or more")
    if value >= _MAX:  # Value() saturates there (9Ei is capped to it): no node has it, the size says nothing
        raise ValueError(f"{clip(text, 40)!r} is beyond 2^63-1 bytes, the most Kubernetes counts")
    return int(value.to_integral_value(rounding=ROUND_CEILING))


# Docker's sizes (docker run --memory/--shm-size, compose mem_limit/shm_size) go through
# github.com/docker/go-units RAMInBytes: a non-negative number, one optional space, then a suffix,
# case-insensitive: b, or k m g t p (powers of 1024) with an optional "b" or "ib" (64g, 64gb, 64GiB).
_DOCKER = re.compile(r"(\d+(?:\.\d*)?|\.\d+) ?(?:(b)|([kmgtp])(b|ib)?)?", re.IGNORECASE)
_DOCKER_POWER = {"k": 10, "m": 20, "g": 30, "t": 40, "p": 50}

DOCKER_FORM = "a Docker size such as 64g, 512m or 8GiB"


def docker_bytes(text: str) -> int:
    """A Docker size in bytes, truncated as go-units does; ValueError saying why when Docker rejects it."""
    m = _DOCKER.fullmatch(text)
    if m is None:
        raise ValueError(f"{clip(text, 40)!r} is not {DOCKER_FORM} (units b k m g t p, binary)")
    number, _, unit, _ = m.groups()
    factor = 2 ** _DOCKER_POWER[unit.lower()] if unit else 1
    return int(Decimal(number) * factor)
