"""schema_gen.py -- random JSON Schemas for the structured-output tests.

`schemas(seed, n)` draws n schemas from a varied space: nested objects
(additionalProperties false, a random subset required), arrays with
minItems / maxItems, string and integer enums, const, anyOf of several
shapes, strings with anchored patterns, formats (date, date-time, email,
ipv4, uuid) and length bounds, integers and numbers with inclusive and
exclusive bounds, booleans and nulls.  Every seed gives other schemas, so
a run with a new seed meets schemas no test was written against.

`validator(schema)` is a jsonschema validator that also checks the formats
(date-time with a checker of its own: jsonschema ships none without extra
packages).
"""
import datetime
import random

import jsonschema

WORDS = ["name", "title", "city", "color", "age", "score", "tags", "items", "owner", "id",
         "email", "start", "kind", "count", "price", "active", "notes", "level", "steps", "code"]
PATTERNS = [r"^[A-Z]{2}-[0-9]{3}$", r"^[a-z]{3,8}$", r"^(red|green|blue)$", r"^[0-9]{4}$",
            r"^v[0-9]\.[0-9]$", r"^[A-Z][a-z]+ [A-Z][a-z]+$"]
FORMATS = ["date", "date-time", "email", "ipv4", "uuid"]


def _string(rng):
    r = rng.random()
    if r < 0.25:
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    if r < 0.45:
        return {"type": "string", "format": rng.choice(FORMATS)}
    if r < 0.65:
        lo = rng.randint(1, 5)
        return {"type": "string", "minLength": lo, "maxLength": lo + rng.randint(0, 20)}
    if r < 0.8:
        return {"type": "string", "enum": rng.sample(["alpha", "beta", "gamma", "delta", "x y",
                                                      "Ünïcödé", "42"], rng.randint(2, 5))}
    return {"type": "string", "maxLength": 40}


def _number(rng):
    if rng.random() < 0.6:
        lo = rng.randint(-100, 100)
        s = {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 1000)}
        if rng.random() < 0.3:
            s = {"type": "integer", "enum": rng.sample(range(-5, 50), rng.randint(2, 4))}
        return s
    lo = round(rng.uniform(-50, 50), 2)
    s = {"type": "number", "minimum": lo, "maximum": lo + rng.randint(1, 500)}
    if rng.random() < 0.3:
        s = {"type": "number", "exclusiveMinimum": lo, "exclusiveMaximum": lo + 10}
    return s


def _leaf(rng):
    r = rng.random()
    if r < 0.45:
        return _string(rng)
    if r < 0.8:
        return _number(rng)
    if r < 0.9:
        return {"type": "boolean"}
    if r < 0.95:
        return {"const": rng.choice(["fixed", 7, True])}
    return {"type": "null"}


def _node(rng, depth):
    r = rng.random()
    if depth >= 3 or r < 0.45:
        return _leaf(rng)
    if r < 0.65:
        return _object(rng, depth + 1)
    if r < 0.85:
        lo = rng.randint(0, 2)
        return {"type": "array", "items": _node(rng, depth + 1), "minItems": lo,
                "maxItems": lo + rng.randint(1, 4)}
    return {"anyOf": [_node(rng, depth + 1) for _ in range(rng.randint(2, 3))]}


def _object(rng, depth=0):
    keys = rng.sample(WORDS, rng.randint(1, 5))
    props = {k: _node(rng, depth) for k in keys}
    req = [k for k in keys if rng.random() < 0.7] or keys[:1]
    return {"type": "object", "properties": props, "required": req,
            "additionalProperties": False}


def schemas(seed, n):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = _object(rng)
        if rng.random() < 0.1:  # a top-level anyOf of two objects
            s = {"anyOf": [s, _object(rng)]}
        out.append(s)
    return out


_formats = jsonschema.FormatChecker(["date", "email", "ipv4", "ipv6", "uuid"])


@_formats.checks("date-time", raises=ValueError)
def _date_time(v):
    if not isinstance(v, str):
        return True
    if "T" not in v and "t" not in v:
        raise ValueError("no T")
    datetime.datetime.fromisoformat(v.replace("Z", "+00:00").replace("z", "+00:00"))
    return True


def validator(schema):
    return jsonschema.Draft202012Validator(schema, format_checker=_formats)
