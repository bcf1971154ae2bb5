// The rendezvous store's listening address: see WildcardBindRedirect in net_address.h.
// Linked into scalelab-worker only (with the trainer), never into the agent.
#include "net_address.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <stdexcept>

namespace scalelab::trainer::net {
namespace {
// The redirect in force (one at a time), read by the bind() below.
struct Redirect {
    bool active = false;
    in_addr v4 {};
    in6_addr v6 {};
    bool isV6 = false;
    int count = 0;
};
std::mutex g_redirectMutex;
Redirect g_redirect;

} // namespace

WildcardBindRedirect::WildcardBindRedirect(const std::string &address)
{
    Redirect r;
    r.active = true;
    if (::inet_pton(AF_INET, address.c_str(), &r.v4) == 1) {
        r.isV6 = false;
    } else if (::inet_pton(AF_INET6, address.c_str(), &r.v6) == 1) {
        r.isV6 = true;
    } else {
        throw std::invalid_argument("'" + address + "' is not a numeric IPv4 or IPv6 address");
    }
    std::lock_guard lock(g_redirectMutex);
    g_redirect = r;
}

WildcardBindRedirect::~WildcardBindRedirect()
{
    std::lock_guard lock(g_redirectMutex);
    g_redirect = Redirect {};
}

int WildcardBindRedirect::redirected() const
{
    std::lock_guard lock(g_redirectMutex);
    return g_redirect.count;
}

} // namespace scalelab::trainer::net

// The process's bind(): libtorch calls it through the PLT, and an executable's definition
// comes first in symbol lookup, so this sees TCPStore's listening socket. Outside a
// WildcardBindRedirect, and for every bind that names a specific address, it is the C
// library's bind() unchanged.
extern "C" int bind(int fd, const sockaddr *address, socklen_t length) noexcept
{
    using Bind = int (*)(int, const sockaddr *, socklen_t);
    static const Bind real = reinterpret_cast<Bind>(::dlsym(RTLD_NEXT, "bind"));
    if (!real) {
        errno = ENOSYS;
        return -1;
    }
    using scalelab::trainer::net::g_redirect;
    std::unique_lock lock(scalelab::trainer::net::g_redirectMutex);
    if (!g_redirect.active || !address)
        return lock.unlock(), real(fd, address, length);
    int type = 0;
    socklen_t typeLength = sizeof type;
    if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &typeLength) != 0 || type != SOCK_STREAM)
        return lock.unlock(), real(fd, address, length);
    if (address->sa_family == AF_INET && length >= socklen_t(sizeof(sockaddr_in))) {
        sockaddr_in a = *reinterpret_cast<const sockaddr_in *>(address);
        if (a.sin_addr.s_addr != htonl(INADDR_ANY) || g_redirect.isV6)
            return lock.unlock(), real(fd, address, length);
        a.sin_addr = g_redirect.v4;
        ++g_redirect.count;
        lock.unlock();
        return real(fd, reinterpret_cast<const sockaddr *>(&a), sizeof a);
    }
    if (address->sa_family == AF_INET6 && length >= socklen_t(sizeof(sockaddr_in6))) {
        sockaddr_in6 a = *reinterpret_cast<const sockaddr_in6 *>(address);
        if (!IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr))
            return lock.unlock(), real(fd, address, length);
        if (g_redirect.isV6) {
            a.sin6_addr = g_redirect.v6;
        } else { // ::ffff:a.b.c.d on a dual-stack socket
            std::memset(&a.sin6_addr, 0, sizeof a.sin6_addr);
            a.sin6_addr.s6_addr[10] = 0xff;
            a.sin6_addr.s6_addr[11] = 0xff;
            std::memcpy(&a.sin6_addr.s6_addr[12], &g_redirect.v4, 4);
        }
        ++g_redirect.count;
        lock.unlock();
        return real(fd, reinterpret_cast<const sockaddr *>(&a), sizeof a);
    }
    return lock.unlock(), real(fd, address, length);
}
