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

void addAllOnce(QStringList *list, const QStringList &addresses)
{
    for (const QString &address : addresses)
        addOnce(list, address);
}

} // namespace

AgentAddresses parseAgentsFile(const QByteArray &text, const QString &source)
{
    QStringList addresses;
    const QList<QByteArray> lines = text.split('\n');
    for (qsizetype i = 0; i < lines.size(); ++i) {
        QByteArray line = lines[i];
        if (const qsizetype hash = line.indexOf('#'); hash >= 0)
            line.truncate(hash);
        const QString address = QString::fromUtf8(line).trimmed();
        if (address.isEmpty())
            continue;
        if (address.contains(QLatin1Char(' ')) || address.contains(QLatin1Char('\t')))
            return Status::failure(QStringLiteral("%1:%2: one agent address per line, HOST:PORT (got '%3')")
                                       .arg(source)
                                       .arg(i + 1)
                                       .arg(address));
        if (const Status endpoint = AgentClient::checkEndpoint(address); !endpoint)
            return Status::failure(QStringLiteral("%1:%2: %3").arg(source).arg(i + 1).arg(endpoint.error()));
        addOnce(&addresses, address);
    }
    if (addresses.isEmpty())
        return Status::failure(
            QStringLiteral("%1: no agent address in it (one HOST:PORT per line)").arg(source));
    return addresses;
}

AgentAddresses readAgentsFile(const QString &path)
{
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly))
        return Status::failure(
            QStringLiteral("cannot read agents file %1: %2").arg(path, file.errorString()));
    constexpr qint64 maxBytes = 1 << 20;
    const QByteArray text = file.read(maxBytes + 1);
    if (text.size() > maxBytes)
        return Status::failure(
            QStringLiteral("agents file %1 is over 1 MiB: is it the right file?").arg(path));
    return parseAgentsFile(text, path);
}

AgentAddresses resolveAgentsDns(const QString &spec)
{
    const QString usage = QStringLiteral("give dns:NAME:PORT, for example dns:scalelab-agents:7450");
    if (!spec.startsWith(QLatin1String("dns:")))
        return Status::failure(QStringLiteral("'%1' is not a DNS agent list; %2").arg(spec, usage));
    const QString rest = spec.mid(4);
    const qsizetype colon = rest.lastIndexOf(QLatin1Char(':'));
    const QString name = colon > 0 ? rest.left(colon) : QString();
    bool portOk = false;
    const int port = colon > 0 ? rest.mid(colon + 1).toInt(&portOk) : 0;
    if (name.isEmpty() || !portOk || port < 1 || port > 65535)
        return Status::failure(
            QStringLiteral("'%1' has no NAME or no valid port (1-65535); %2").arg(spec, usage));

    addrinfo hints {};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    const QByteArray host = name.toUtf8();
    if (const int rc = getaddrinfo(host.constData(), nullptr, &hints, &found); rc != 0)
        return Status::failure(
            QStringLiteral("%1: cannot resolve %2: %3 (is the name right, and is this host on "
                           "the network whose DNS knows it?)")
                .arg(spec, name, QString::fromLocal8Bit(gai_strerror(rc))));
    QStringList ipv4;
    QStringList ipv6;
    for (const addrinfo *a = found; a != nullptr; a = a->ai_next) {
        char text[INET6_ADDRSTRLEN] = {};
        if (a->ai_family == AF_INET) {
            inet_ntop(
                AF_INET, &reinterpret_cast<const sockaddr_in *>(a->ai_addr)->sin_addr, text, sizeof text);
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
    if (ipv4.isEmpty() && ipv6.isEmpty())
        return Status::failure(QStringLiteral("%1: %2 has no IPv4 or IPv6 address").arg(spec, name));
    return ipv4 + ipv6;
}

Status checkAgentSpec(const QString &spec)
{
    if (spec.startsWith(QLatin1String("file:"))) {
        if (spec.size() > 5)
            return Status::success();
        return Status::failure(
            QStringLiteral("'%1' names no file; give file:PATH (one HOST:PORT per line)").arg(spec));
    }
    if (spec.startsWith(QLatin1String("dns:"))) {
        const QString rest = spec.mid(4);
        const qsizetype colon = rest.lastIndexOf(QLatin1Char(':'));
        bool portOk = false;
        const int port = colon > 0 ? rest.mid(colon + 1).toInt(&portOk) : 0;
        if (colon <= 0 || !portOk || port < 1 || port > 65535)
            return Status::failure(
                QStringLiteral("'%1' has no NAME or no valid port (1-65535); give dns:NAME:PORT, for "
                               "example dns:scalelab-agents:7450")
                    .arg(spec));
        return Status::success();
    }
    if (const Status endpoint = AgentClient::checkEndpoint(spec); !endpoint)
        return Status::failure(endpoint.error() + QStringLiteral("; or give file:PATH or dns:NAME:PORT"));
    return Status::success();
}

namespace {

AgentAddresses resolveAgentSpec(const QString &spec, const QString &baseDir)
{
    if (const Status form = checkAgentSpec(spec); !form)
        return form;
    if (spec.startsWith(QLatin1String("file:"))) {
        const QString path = spec.mid(5);
        return readAgentsFile(
            baseDir.isEmpty() || QDir::isAbsolutePath(path) ? path : QDir(baseDir).filePath(path));
    }
    if (spec.startsWith(QLatin1String("dns:")))
        return resolveAgentsDns(spec);
    return QStringList { spec };
}

} // namespace

AgentAddresses resolveAgentSpecs(const QStringList &specs, const QString &baseDir)
{
    QStringList all;
    for (const QString &spec : specs) {
        const AgentAddresses more = resolveAgentSpec(spec.trimmed(), baseDir);
        if (!more)
            return more;
        addAllOnce(&all, *more);
    }
    return all;
}

AgentAddresses gatherAgentAddresses(
    const QStringList &agents, const QStringList &files, const QStringList &specs)
{
    for (const QString &address : agents)
        if (const Status endpoint = AgentClient::checkEndpoint(address); !endpoint)
            return endpoint;
    QStringList all;
    addAllOnce(&all, agents);
    // Each file, then each spec: the first problem stops it.
    for (const QString &file : files) {
        const AgentAddresses more = readAgentsFile(file);
        if (!more)
            return more;
        addAllOnce(&all, *more);
    }
    const AgentAddresses more = resolveAgentSpecs(specs);
    if (!more)
        return more;
    addAllOnce(&all, *more);
    return all;
}

} // namespace scalelab::core
