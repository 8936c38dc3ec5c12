"""memory_engine.guards: the callable prefix boundary, the outbound address policy, the LLM
override list, and the key a moved BASE_URL receives (the attacks themselves:
tests/hardening/test_guards_attacks.py, tests/admin/test_trust.py)."""

from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from memory_engine.exceptions import NotAllowed
from memory_engine.guards import (
    OutboundPolicy,
    allowed_addresses,
    callable_allowed,
    check_callable_allowed,
    check_llm_overrides,
    check_outbound_url,
)
from memory_engine.providers.llm import get_llm_provider


def engine(settings: Any, **values: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, **values}


@pytest.mark.parametrize("path, allowed", [
    ("app.conv", True),
    ("app.conv.x", True),
    ("app.conv.x.y", True),
    ("app.conv_evil", False),
    ("app.convx.y", False),
    ("app", False),
    ("other.app.conv", False),
])
@pytest.mark.parametrize("prefix", ["app.conv", "app.conv."])
def test_callable_prefixes_end_on_a_dot(prefix: str, path: str, allowed: bool) -> None:
    assert callable_allowed(path, [prefix]) is allowed


def test_empty_prefixes_allow_nothing_and_superusers_everything(settings: Any) -> None:
    assert not callable_allowed("os.system", ["", "."])
    engine(settings, CONVERTER_CALLABLE_PREFIXES=[])
    with pytest.raises(NotAllowed) as info:
        check_callable_allowed("os.system", setting="CONVERTER_CALLABLE_PREFIXES")
    assert info.value.code == "CONVERTER_NOT_ALLOWED" and info.value.status_code == 400
    check_callable_allowed("os.system", setting="CONVERTER_CALLABLE_PREFIXES", trusted=True)


def policy(settings: Any, *entries: str) -> OutboundPolicy:
    engine(settings, OUTBOUND_ALLOW=list(entries))
    return OutboundPolicy.from_settings()


@pytest.mark.parametrize("address, allowed", [
    ("93.184.216.34", True),
    ("2606:2800:220:1:248:1893:25c8:1946", True),
    ("127.0.0.1", False),
    ("10.0.0.1", False),
    ("172.16.5.4", False),
    ("192.168.1.1", False),
    ("100.64.0.1", False),  # carrier-grade NAT
    ("0.0.0.0", False),
    ("169.254.169.254", False),
    ("224.0.0.1", False),
    ("::1", False),
    ("fe80::1", False),
    ("fd00:ec2::254", False),
    ("::ffff:127.0.0.1", False),
    ("::ffff:169.254.169.254", False),
    ("64:ff9b::a9fe:a9fe", False),  # NAT64 of 169.254.169.254
    ("2002:7f00:1::", False),  # 6to4 of 127.0.0.1
    # every IPv4-in-IPv6 form is judged by the IPv4 address a connection reaches
    ("64:ff9b::808:808", True),  # NAT64 (well-known prefix) of 8.8.8.8
    ("64:ff9b::a00:1", False),  # NAT64 of 10.0.0.1
    ("64:ff9b:1::a9fe:a9fe", False),  # NAT64 local-use prefix (RFC 8215): never global
    ("64:ff9b:1::808:808", False),
    ("::ffff:0:a9fe:a9fe", False),  # SIIT, IPv4-translated 169.254.169.254
    ("::ffff:0:7f00:1", False),  # SIIT of 127.0.0.1
    ("::ffff:0:808:808", True),  # SIIT of 8.8.8.8
    ("::7f00:1", False),  # IPv4-compatible 127.0.0.1
    ("::a9fe:a9fe", False),  # IPv4-compatible 169.254.169.254
    ("::808:808", True),  # IPv4-compatible 8.8.8.8
    ("::ffff:10.1.2.3", False),  # IPv4-mapped private
    ("::ffff:8.8.8.8", True),  # IPv4-mapped public
    ("2002:a9fe:a9fe::1", False),  # 6to4 of 169.254.169.254
    ("2002:c0a8:101::1", False),  # 6to4 of 192.168.1.1
    ("2002:808:808::1", True),  # 6to4 of 8.8.8.8
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", False),  # Teredo, client 192.0.2.45 (documentation)
    ("2001:0:808:808:8000:63bf:f5ff:fffe", False),  # Teredo, client 10.0.0.1 (obfuscated)
    ("2001:0:808:808:8000:63bf:5601:5601", False),  # Teredo, client 169.254.169.254 (obfuscated)
    ("2001:0:808:808:8000:63bf:f7f7:f7f7", True),  # Teredo, server and client 8.8.8.8
    # IPv6 space that is not globally routable
    ("fec0::1", False),  # site-local (deprecated)
    ("fc00::1", False),  # unique local
    ("ff02::1", False),  # multicast
    ("::", False),  # unspecified
    ("100::1", False),  # discard-only
    ("2001:db8::1", False),  # documentation
    ("3fff::1", False),  # documentation (RFC 9637)
    ("2001:2::1", False),  # benchmarking
    ("2001:10::1", False),  # ORCHID
    ("5f00::1", False),  # SRv6 SIDs, outside global unicast
    ("fe80::a9fe:a9fe", False),  # link-local
    # IPv4 special-purpose space
    ("192.0.0.8", False),  # IETF protocol assignments
    ("192.0.2.1", False),  # documentation
    ("198.18.0.1", False),  # benchmarking
    ("240.0.0.1", False),  # reserved
    ("255.255.255.255", False),  # broadcast
    ("1.1.1.1", True),
])
def test_only_public_addresses_without_an_allow_list(settings: Any, address: str, allowed: bool) -> None:
    assert policy(settings).address_allowed("host.example", ipaddress.ip_address(address)) is allowed


