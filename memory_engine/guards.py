"""Guards on what rule and converter configuration can make the server do.

API keys (tenants) and staff configure memory rules and ingestion rules; three things in
that configuration could otherwise be turned against the deployment (docs/security.md):

* **code** — :func:`check_callable_allowed`: a callable named by import path must lie under
  one of the operator's prefixes (``RULE_CALLABLE_PREFIXES``, ``CONVERTER_CALLABLE_PREFIXES``)
  on a dot boundary. Only superusers (``trusted``) may name any other. Checked when the
  configuration is saved, before anything is imported.
* **the operator's LLM account** — :func:`check_llm_overrides`: a builtin memory rule may
  set only the LLM settings listed in ``LLM_OVERRIDABLE``; checked on save and again on each
  call. (A rule that moves ``BASE_URL`` never receives the deployment's key: see
  :func:`memory_engine.providers.llm.get_llm_provider`.)
* **outbound addresses** — :func:`check_outbound_url` on save, :func:`allowed_addresses` when
  connecting (``memory_engine.providers.http``): http(s) only, and public addresses only
  unless ``OUTBOUND_ALLOW`` lists the host or a network holding the address; link-local
  addresses (169.254.0.0/16, where cloud metadata services live, and fe80::/10) only when an
  entry inside that range is listed.

The deployment's own settings (the LLM and embedder endpoints) are trusted and not guarded.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from memory_engine.conf import engine_settings
from memory_engine.exceptions import (
    CallableNotAllowed,
    ConverterNotAllowed,
    LLMOverrideNotAllowed,
    NotAllowed,
    URLNotAllowed,
)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# --- code ------------------------------------------------------------------------------------

#: The prefix setting of each kind of callable, and its refusal.
CALLABLE_SETTINGS: dict[str, type[NotAllowed]] = {
    "RULE_CALLABLE_PREFIXES": CallableNotAllowed,
    "CONVERTER_CALLABLE_PREFIXES": ConverterNotAllowed,
}


def callable_allowed(path: str, prefixes: Iterable[str]) -> bool:
    """Whether ``path`` is a prefix itself or lies below one on a dot boundary: ``app.conv``
    admits ``app.conv`` and ``app.conv.x``, never ``app.conv_evil``."""
    for prefix in prefixes:
        base = str(prefix).rstrip(".")
        if base and (path == base or path.startswith(base + ".")):
            return True
    return False


def check_callable_allowed(path: str, *, setting: str, trusted: bool = False) -> None:
    """Raise NotAllowed unless ``trusted`` (a superuser) or ``path`` lies under the prefixes
    of ``setting`` (a key of :data:`CALLABLE_SETTINGS`)."""
    prefixes = getattr(engine_settings, setting)
    if trusted or callable_allowed(path, prefixes):
        return
    raise CALLABLE_SETTINGS[setting](
        f"{path!r} is not under MEMORY_ENGINE[{setting!r}]; ask an operator to allow it, or a superuser "
        "to configure it in the admin.",
        details={"path": path, "allowed_prefixes": prefixes},
    )


# --- the operator's LLM account -----------------------------------------------------------------

#: Keys of a builtin handler's configuration and the LLM setting each one changes
#: (the keys of its ``provider`` object are the settings themselves).
LLM_HANDLER_KEYS = {"prompt": "PROMPT", "model": "MODEL", "max_tokens": "MAX_TOKENS"}


def llm_overrides(config: dict[str, Any]) -> set[str]:
    """The LLM settings a builtin handler's configuration changes (unset or empty values change nothing)."""
    changed = {name for key, name in LLM_HANDLER_KEYS.items() if config.get(key) not in (None, "")}
    provider = config.get("provider")
    if isinstance(provider, dict):
        changed |= {str(key).upper() for key, value in provider.items() if value not in (None, "")}
    return changed


def check_llm_overrides(config: dict[str, Any]) -> None:
    """Raise LLMOverrideNotAllowed when the handler changes an LLM setting the
    operator did not list in ``LLM_OVERRIDABLE``."""
    allowed = sorted(set(engine_settings.LLM_OVERRIDABLE))
    refused = sorted(llm_overrides(config) - set(allowed))
    if refused:
        raise LLMOverrideNotAllowed(
            f"Memory rules and distillers on this deployment may not set {', '.join(refused)} of its language model "
            f"(MEMORY_ENGINE['LLM_OVERRIDABLE'] allows {', '.join(allowed) or 'nothing'}); ask an operator.",
            details={"refused": refused, "allowed": allowed},
        )


# --- outbound addresses ---------------------------------------------------------------------------

LINK_LOCAL: tuple[IPNetwork, ...] = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"))
#: IPv6 forms that carry an IPv4 address in their last 32 bits: a connection reaches that address.
SIIT = ipaddress.ip_network("::ffff:0:0:0/96")  # IPv4-translated (RFC 6145)
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # NAT64, well-known prefix (RFC 6052)
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible (RFC 4291)
#: Global unicast space (RFC 4291) and the special-purpose blocks inside it that are not
#: globally routable: IETF protocol assignments (Teredo, 2001::/32, is unwrapped first), the
#: documentation prefixes; 6to4 (2002::/16) is unwrapped first.
GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")
NOT_GLOBAL_V6: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(n) for n in (
    "2001::/23", "2001:db8::/32", "3fff::/20"))
