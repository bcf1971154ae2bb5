#include "net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace scalelab::trainer::net {

namespace {

std::string numeric(const sockaddr *address, socklen_t length)
{
    char host[NI_MAXHOST] = {};
    if (::getnameinfo(address, length, host, sizeof host, nullptr, 0, NI_NUMERICHOST) != 0)
        return {};
    return host;
}

bool isLinkLocal6(const sockaddr_in6 &a)
{
    return IN6_IS_ADDR_LINKLOCAL(&a.sin6_addr);
}

} // namespace

std::vector<InterfaceAddress> interfaceAddresses()
{
    std::vector<InterfaceAddress> v4, v6;
    ifaddrs *list = nullptr;
    if (::getifaddrs(&list) != 0)
        return {};
    for (const ifaddrs *i = list; i; i = i->ifa_next) {
        if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
            continue;
        InterfaceAddress a;
        a.interface = i->ifa_name;
        a.ipv6 = i->ifa_addr->sa_family == AF_INET6;
        if (a.ipv6 && isLinkLocal6(*reinterpret_cast<const sockaddr_in6 *>(i->ifa_addr)))
            continue; // needs a scope id; never what peers use
        a.address = numeric(i->ifa_addr, a.ipv6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
        a.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0 || isLoopback(a.address);
        a.up = (i->ifa_flags & IFF_UP) != 0 && (i->ifa_flags & IFF_RUNNING) != 0;
        (a.ipv6 ? v6 : v4).push_back(a);
    }
    ::freeifaddrs(list);
    v4.insert(v4.end(), v6.begin(), v6.end());
    return v4;
}

common::Result<std::string> addressOfInterface(const std::string &interface)
{
    std::string names;
    for (const auto &a : interfaceAddresses()) {
        if (a.interface == interface)
            return a.address; // IPv4 come first
        if (names.find(a.interface) == std::string::npos)
            names += (names.empty() ? "" : ", ") + a.interface;
    }
    return common::Status::failure("network interface '"
        + interface + "' has no address here (interfaces with one: " + (names.empty() ? "none" : names)
        + ")");
}

std::string interfaceOfAddress(const std::string &address)
{
    for (const auto &a : interfaceAddresses())
        if (a.address == address)
            return a.interface;
    return {};
}

common::Result<std::string> resolveNumeric(const std::string &host)
{
    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *result = nullptr;
    const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']'
        ? host.substr(1, host.size() - 2)
        : host;
    if (const int rc = ::getaddrinfo(bare.c_str(), nullptr, &hints, &result); rc != 0)
        return common::Status::failure("cannot resolve '" + host + "': " + ::gai_strerror(rc));
    std::string address = numeric(result->ai_addr, result->ai_addrlen);
    ::freeaddrinfo(result);
    if (address.empty())
        return common::Status::failure("'" + host + "' resolves to no usable address");
    return address;
}

common::Result<std::vector<std::string>> listenAddresses(const std::string &host)
{
    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE; // as gRPC's resolver does for a listening port
    addrinfo *result = nullptr;
    const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']'
        ? host.substr(1, host.size() - 2)
        : host;
    if (bare.empty())
        return common::Status::failure("no host given");
    if (const int rc = ::getaddrinfo(bare.c_str(), nullptr, &hints, &result); rc != 0)
        return common::Status::failure("'" + host + "' does not resolve (" + ::gai_strerror(rc) + ")");
    std::vector<std::string> addresses;
    for (const addrinfo *a = result; a; a = a->ai_next)
        if (std::string address = numeric(a->ai_addr, a->ai_addrlen); !address.empty())
            addresses.push_back(address);
    ::freeaddrinfo(result);
    if (addresses.empty())
        return common::Status::failure("'" + host + "' resolves to no usable address");
    return addresses;
}

namespace {
bool isLoopbackNumeric(const std::string &address)
{
    in_addr v4 {};
    in6_addr v6 {};
    if (::inet_pton(AF_INET, address.c_str(), &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    if (::inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
        if (IN6_IS_ADDR_LOOPBACK(&v6))
            return true;
        if (IN6_IS_ADDR_V4MAPPED(&v6))
            return v6.s6_addr[12] == 127;
    }
    return false;
}
} // namespace

bool isLoopback(const std::string &hostOrAddress)
{
    return listensOnLoopbackOnly(hostOrAddress).valueOr(false);
}

common::Result<bool> listensOnLoopbackOnly(const std::string &host)
{
    const auto addresses = listenAddresses(host);
    if (!addresses)
        return common::Status::failure(addresses.error());
    for (const auto &address : *addresses)
        if (!isLoopbackNumeric(address))
            return false;
    return true;
}

common::Result<std::string> localAddressTowards(const std::string &host, int port)
{
    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_DGRAM;
    addrinfo *result = nullptr;
    const std::string service = std::to_string(port > 0 ? port : 9);
    if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &result); rc != 0)
        return common::Status::failure("cannot resolve '" + host + "': " + ::gai_strerror(rc));
    std::string local;
    std::string why = "no address of '" + host + "' is routable from here";
    for (const addrinfo *a = result; a && local.empty(); a = a->ai_next) {
        const int fd = ::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
            sockaddr_storage self {};
            socklen_t length = sizeof self;
            if (::getsockname(fd, reinterpret_cast<sockaddr *>(&self), &length) == 0)
                local = numeric(reinterpret_cast<sockaddr *>(&self), length);
        } else {
            why = "no route to '" + host + "': " + std::strerror(errno);
        }
        ::close(fd);
    }
    ::freeaddrinfo(result);
    if (local.empty())
        return common::Status::failure(why);
    return local;
}

std::vector<std::string> splitInterfaces(const std::string &list)
{
    std::vector<std::string> names;
    std::size_t start = 0;
    while (start <= list.size()) {
        const std::size_t comma = list.find(',', start);
        const std::string name
            = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!name.empty())
            names.push_back(name);
        if (comma == std::string::npos)
            break;
        start = comma + 1;
    }
    return names;
}

} // namespace scalelab::trainer::net