def test_allow_list_entries(settings: Any) -> None:
    rules = policy(settings, "10.0.0.0/8", "Converter.Internal.", "::1", "[fd00::/8]")
    ip = ipaddress.ip_address
    assert rules.address_allowed("x", ip("10.2.3.4")) and not rules.address_allowed("x", ip("192.168.1.1"))
    assert rules.address_allowed("converter.internal", ip("192.168.1.1"))  # a listed name: any address it has
    assert rules.address_allowed("x", ip("::1")) and rules.address_allowed("x", ip("fd00::5"))
    # Link-local: neither a listed name nor a wider network opens it.
    assert not rules.address_allowed("converter.internal", ip("169.254.169.254"))
    everything = policy(settings, "0.0.0.0/0", "::/0")
    assert everything.address_allowed("x", ip("127.0.0.1"))
    assert not everything.address_allowed("x", ip("169.254.169.254"))
    assert not everything.address_allowed("x", ip("fe80::1"))
    metadata = policy(settings, "169.254.169.254/32")
    assert metadata.address_allowed("x", ip("169.254.169.254"))
    assert not metadata.address_allowed("x", ip("169.254.0.1"))


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://example.com/", "ftp://example.com/x", "http://",
                                 "//example.com/x", "http://[::1", "javascript:alert(1)"])
def test_only_http_urls_with_a_host(settings: Any, url: str) -> None:
    with pytest.raises(NotAllowed) as info:
        check_outbound_url(url)
    assert info.value.code == "URL_NOT_ALLOWED"


def test_names_are_resolved_before_connecting(settings: Any) -> None:
    engine(settings, OUTBOUND_ALLOW=[])
    check_outbound_url("https://unresolvable.invalid/x")  # checked again on every connection
    with pytest.raises(NotAllowed):
        check_outbound_url("http://localhost:8000/x")
    with pytest.raises(NotAllowed):
        allowed_addresses("localhost", 80)
    with pytest.raises(OSError):
        allowed_addresses("unresolvable.invalid", 80)
    engine(settings, OUTBOUND_ALLOW=["localhost"])
    assert "127.0.0.1" in allowed_addresses("localhost", 80)


def test_llm_overrides_default_to_prompt_and_max_tokens(settings: Any) -> None:
    check_llm_overrides({"prompt": "Only names.", "max_tokens": 100, "model": "", "provider": {"TIMEOUT": None}})
    for config, refused in [({"model": "m"}, ["MODEL"]), ({"provider": {"base_url": "http://x"}}, ["BASE_URL"]),
                            ({"provider": {"API_KEY": "k", "RETRIES": 3}}, ["API_KEY", "RETRIES"])]:
        with pytest.raises(NotAllowed) as info:
            check_llm_overrides(config)
        assert info.value.code == "LLM_OVERRIDE_NOT_ALLOWED" and info.value.details["refused"] == refused
    engine(settings, LLM_OVERRIDABLE=["model", "BASE_URL"])
    check_llm_overrides({"model": "m", "provider": {"BASE_URL": "http://x"}})


def test_a_moved_base_url_never_carries_the_deployments_key(settings: Any) -> None:
    engine(settings, LLM={"BASE_URL": "http://llm.internal/v1/", "API_KEY": "sk-operator", "MODEL": "m"})
    same = get_llm_provider({"MODEL": "other"})
    assert (same.api_key, same.guarded) == ("sk-operator", False)
    assert get_llm_provider({"BASE_URL": "http://llm.internal/v1"}).api_key == "sk-operator"  # same endpoint
    moved = get_llm_provider({"base_url": "https://elsewhere.example/v1"})
    assert (moved.api_key, moved.guarded, moved.model) == ("", True, "m")
    own = get_llm_provider({"BASE_URL": "https://elsewhere.example/v1", "API_KEY": "sk-own"})
    assert own.api_key == "sk-own"