#: IPv4 special-purpose blocks Python's ``is_global`` lets through: IETF protocol assignments
#: (192.0.0.0/24 whole, its two anycast services included) and the deprecated 6to4 relay anycast.
NOT_GLOBAL_V4: tuple[IPNetwork, ...] = tuple(ipaddress.ip_network(n) for n in ("192.0.0.0/24", "192.88.99.0/24"))


def embedded_ipv4(address: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 address(es) an IPv6 address carries, unwrapped from every form a connection
    would reach them through: IPv4-mapped, IPv4-translated (SIIT), IPv4-compatible, NAT64's
    well-known prefix, 6to4 and Teredo (server and client); empty for any other address."""
    if not isinstance(address, ipaddress.IPv6Address):
        return []
    last32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    if address in SIIT or address in NAT64:
        return [last32]
    if address in IPV4_COMPATIBLE and int(address) > 1:  # :: and ::1 are themselves
        return [last32]
    if address.sixtofour is not None:
        return [address.sixtofour]
    if address.teredo is not None:
        return list(address.teredo)
    return []


def globally_routable(address: IPAddress) -> bool:
    """Whether ``address`` itself is a public unicast address (an IPv6 form that carries an IPv4
    address is judged by that address: :func:`judged_addresses`)."""
    if isinstance(address, ipaddress.IPv4Address):
        return (address.is_global and not address.is_multicast
                and not any(address in network for network in NOT_GLOBAL_V4))
    return address in GLOBAL_UNICAST_V6 and not any(address in network for network in NOT_GLOBAL_V6)


def judged_addresses(address: IPAddress) -> list[IPAddress]:
    """What a connection to ``address`` reaches: the IPv4 address(es) it carries, else itself."""
    return list(embedded_ipv4(address)) or [address]


@dataclass(frozen=True)
class OutboundPolicy:
    """``OUTBOUND_ALLOW`` parsed: host names (matched exactly, any case) and networks."""

    hosts: frozenset[str]
    networks: tuple[IPNetwork, ...]

    @classmethod
    def from_settings(cls) -> OutboundPolicy:
        hosts: set[str] = set()
        networks: list[IPNetwork] = []
        for entry in engine_settings.OUTBOUND_ALLOW:
            text = entry.strip().strip("[]")
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                if text:
                    hosts.add(_host_key(text))
        return cls(frozenset(hosts), tuple(networks))

    def address_allowed(self, host: str, address: IPAddress) -> bool:
        """Whether a connection to ``address`` (resolved from ``host``) may be made: every address
        it reaches (:func:`judged_addresses`) is globally routable, or opened by OUTBOUND_ALLOW."""
        return all(self._single_allowed(host, inner) for inner in judged_addresses(address))

    def _single_allowed(self, host: str, address: IPAddress) -> bool:
        if any(address in network for network in LINK_LOCAL):
            # Cloud metadata: neither a host name nor a wider network (0.0.0.0/0) opens it.
            return any(address in network and _inside_link_local(network) for network in self.networks)
        if globally_routable(address):
            return True
        return _host_key(host) in self.hosts or any(address in network for network in self.networks)


def _host_key(host: str) -> str:
    return host.strip().lower().rstrip(".")


def _inside_link_local(network: IPNetwork) -> bool:
    return any(network.version == ll.version and network.subnet_of(ll) for ll in LINK_LOCAL)  # type: ignore[arg-type]


def _refused(reason: str, **details: Any) -> URLNotAllowed:
    # The resolved addresses stay out of the message: a tenant must not map internal names.
    return URLNotAllowed(
        f"{reason} Calls configured through the API or the admin reach public http(s) addresses only, "
        "unless MEMORY_ENGINE['OUTBOUND_ALLOW'] lists the host or its network.",
        details=details,
    )


def _resolve(host: str, port: int) -> list[IPAddress]:
    """Every address ``host`` resolves to (a literal address is itself); OSError when none."""
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, IPAddress] = {}
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]  # drop an IPv6 zone id
        seen.setdefault(text, ipaddress.ip_address(text))
    return list(seen.values())


def check_outbound_url(url: str) -> None:
    """At configuration time: raise URLNotAllowed for a non-http(s) URL or a host
    that resolves to an address the policy refuses. A name that does not resolve (yet) passes:
    the address is checked again on every connection."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        raise _refused("This is not a valid URL.", url=url) from None
    if parts.scheme not in ("http", "https") or not host:
        raise _refused("Only http:// and https:// URLs with a host are allowed.", url=url)
    try:
        addresses = _resolve(host, port or (443 if parts.scheme == "https" else 80))
    except (OSError, UnicodeError):
        return
    policy = OutboundPolicy.from_settings()
    if not all(policy.address_allowed(host, address) for address in addresses):
        raise _refused(f"{host} is a private, loopback or link-local address.", url=url, host=host)


def allowed_addresses(host: str, port: int) -> list[str]:
    """At connection time: the addresses of ``host`` the policy allows, in resolver order.

    Raises OSError when the name does not resolve and URLNotAllowed when no
    address is allowed. The caller connects to these addresses only, so the address checked
    is the address used (a second lookup could answer differently).
    """
    policy = OutboundPolicy.from_settings()
    addresses = [address for address in _resolve(host, port) if policy.address_allowed(host, address)]
    if not addresses:
        raise _refused(f"{host} is a private, loopback or link-local address.", host=host)
    return [str(address) for address in addresses]
