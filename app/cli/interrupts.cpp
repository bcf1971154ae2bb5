#include "interrupts.h"

#include <QTimer>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <sys/socket.h>
#include <unistd.h>

namespace scalelab::app {
namespace {

// What the handler touches: lock-free atomics and a file descriptor, set before the
// handler is installed and cleared after it is removed.
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<int> g_count { 0 }; // signals so far
std::atomic<int> g_first { 0 }; // the first one's number
std::atomic<int> g_writeEnd { -1 };
constexpr int kSignals[] = { SIGINT, SIGTERM };
struct sigaction g_previous[2];
bool g_installed = false; // main thread only

void onSignal(int signal)
{
    const int savedErrno = errno;
    if (g_count.fetch_add(1) == 0) {
        g_first.store(signal);
        const char byte = 1;
        const int fd = g_writeEnd.load();
        if (fd >= 0)
            (void)!::write(fd, &byte, 1); // non-blocking; one byte into an empty pair
    } else {
        static const char kLine[] = "\nscalelab-cli: interrupted again: exiting at once\n";
        (void)!::write(STDERR_FILENO, kLine, sizeof kLine - 1);
        ::_exit(InterruptGuard::exitCodeFor(signal));
    }
    errno = savedErrno;
}

} // namespace

InterruptGuard::InterruptGuard()
{
    Q_ASSERT(!g_installed); // one guard at a time
    g_count.store(0);
    g_first.store(0);
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, m_pair) != 0) {
        m_pair[0] = m_pair[1] = -1; // the handler still counts, and a second signal still exits
    } else {
        m_notifier = std::make_unique<QSocketNotifier>(m_pair[0], QSocketNotifier::Read);
        QObject::connect(
            m_notifier.get(), &QSocketNotifier::activated, m_notifier.get(), [this] { deliver(); });
    }
    g_writeEnd.store(m_pair[1]);
    struct sigaction action = {};
    action.sa_handler = onSignal;
    action.sa_flags = SA_RESTART; // the event loop's and gRPC's calls carry on
    sigemptyset(&action.sa_mask);
    for (int s : kSignals)
        sigaddset(&action.sa_mask, s); // one handler at a time: the count decides
    for (int i = 0; i < 2; ++i)
        ::sigaction(kSignals[i], &action, &g_previous[i]);
    g_installed = true;
}

InterruptGuard::~InterruptGuard()
{
    for (int i = 0; i < 2; ++i)
        ::sigaction(kSignals[i], &g_previous[i], nullptr);
    g_installed = false;
    g_writeEnd.store(-1);
    m_notifier.reset();
    for (int fd : m_pair)
        if (fd >= 0)
            ::close(fd);
}

bool InterruptGuard::requested() const
{
    return g_count.load() > 0;
}

int InterruptGuard::signal() const
{
    return g_first.load();
}

void InterruptGuard::onInterrupt(std::function<void(int)> callback)
{
    m_callback = std::move(callback);
    // A signal that came before (its byte perhaps read by an earlier event loop): next turn.
    if (requested() && m_notifier)
        QTimer::singleShot(0, m_notifier.get(), [this] { deliver(); });
}

QString interruptHelp(const QString &first)
{
    return QStringLiteral(" Ctrl-C or SIGTERM %1; a second one exits at once, with 130 (143 for SIGTERM).")
        .arg(first);
}

void InterruptGuard::deliver()
{
    char bytes[8];
    while (::read(m_pair[0], bytes, sizeof bytes) > 0) { }
    if (!requested() || !m_callback || m_delivered)
        return;
    m_delivered = true;
    m_notifier->setEnabled(false);
    m_callback(signal());
}

} // namespace scalelab::app
