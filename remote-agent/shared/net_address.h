// Which local address a rank's sockets use. Torch-free and Qt-free: the worker and the
// agent both decide with it.
//
// On a stock Debian install the host name resolves to 127.0.1.1, so "the address my
// host name resolves to" (what Gloo's default device and many launchers use) is a
// loopback address that no other host can reach. Everything here works from numeric
// addresses and interfaces instead.
#pragma once

#include "status.h"

#include <string>
#include <vector>

namespace scalelab::trainer::net {

struct InterfaceAddress {
    std::string interface; // "eth0"
    std::string address; // numeric, "10.0.0.5" or "fe80::1"
    bool ipv6 = false;
    bool loopback = false;
    bool up = false;
};

// Every address of every interface (getifaddrs), IPv4 first, in the kernel's order.
std::vector<InterfaceAddress> interfaceAddresses();

// The first IPv4 (else IPv6, not link-local) address of `interface`; failing, the
// message names the interfaces that exist.
common::Result<std::string> addressOfInterface(const std::string &interface);

// The interface that holds `address` (numeric), or "".
std::string interfaceOfAddress(const std::string &address);

// The numeric address `host` resolves to (the first one).
common::Result<std::string> resolveNumeric(const std::string &host);

// Every numeric address a server asked to listen on `host` binds: getaddrinfo with
// AI_PASSIVE, as gRPC resolves a listening address, which binds them all ("[::1]" may be
// bracketed); at least one. Fails when `host` does not resolve.
common::Result<std::vector<std::string>> listenAddresses(const std::string &host);

// True for 127.0.0.0/8, ::1 and ::ffff:127.x. A name is loopback only when every address
// it resolves to is: "localhost" is, "127.evil" is not (whatever it resolves to, if at all).
bool isLoopback(const std::string &hostOrAddress);

// The security rule of the agent: a server listening on `host` is reachable from this
// host only when every address listenAddresses() gives is loopback. Decided on addresses,
// never on spelling. Fails when `host` does not resolve (treat that as "not loopback").
common::Result<bool> listensOnLoopbackOnly(const std::string &host);

// The local address the kernel would send from to reach host:port (a connected UDP
// socket, so nothing is sent). For a host that is this machine, it is that address
// itself.
common::Result<std::string> localAddressTowards(const std::string &host, int port);

// A comma-separated interface list (GLOO_SOCKET_IFNAME's format) split into names.
std::vector<std::string> splitInterfaces(const std::string &list);

// While an instance lives, a bind() of a TCP socket in this process to the wildcard
// address (0.0.0.0 or ::) binds to `address` instead (on an IPv6 socket an IPv4
// address is bound as ::ffff:a.b.c.d). libtorch 1.13's TCPStore server listens on the
// wildcard address with no option to choose one; this keeps the rendezvous store off
// every other interface of the host. One at a time; not for general use.
class WildcardBindRedirect {
public:
    // `address` must be numeric. Throws std::invalid_argument if it is not.
    explicit WildcardBindRedirect(const std::string &address);
    ~WildcardBindRedirect();
    WildcardBindRedirect(const WildcardBindRedirect &) = delete;
    WildcardBindRedirect &operator=(const WildcardBindRedirect &) = delete;

    // How many wildcard binds were redirected while this instance lived.
    int redirected() const;
};

} // namespace scalelab::trainer::net
