"""Kafka's inline JAAS configuration (``sasl.jaas.config``), parsed as Kafka's JaasConfig parses it.

The grammar is ``LoginModuleClass Flag (key=value)* ;`` repeated, where the flag is ``required``, ``requisite``,
``sufficient`` or ``optional`` (any case), a value is a double-quoted string or a bare word, and ``//`` and
``/* */`` comments are skipped (Java's StreamTokenizer with both comment styles on). A broker's listener-prefixed
setting must hold exactly one login module, as Kafka requires. PLAIN reads its users from the ``user_<name>``
options; every mechanism's client side (inter-broker) reads ``username`` and ``password``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PLAIN's ``user_<name>="<password>"`` options."""
        return {k[len("user_"):]: v for k, v in self.options.items() if k.startswith("user_")}


class JaasError(ValueError):
    pass


def _word_char(c: str) -> bool:
    return c.isalnum() or c in "._$-" or ord(c) > 127


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, text) with kind ``word``, ``string`` or the punctuation character itself."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise JaasError("Invalid JAAS config: unterminated comment")
            i = end + 2
        elif c in "\"'":
            quote, i = c, i + 1
            chars: list[str] = []
            while True:
                if i >= n:
                    raise JaasError("Invalid JAAS config: unterminated quoted string")
                ch = text[i]
                if ch == quote:
                    i += 1
                    break
                if ch == "\\" and i + 1 < n:
                    esc = text[i + 1]
                    chars.append({"n": "\n", "t": "\t", "r": "\r"}.get(esc, esc))
                    i += 2
                    continue
                chars.append(ch)
                i += 1
            out.append(("string", "".join(chars)))
        elif _word_char(c):
            start = i
            while i < n and _word_char(text[i]):
                i += 1
            out.append(("word", text[start:i]))
        else:
            out.append((c, c))
            i += 1
    return out


def parse_jaas(text: str) -> list[LoginModule]:
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0

    def take(*kinds: str, what: str) -> str:
        nonlocal i
        if i >= len(tokens) or tokens[i][0] not in kinds:
            got = tokens[i][1] if i < len(tokens) else "end of input"
            raise JaasError(f"Invalid JAAS config: expected {what}, got {got!r}")
        i += 1
        return tokens[i - 1][1]

    while i < len(tokens):
        name = take("word", what="a login module class name")
        flag = take("word", what="a login module control flag").lower()
        if flag not in FLAGS:
            raise JaasError(f"Invalid JAAS config: invalid control flag {flag!r} of login module {name}")
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i][0] != ";":
            key = take("word", what="an option name")
            take("=", what=f"'=' after option {key}")
            options[key] = take("word", "string", what=f"the value of option {key}")
        take(";", what="';' at the end of the login module")
        modules.append(LoginModule(name, flag, options))
    if not modules:
        raise JaasError("Invalid JAAS config: no login module")
    return modules


def parse_one_module(text: str, setting: str) -> LoginModule:
    """A listener's ``sasl.jaas.config``: exactly one login module (Kafka's rule for the broker side)."""
    try:
        modules = parse_jaas(text)
    except JaasError as exc:
        raise ValueError(f"{setting}: {exc}") from None
    if len(modules) != 1:
        raise ValueError(f"{setting}: JAAS config property contains {len(modules)} login modules, should be 1 module")
    return modules[0]
