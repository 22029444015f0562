"""ssl.principal.mapping.rules: Kafka's own test vectors (SslPrincipalMapperTest), and subjects printed as Java does."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tls_certs import make_authority

from odradek.security.principal_mapping import ANONYMOUS, NoMatchingRule, PrincipalMapper
from odradek.security.x500 import CertificateFormatError, subject_rfc2253


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules: str) -> None:
    PrincipalMapper(rules)


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        PrincipalMapper(rules)


def test_mapping() -> None:
    mapper = PrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize(("expected", "rules"), [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # escape sequences
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    # rules rule
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected: str, rules: str) -> None:
    assert str(PrincipalMapper(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace() -> None:
    mapper = PrincipalMapper("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_back_references_naming_no_group_are_literal() -> None:
    # Kafka's escapeLiteralBackReferences: $4 with three groups is the text "$4"; $12 with one group is $1 then "2"
    assert PrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$4/").name("CN=a,OU=b,O=c") == "a@$4"
    assert PrincipalMapper("RULE:^CN=(.*?),.*$/$12/").name("CN=a,O=c") == "a2"
    assert PrincipalMapper("RULE:^CN=(?<who>[^,]*),.*$/${who}!/").name("CN=a,O=c") == "a!"


def test_no_rule_matches_and_anonymous() -> None:
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=eng,.*$/$1/")
    assert mapper.principal("CN=alice,OU=eng,O=acme") == "User:alice"
    assert mapper.principal(None) == ANONYMOUS
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=bob,OU=ops,O=acme"):
        mapper.principal("CN=bob,OU=ops,O=acme")
    assert PrincipalMapper(None).principal("CN=bob,OU=ops,O=acme") == "User:CN=bob,OU=ops,O=acme"


def test_a_rule_with_a_bad_regular_expression_is_refused() -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        PrincipalMapper("RULE:^CN=(.*$/$1/")


SUBJECTS = [
    ("plain", "/O=acme/OU=eng/CN=alice", False),
    ("kafka", "/C=US/ST=MD/L=Fulton/O=mycp/OU=SME/CN=Duke", False),
    ("escapes", '/O=a, b=c\\+d#e;f<g>h"i\\\\j/CN=Tkac, Adam', False),
    ("spaces", "/O= pad /CN=  two", False),
    ("oids", "/DC=com/DC=acme/UID=u1/CN=e/emailAddress=e@x.org/serialNumber=42/title=boss", False),
    ("multi", "/O=acme/CN=m+UID=m1+OU=x", True),
    ("utf8", "/O=Zoë ÅB/CN=Łukasz", False),
    ("hash", "/CN=#lead/OU=trail\\ ", False),
]


def test_subjects_print_as_java_prints_them(tmp_path: Path) -> None:
    """Our RFC 2253 text against Java's own X500Principal.getName() on the same certificates."""
    java = shutil.which("java")
    if java is None:
        pytest.skip("java is needed to compare with X500Principal.getName()")
    ca = make_authority(tmp_path)
    certs = [ca.issue(name, subject, multivalue=multi).cert for name, subject, multi in SUBJECTS]
    source = tmp_path / "Subjects.java"
    source.write_text(JAVA_SUBJECTS)
    out = subprocess.run([java, str(source), *map(str, certs)], check=True, capture_output=True, text=True,
                         encoding="utf-8", timeout=120)
    theirs = out.stdout.splitlines()
    ours = [subject_rfc2253(_der(c)) for c in certs]
    assert ours == theirs
    assert ours[0] == "CN=alice,OU=eng,O=acme"


def test_a_truncated_certificate_is_an_error(pki: object) -> None:
    from tls_certs import TestPki
    assert isinstance(pki, TestPki)
    der = _der(pki.alice.cert)
    assert subject_rfc2253(der) == "CN=alice,OU=eng,O=acme"
    with pytest.raises(CertificateFormatError):
        subject_rfc2253(der[:40])


def _der(pem: Path) -> bytes:
    import ssl
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


JAVA_SUBJECTS = """
import java.io.FileInputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;

public class Subjects {
    public static void main(String[] args) throws Exception {
        CertificateFactory factory = CertificateFactory.getInstance("X.509");
        PrintStream out = new PrintStream(System.out, true, "UTF-8");
        for (String path : args) {
            try (InputStream in = new FileInputStream(path)) {
                X509Certificate cert = (X509Certificate) factory.generateCertificate(in);
                out.println(cert.getSubjectX500Principal().getName());
            }
        }
    }
}
"""
