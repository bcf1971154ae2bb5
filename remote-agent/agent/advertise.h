// The address an agent advertises for the ranks it starts: where other hosts' ranks
// reach this host's rendezvous store and Gloo/NCCL sockets. Chosen once at start-up,
// in this order:
//   1. --advertise-host (a name is resolved once, here);
//   2. the address of --iface (or of the first interface in GLOO_SOCKET_IFNAME);
//   3. 127.0.0.1 when listening on loopback (every run stays on this host);
//   4. the --listen address when it is a specific one;
//   5. listening on every address: the host name's address unless that is loopback (on a
//      stock Debian install it is 127.0.1.1), else the first non-loopback interface that
//      is up, named with the other candidates so the operator can pick another.
// A choice that other hosts cannot use (loopback while listening off loopback, nothing
// found) is not fatal — runs on this host alone still work — but comes with a warning
// that says what was found and what to set.
#pragma once

#include "status.h"

#include <string>

namespace scalelab::agent {

struct AdvertiseChoice {
    std::string address; // numeric
    std::string interface; // that holds it, "" when unknown (a NAT'ed address, say)
    std::string how; // in words: "from --iface eth0", "interface eth0 (host name ... is loopback)"
    std::string warning; // non-empty when ranks on other hosts cannot reach this one
};

// The choice, or why the operator's setting (--advertise-host, --iface, --listen) is
// unusable: then the agent refuses to start.
common::Result<AdvertiseChoice> chooseAdvertiseAddress(const std::string &listen,
    const std::string &advertiseHost, const std::string &interface, const std::string &hostName);

} // namespace scalelab::agent
