#include "advertise.h"

#include "net_address.h"

#include <cstdlib>

namespace scalelab::agent {

namespace {
bool isWildcard(const std::string &host)
{
    return host == "0.0.0.0" || host == "::" || host == "[::]" || host.empty();
}

std::string unbracket(const std::string &host)
{
    return host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2)
                                                                        : host;
}
} // namespace

common::Result<AdvertiseChoice> chooseAdvertiseAddress(const std::string &listen,
    const std::string &advertiseHost, const std::string &interface, const std::string &hostName)
{
    AdvertiseChoice c;
    // The agent's own rule (agent_main): every address the server binds is loopback.
    const bool listenLoopback
        = !isWildcard(listen) && trainer::net::listensOnLoopbackOnly(listen).valueOr(false);
    auto finish = [&](AdvertiseChoice &choice) -> AdvertiseChoice {
        if (choice.interface.empty())
            choice.interface = trainer::net::interfaceOfAddress(choice.address);
        if (choice.warning.empty() && !listenLoopback && trainer::net::isLoopback(choice.address))
            choice.warning = "advertising loopback address " + choice.address
                + ": runs with ranks on other hosts will fail to connect. Set --advertise-host to this "
                  "host's cluster address or --iface to its cluster interface";
        return choice;
    };

    if (!advertiseHost.empty()) {
        const auto address = trainer::net::resolveNumeric(unbracket(advertiseHost));
        if (!address)
            return common::Status::failure("--advertise-host " + advertiseHost + ": " + address.error());
        c.address = address.value();
        c.how = c.address == advertiseHost ? "from --advertise-host" : "--advertise-host " + advertiseHost;
        if (trainer::net::interfaceOfAddress(c.address).empty() && !trainer::net::isLoopback(c.address))
            c.how += " (no interface here holds it: ranks listen on every address)";
        return finish(c);
    }
    std::string iface = interface;
    std::string ifaceSource = "--iface";
    if (iface.empty()) {
        if (const char *gloo = std::getenv("GLOO_SOCKET_IFNAME"); gloo && *gloo) {
            const auto names = trainer::net::splitInterfaces(gloo);
            if (!names.empty()) {
                iface = names.front();
                ifaceSource = "GLOO_SOCKET_IFNAME";
            }
        }
    }
    if (!iface.empty()) {
        const auto address = trainer::net::addressOfInterface(iface);
        if (!address)
            return common::Status::failure(ifaceSource + " " + iface + ": " + address.error());
        c.address = address.value();
        c.interface = iface;
        c.how = "from " + ifaceSource + " " + iface;
        return finish(c);
    }
    if (listenLoopback) {
        c.address = "127.0.0.1";
        c.how = "listening on loopback: every run stays on this host";
        return finish(c);
    }
    if (!isWildcard(listen)) {
        const auto address = trainer::net::resolveNumeric(unbracket(listen));
        if (!address)
            return common::Status::failure("--listen " + listen + ": " + address.error());
        c.address = address.value();
        c.how = "the --listen address";
        return finish(c);
    }

    // Every address: find the one other hosts reach us at.
    std::string candidates;
    std::string first, firstInterface;
    for (const auto &a : trainer::net::interfaceAddresses()) {
        if (a.loopback || !a.up)
            continue;
        candidates += (candidates.empty() ? "" : ", ") + a.address + " (" + a.interface + ")";
        if (first.empty()) {
            first = a.address;
            firstInterface = a.interface;
        }
    }
    const std::string named = trainer::net::resolveNumeric(hostName).valueOr({});
    if (!named.empty() && !trainer::net::isLoopback(named)
        && !trainer::net::interfaceOfAddress(named).empty()) {
        c.address = named;
        c.how = "the address of host name " + hostName;
        return finish(c);
    }
    const std::string hostNote = "host name " + hostName
        + (named.empty() ? " does not resolve"
                         : " resolves to " + named
                    + (trainer::net::isLoopback(named) ? " (loopback)" : " (not an address of this host)"));
    if (first.empty()) {
        c.address = named.empty() || !trainer::net::isLoopback(named) ? "127.0.0.1" : named;
        c.how = hostNote;
        c.warning = hostNote
            + " and no network interface other than loopback has an address: runs "
              "with ranks on other hosts cannot work. Set --advertise-host or --iface";
        return finish(c);
    }
    c.address = first;
    c.interface = firstInterface;
    c.how = "interface " + firstInterface + "; " + hostNote + "; candidates: " + candidates
        + " (--advertise-host or --iface picks another)";
    return finish(c);
}

} // namespace scalelab::agent
