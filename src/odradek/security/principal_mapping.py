"""Kafka's ``ssl.principal.mapping.rules``: from a client certificate's subject to a principal name.

Operators copy these rules from their Kafka brokers, so the rule syntax, the splitting of the list, the regular
expression semantics of the replacement (Java's ``String.replaceAll``, with ``$n`` group references) and the subject
text the rules match (``X500Principal.getName()``, RFC 2253 as Java prints it: most specific RDN first, no spaces,
``,=+<>#;"\\`` escaped) must all be Kafka's, or a rule that worked there silently yields another principal here.

The list is ``RULE:pattern/replacement/[L|U]`` or ``DEFAULT`` entries separated by commas; the first rule whose
pattern matches the whole subject names the principal (``DEFAULT`` takes the subject as it is); no match is an
error, as in Kafka (the connection fails to authenticate). The subject comes from the certificate's DER bytes, read by
the small parser below, so that attribute types and string tags are known exactly, as Java knows them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

ANONYMOUS = "User:ANONYMOUS"

# One rule, as Kafka's SslPrincipalMapper reads it: group 1 DEFAULT; groups 2/4 pattern and replacement, in which a
# backslash escapes any character (so ``\/`` is a slash); group 6 the case flag; anything else is an empty rule.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")
_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<([A-Za-z][A-Za-z0-9]*)>")


class NoMatchingRule(ValueError):
    """No rule maps this subject: Kafka fails the authentication."""


@dataclass(frozen=True)
class Rule:
    default: bool
    pattern: str = ""
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def __str__(self) -> str:
        """Kafka's Rule.toString, which its tests use to show how a rule list was split."""
        if self.default:
            return "DEFAULT"
        text = f"RULE:{self.pattern}/{self.replacement}"
        if self.lower:
            text += "/L"
        elif self.upper:
            text += "/U"
        return text

    def apply(self, subject: str) -> str | None:
        if self.default:
            return subject
        regex = _compile(self.pattern)
        if regex.fullmatch(subject) is None:
            return None
        replacement = _escape_literal_back_references(self.replacement, regex.groups)
        result = regex.sub(_java_replacement(replacement, regex.groups), subject)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def split_rules(text: str | None) -> list[str]:
    """The rule strings of a ``ssl.principal.mapping.rules`` value, empty ones included (Kafka's splitRules)."""
    source = "DEFAULT" if text is None else text.strip()
    return [m.group(1) for m in _find_all(_SPLITTER, source)]


def parse_rules(text: str | None) -> list[Rule]:
    """Parse a rule list; ValueError names the first invalid rule, as Kafka's ConfigException does."""
    rules: list[Rule] = []
    for raw in split_rules(text):
        m = _PARSER.match(raw)
        if m is None:
            raise ValueError(f"Invalid rule: {raw}")
        if m.end() != len(raw):
            raise ValueError(f"Invalid rule: `{raw}`, unmatched substring: `{raw[m.end():]}`")
        if m.group(1) is not None:
            rules.append(Rule(default=True))
        elif m.group(2) is not None:
            rules.append(Rule(False, m.group(2), m.group(4), m.group(6) == "L", m.group(6) == "U"))
    for rule in rules:
        if not rule.default:
            try:
                _compile(rule.pattern)
            except re.error as exc:
                raise ValueError(f"Invalid rule: `{rule}`: {exc}") from None
    return rules


class PrincipalMapper:
    """A parsed rule list; ``name`` maps a subject in RFC 2253 form to the principal's name."""

    def __init__(self, rules: str | None) -> None:
        self.rules = parse_rules(rules)

    def __str__(self) -> str:
        return "SslPrincipalMapper(rules = [" + ", ".join(str(r) for r in self.rules) + "])"

    def name(self, subject: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(subject)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {subject}, rules [{', '.join(str(r) for r in self.rules)}]")

    def principal(self, subject: str | None) -> str:
        """``User:<mapped>`` for a client certificate's subject; ``User:ANONYMOUS`` when the client sent none."""
        if subject is None:
            return ANONYMOUS
        return "User:" + self.name(subject)


def _find_all(pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """Java's ``Matcher.find`` loop: each search starts where the last match ended, one further after an empty one.

    Python's finditer differs after an empty match (it may report a non-empty match starting at the same place);
    Java's loop is spelled out so the splitting of odd lists (``",,RULE://,,"``) is Kafka's.
    """
    found = []
    pos = 0
    while pos <= len(text):
        m = pattern.search(text, pos)
        if m is None:
            break
        found.append(m)
        pos = m.end() if m.end() > m.start() else m.end() + 1
    return found


def _compile(pattern: str) -> re.Pattern[str]:
    """A Java regular expression as Python's ``re`` reads it; Java's named groups ``(?<name>`` become ``(?P<name>``."""
    return re.compile(_JAVA_NAMED_GROUP.sub(r"(?P<\1>", pattern))


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's escapeLiteralBackReferences: a ``$n`` naming no group is taken literally.

    ``$123`` with fewer groups is read as ``$12`` then ``$1`` (Java does the same when replacing); what still names
    no group gets a backslash before its ``$``. Kafka inserts these at the offsets of the original text, so a second
    literal reference lands one character early: kept as Kafka does it.
    """
    if groups == 0:
        return replacement
    value = replacement
    for m in _BACK_REFERENCE.finditer(replacement):
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            at = m.start(1) - 1
            value = value[:at] + "\\" + value[at:]
    return value


def _java_replacement(replacement: str, groups: int) -> Callable[[re.Match[str]], str]:
    """Java's Matcher.appendReplacement: ``\\x`` is x, ``$n`` the longest group number that exists, ``${name}``."""
    parts: list[tuple[bool, str | int]] = []  # (is a group reference, literal text or group number/name)
    i = 0
    n = len(replacement)
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i == n:
                raise ValueError("character to be escaped is missing")
            parts.append((False, replacement[i]))
            i += 1
        elif c == "$":
            i += 1
            if i == n:
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                parts.append((True, replacement[i + 1:end]))
                i = end + 1
                continue
            if not replacement[i].isdigit():
                raise ValueError("Illegal group reference")
            ref = int(replacement[i])
            i += 1
            while i < n and replacement[i].isdigit() and ref * 10 + int(replacement[i]) <= groups:
                ref = ref * 10 + int(replacement[i])
                i += 1
            if ref > groups:
                raise ValueError(f"No group {ref}")
            parts.append((True, ref))
        else:
            parts.append((False, c))
            i += 1

    def expand(m: re.Match[str]) -> str:
        return "".join((m.group(p) or "") if is_group else str(p) for is_group, p in parts)

    return expand
