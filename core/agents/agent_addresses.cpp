#include "agent_addresses.h"

#include "agent_client.h"

#include <QDir>
#include <QFile>

#include <algorithm>
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

namespace scalelab::core {

namespace {

void addOnce(QStringList *list, const QString &address)
{
    if (!list->contains(address))
        list->append(address);
}

} // namespace

AgentAddresses parseAgentsFile(const QByteArray &text, const QString &source)
{
    AgentAddresses result;
    const QList<QByteArray> lines = text.split('\n');
    for (qsizetype i = 0; i < lines.size(); ++i) {
        QByteArray line = lines[i];
        if (const qsizetype hash = line.indexOf('#'); hash >= 0)
            line.truncate(hash);
        const QString address = QString::fromUtf8(line).trimmed();
        if (address.isEmpty())
            continue;
        if (address.contains(QLatin1Char(' ')) || address.contains(QLatin1Char('\t'))) {
            result.error = QStringLiteral("%1:%2: one agent address per line, HOST:PORT (got '%3')")
                               .arg(source)
                               .arg(i + 1)
                               .arg(address);
            return result;
        }
        if (const QString problem = AgentClient::checkEndpoint(address).error(); !problem.isEmpty()) {
            result.error = QStringLiteral("%1:%2: %3").arg(source).arg(i + 1).arg(problem);
            return result;
        }
        addOnce(&result.addresses, address);
    }
    if (result.addresses.isEmpty())
        result.error = QStringLiteral("%1: no agent address in it (one HOST:PORT per line)").arg(source);
    return result;
}

AgentAddresses readAgentsFile(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return { {}, QStringLiteral("cannot read agents file %1: %2").arg(path, file.errorString()) };
    constexpr qint64 maxBytes = 1 << 20;
    const QByteArray text = file.read(maxBytes + 1);
    if (text.size() > maxBytes)
        return { {}, QStringLiteral("agents file %1 is over 1 MiB: is it the right file?").arg(path) };
    return parseAgentsFile(text, path);
}

AgentAddresses resolveAgentsDns(const QString &spec)
{
    const QString usage = QStringLiteral("give dns:NAME:PORT, for example dns:scalelab-agents:7450");
    if (!spec.startsWith(QLatin1String("dns:")))
        return { {}, QStringLiteral("'%1' is not a DNS agent list; %2").arg(spec, usage) };
    const QString rest = spec.mid(4);
    const qsizetype colon = rest.lastIndexOf(QLatin1Char(':'));
    const QString name = colon > 0 ? rest.left(colon) : QString();
    bool portOk = false;
    const int port = colon > 0 ? rest.mid(colon + 1).toInt(&portOk) : 0;
    if (name.isEmpty() || !portOk || port < 1 || port > 65535)
        return { {}, QStringLiteral("'%1' has no NAME or no valid port (1-65535); %2").arg(spec, usage) };

    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    const QByteArray host = name.toUtf8();
    if (const int rc = getaddrinfo(host.constData(), nullptr, &hints, &found); rc != 0)
        return { {},
            QStringLiteral("%1: cannot resolve %2: %3 (is the name right, and is this host on the "
                           "network whose DNS knows it?)")
                .arg(spec, name, QString::fromLocal8Bit(gai_strerror(rc))) };
    QStringList ipv4;
    QStringList ipv6;
    for (const addrinfo *a = found; a != nullptr; a = a->ai_next) {
        char text[INET6_ADDRSTRLEN] = {};
        if (a->ai_family == AF_INET) {
            inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in *>(a->ai_addr)->sin_addr, text, sizeof text);
            addOnce(&ipv4, QStringLiteral("%1:%2").arg(QString::fromLatin1(text)).arg(port));
        } else if (a->ai_family == AF_INET6) {
            inet_ntop(
                AF_INET6, &reinterpret_cast<const sockaddr_in6 *>(a->ai_addr)->sin6_addr, text, sizeof text);
            addOnce(&ipv6, QStringLiteral("[%1]:%2").arg(QString::fromLatin1(text)).arg(port));
        }
    }
    freeaddrinfo(found);
    // Sorted, so that the same Service gives the same list (and the same journal names)
    // whatever order the DNS server answered in.
    std::sort(ipv4.begin(), ipv4.end());
    std::sort(ipv6.begin(), ipv6.end());
    AgentAddresses result { ipv4 + ipv6, {} };
    if (result.addresses.isEmpty())
        result.error = QStringLiteral("%1: %2 has no IPv4 or IPv6 address").arg(spec, name);
    return result;
}

Status checkAgentSpec(const QString &spec)
{
    if (spec.startsWith(QLatin1String("file:")))
        return Status::failureIf(spec.size() > 5 ? QString()
                               : QStringLiteral("'%1' names no file; give file:PATH (one HOST:PORT per line)")
                                     .arg(spec));
    if (spec.startsWith(QLatin1String("dns:"))) {
        const QString rest = spec.mid(4);
        const qsizetype colon = rest.lastIndexOf(QLatin1Char(':'));
        bool portOk = false;
        const int port = colon > 0 ? rest.mid(colon + 1).toInt(&portOk) : 0;
        if (colon <= 0 || !portOk || port < 1 || port > 65535)
            return Status::failure(QStringLiteral("'%1' has no NAME or no valid port (1-65535); give dns:NAME:PORT, for "
                                  "example dns:scalelab-agents:7450")
                .arg(spec));
        return Status::success();
    }
    if (const QString problem = AgentClient::checkEndpoint(spec).error(); !problem.isEmpty())
        return Status::failure(problem + QStringLiteral("; or give file:PATH or dns:NAME:PORT"));
    return Status::success();
}

namespace {

AgentAddresses resolveAgentSpec(const QString &spec, const QString &baseDir)
{
    if (const QString problem = checkAgentSpec(spec).error(); !problem.isEmpty())
        return { {}, problem };
    if (spec.startsWith(QLatin1String("file:"))) {
        const QString path = spec.mid(5);
        return readAgentsFile(baseDir.isEmpty() || QDir::isAbsolutePath(path) ? path : QDir(baseDir).filePath(path));
    }
    if (spec.startsWith(QLatin1String("dns:")))
        return resolveAgentsDns(spec);
    return { { spec }, {} };
}

// Adds what `more` holds to `all`; false (with the problem in `all`) when it holds one.
bool merge(AgentAddresses *all, const AgentAddresses &more)
{
    if (!more.ok()) {
        *all = more;
        return false;
    }
    for (const QString &address : more.addresses)
        addOnce(&all->addresses, address);
    return true;
}

} // namespace

AgentAddresses resolveAgentSpecs(const QStringList &specs, const QString &baseDir)
{
    AgentAddresses all;
    for (const QString &spec : specs)
        if (!merge(&all, resolveAgentSpec(spec.trimmed(), baseDir)))
            break;
    return all;
}

AgentAddresses gatherAgentAddresses(
    const QStringList &agents, const QStringList &files, const QStringList &specs)
{
    AgentAddresses all;
    for (const QString &address : agents)
        if (const QString problem = AgentClient::checkEndpoint(address).error(); !problem.isEmpty())
            return { {}, problem };
    for (const QString &address : agents)
        addOnce(&all.addresses, address);
    // Each file, then each spec: the first problem stops it.
    for (const QString &file : files)
        if (!merge(&all, readAgentsFile(file)))
            return all;
    merge(&all, resolveAgentSpecs(specs));
    return all;
}

} // namespace scalelab::core
