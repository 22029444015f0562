"""A certificate's subject as Java's ``X500Principal.getName()`` prints it (RFC 2253), read from the DER bytes.

Kafka matches ``ssl.principal.mapping.rules`` against that exact text, and ACLs name the result, so it has to be
Java's to the character: RDNs from the most specific (the last in the certificate) to the least, joined by ``,``;
several values of one RDN joined by ``+`` in certificate order; the RFC 2253 keywords (CN, C, L, ST, O, OU, STREET,
DC, UID) and a dotted OID for any other type (``emailAddress`` is ``1.2.840.113549.1.9.1``); a value of a string
type with ``,=+<>#;"\\`` backslash-escaped anywhere and leading or trailing spaces escaped; any other value, or one of
an OID-named type, as ``#`` and the lower-case hex of its whole DER encoding.

Python's ``getpeercert()`` gives attribute names of its own and no string tags, hence this reader of the few DER
structures on the path to the subject.
"""

from __future__ import annotations

KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# UTF8String, PrintableString, T61String, IA5String, GeneralString, BMPString: the types Java prints as text
_STRING_TAGS = {0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E}
_ESCAPED = ',=+<>#;"\\'
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06


class CertificateFormatError(ValueError):
    """The certificate's DER could not be read as far as its subject."""


def _tlv(data: bytes, pos: int) -> tuple[int, int, int, int]:
    """The tag, content start, content end and end of the element at ``pos``."""
    if pos + 2 > len(data):
        raise CertificateFormatError("truncated DER element")
    tag = data[pos]
    length = data[pos + 1]
    start = pos + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or start + count > len(data):
            raise CertificateFormatError("unsupported DER length")
        length = int.from_bytes(data[start:start + count], "big")
        start += count
    end = start + length
    if end > len(data):
        raise CertificateFormatError("DER element runs past its container")
    return tag, start, end, end


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """Each element directly inside ``data[start:end]``: (tag, element start, content start, content end)."""
    out = []
    pos = start
    while pos < end:
        tag, cstart, cend, nxt = _tlv(data, pos)
        out.append((tag, pos, cstart, cend))
        pos = nxt
    return out


def _oid(content: bytes) -> str:
    if not content:
        raise CertificateFormatError("empty OID")
    first = content[0]
    arcs = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for byte in content[1:]:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    return ".".join(str(a) for a in arcs)


def _format_value(keyword: str, tag: int, whole: bytes, content: bytes) -> str:
    if keyword[0].isdigit() or tag not in _STRING_TAGS:
        return "#" + whole.hex()
    text = content.decode("utf-8", errors="replace")  # Java reads every string type's bytes as UTF-8 here
    escaped = "".join("\\00" if c == "\0" else ("\\" + c if c in _ESCAPED else c) for c in text)
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    body_end = len(escaped.rstrip(" \r"))
    if lead == len(escaped):
        body_end = lead
    return "".join(c if lead <= i < body_end else "\\" + c for i, c in enumerate(escaped))


def subject_rfc2253(der: bytes) -> str:
    """The subject of a DER certificate, as ``X500Principal.getName()`` gives it."""
    top = _children(der, 0, len(der))
    if not top or top[0][0] != _SEQUENCE:
        raise CertificateFormatError("not a DER certificate")
    tbs = _children(der, top[0][2], top[0][3])
    if not tbs or tbs[0][0] != _SEQUENCE:
        raise CertificateFormatError("no TBSCertificate")
    fields = _children(der, tbs[0][2], tbs[0][3])
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != _SEQUENCE:
        raise CertificateFormatError("no subject")
    rdns = []
    for tag, _pos, cstart, cend in _children(der, fields[4][2], fields[4][3]):
        if tag != _SET:
            raise CertificateFormatError("RDN is not a SET")
        avas = []
        for atag, _apos, astart, aend in _children(der, cstart, cend):
            if atag != _SEQUENCE:
                raise CertificateFormatError("attribute is not a SEQUENCE")
            parts = _children(der, astart, aend)
            if len(parts) != 2 or parts[0][0] != _OID:
                raise CertificateFormatError("attribute is not type and value")
            oid = _oid(der[parts[0][2]:parts[0][3]])
            keyword = KEYWORDS.get(oid, oid)
            vtag, vpos, vstart, vend = parts[1]
            avas.append(f"{keyword}={_format_value(keyword, vtag, der[vpos:vend], der[vstart:vend])}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))
