#include "agent_registry.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QSaveFile>

namespace scalelab::core {

namespace {
constexpr int kFormatVersion = 1;
const auto kOwnerOnly = QFileDevice::ReadOwner | QFileDevice::WriteOwner;
const auto kOthers = QFileDevice::ReadGroup | QFileDevice::WriteGroup | QFileDevice::ExeGroup
    | QFileDevice::ReadOther | QFileDevice::WriteOther | QFileDevice::ExeOther;
const QString kExample = QStringLiteral("gpu-node-1:50051");

QString octal(QFileDevice::Permissions p)
{
    // Qt's owner bits are 0x0700 (4-bit groups); print them as the usual 0644.
    const int owner = (int(p) >> 12) & 7, group = (int(p) >> 4) & 7, other = int(p) & 7;
    return QStringLiteral("0%1%2%3").arg(owner).arg(group).arg(other);
}

QJsonObject toJson(const AgentConfig &a)
{
    QJsonObject o { { QStringLiteral("name"), a.name }, { QStringLiteral("address"), a.address },
        { QStringLiteral("token"), a.token }, { QStringLiteral("enabled"), a.enabled } };
    QJsonObject tls;
    const auto put = [&tls](const char *key, const QString &value) {
        if (!value.isEmpty())
            tls.insert(QLatin1String(key), value);
    };
    put("ca", a.tls.caFile);
    put("cert", a.tls.certFile);
    put("key", a.tls.keyFile);
    put("serverName", a.tls.serverName);
    if (!tls.isEmpty())
        o.insert(QStringLiteral("tls"), tls);
    return o;
}

AgentConfig fromJson(const QJsonObject &o)
{
    AgentConfig a;
    a.name = o.value(QStringLiteral("name")).toString();
    a.address = o.value(QStringLiteral("address")).toString();
    a.token = o.value(QStringLiteral("token")).toString();
    a.enabled = o.value(QStringLiteral("enabled")).toBool(true);
    const QJsonObject tls = o.value(QStringLiteral("tls")).toObject();
    a.tls.caFile = tls.value(QStringLiteral("ca")).toString();
    a.tls.certFile = tls.value(QStringLiteral("cert")).toString();
    a.tls.keyFile = tls.value(QStringLiteral("key")).toString();
    a.tls.serverName = tls.value(QStringLiteral("serverName")).toString();
    return a;
}

QString joined(const QList<AgentProblem> &problems)
{
    QStringList lines;
    for (const auto &p : problems)
        lines << p.message;
    return lines.join(QLatin1Char('\n'));
}

void checkFile(QList<AgentProblem> *out, const char *field, const QString &what, const QString &path)
{
    if (path.isEmpty())
        return;
    const QFileInfo info(path);
    if (!info.exists())
        *out << AgentProblem { QLatin1String(field),
            QStringLiteral("TLS: %1 '%2' does not exist").arg(what, path) };
    else if (!info.isFile() || !info.isReadable())
        *out << AgentProblem { QLatin1String(field),
            QStringLiteral("TLS: %1 '%2' is not a readable file").arg(what, path) };
}
} // namespace

bool AgentConfig::operator==(const AgentConfig &o) const
{
    return name == o.name && address == o.address && token == o.token && enabled == o.enabled
        && tls.caFile == o.tls.caFile && tls.certFile == o.tls.certFile && tls.keyFile == o.tls.keyFile
        && tls.serverName == o.tls.serverName;
}

AgentRegistry::AgentRegistry(QString path)
    : m_path(std::move(path))
{ }

QString AgentRegistry::defaultPath(const QString &stateDir)
{
    return QDir(stateDir).filePath(QStringLiteral("agents.json"));
}

int AgentRegistry::indexOf(const QString &name) const
{
    for (int i = 0; i < m_agents.size(); ++i)
        if (m_agents[i].name == name)
            return i;
    return -1;
}

Status AgentRegistry::checkAddress(const QString &address)
{
    const QString &a = address; // not trimmed: " host:1" would not connect either
    if (a.isEmpty())
        return Status::failure(QStringLiteral("address is empty: write host:port, e.g. %1").arg(kExample));
    if (a.contains(QLatin1Char(' ')) || a.contains(QLatin1Char('/')))
        return Status::failure(
            QStringLiteral("address '%1' is not host:port (no spaces, no scheme or path): write "
                           "host:port, e.g. %2")
                .arg(a, kExample));
    // host:port with exactly one colon, or [v6 address]:port.
    QString host, portText;
    if (a.startsWith(QLatin1Char('['))) {
        const int close = a.indexOf(QLatin1Char(']'));
        if (close < 0 || a.mid(close + 1, 1) != QLatin1String(":"))
            return Status::failure(
                QStringLiteral("address '%1' has no port: write [host]:port, e.g. [::1]:50051").arg(a));
        host = a.mid(1, close - 1);
        portText = a.mid(close + 2);
    } else {
        const int colons = int(a.count(QLatin1Char(':')));
        if (colons == 0)
            return Status::failure(
                QStringLiteral("address '%1' has no port: write host:port, e.g. %2").arg(a, kExample));
        if (colons > 1)
            return Status::failure(
                QStringLiteral("address '%1' is ambiguous: write an IPv6 host in brackets, e.g. "
                               "[::1]:50051")
                    .arg(a));
        host = a.section(QLatin1Char(':'), 0, 0);
        portText = a.section(QLatin1Char(':'), 1);
    }
    if (host.isEmpty())
        return Status::failure(
            QStringLiteral("address '%1' has no host: write host:port, e.g. %2").arg(a, kExample));
    if (portText.isEmpty())
        return Status::failure(
            QStringLiteral("address '%1' has no port: write host:port, e.g. %2").arg(a, kExample));
    bool ok = false;
    const int port = portText.toInt(&ok);
    if (!ok || port < 1 || port > 65535)
        return Status::failure(
            QStringLiteral("address '%1': port '%2' is not a number from 1 to 65535").arg(a, portText));
    return Status::success();
}

QList<AgentProblem> AgentRegistry::problemsOf(const AgentConfig &a)
{
    QList<AgentProblem> out;
    const QString name = a.name.trimmed();
    if (name.isEmpty())
        out << AgentProblem { QStringLiteral("name"),
            QStringLiteral("name is empty: give the agent a "
                           "short name, e.g. gpu-node-1") };
    else if (name != a.name || name.contains(QLatin1Char('/')) || name.contains(QLatin1Char('\n')))
        out << AgentProblem { QStringLiteral("name"),
            QStringLiteral("name '%1' may not start or end with spaces or hold '/' or line breaks")
                .arg(a.name) };
    if (const QString p = checkAddress(a.address).error(); !p.isEmpty())
        out << AgentProblem { QStringLiteral("address"), p };
    if (a.token.contains(QLatin1Char('\n')) || a.token.contains(QLatin1Char(' '))
        || a.token.trimmed() != a.token)
        out << AgentProblem { QStringLiteral("token"),
            QStringLiteral("token has spaces or line breaks: paste only the token itself") };
    const AgentTls &t = a.tls;
    if (!t.keyFile.isEmpty() && t.certFile.isEmpty())
        out << AgentProblem { QStringLiteral("tls.cert"),
            QStringLiteral("TLS: a client key without its client certificate: add the certificate "
                           "or remove the key") };
    if (!t.certFile.isEmpty() && t.keyFile.isEmpty())
        out << AgentProblem { QStringLiteral("tls.key"),
            QStringLiteral("TLS: a client certificate without its key: add the key or remove the "
                           "certificate") };
    if (t.caFile.isEmpty() && (!t.certFile.isEmpty() || !t.keyFile.isEmpty() || !t.serverName.isEmpty()))
        out << AgentProblem { QStringLiteral("tls.ca"),
            QStringLiteral("TLS: the CA file is missing: TLS is on only with the CA that signed the "
                           "agent's certificate") };
    checkFile(&out, "tls.ca", QStringLiteral("CA file"), t.caFile);
    checkFile(&out, "tls.cert", QStringLiteral("client certificate"), t.certFile);
    checkFile(&out, "tls.key", QStringLiteral("client key"), t.keyFile);
    return out;
}

QList<AgentProblem> AgentRegistry::problems(const AgentConfig &agent, int replacing) const
{
    QList<AgentProblem> out = problemsOf(agent);
    const int existing = indexOf(agent.name);
    if (!agent.name.isEmpty() && existing >= 0 && existing != replacing)
        out.prepend(AgentProblem { QStringLiteral("name"),
            QStringLiteral("an agent named '%1' already exists: pick another name").arg(agent.name) });
    return out;
}

Status AgentRegistry::add(const AgentConfig &agent)
{
    if (const auto p = problems(agent); !p.isEmpty()) {
        return Status::failure(joined(p));
    }
    m_agents << agent;
    return Status::success();
}

Status AgentRegistry::replace(int index, const AgentConfig &agent)
{
    if (index < 0 || index >= m_agents.size()) {
        return Status::failure(QStringLiteral("no agent at index %1").arg(index));
    }
    if (const auto p = problems(agent, index); !p.isEmpty()) {
        return Status::failure(joined(p));
    }
    m_agents[index] = agent;
    return Status::success();
}

bool AgentRegistry::remove(const QString &name)
{
    const int i = indexOf(name);
    if (i < 0)
        return false;
    m_agents.removeAt(i);
    return true;
}

Status AgentRegistry::load()
{
    m_agents.clear();
    m_warnings.clear();
    QFile file(m_path);
    if (!file.exists())
        return Status::success();
    // Tighten before reading: the tokens should not stay readable by others a moment longer.
    const auto mode = file.permissions();
    if (mode & kOthers) {
        if (file.setPermissions(kOwnerOnly))
            m_warnings << QStringLiteral("%1 was readable by other users (%2); it is now owner-only "
                                         "(0600). Consider changing the agents' tokens.")
                              .arg(m_path, octal(mode));
        else
            m_warnings << QStringLiteral("%1 is readable by other users (%2) and could not be made "
                                         "owner-only: run chmod 600 on it")
                              .arg(m_path, octal(mode));
    }
    if (!file.open(QIODevice::ReadOnly)) {
        return Status::failure(QStringLiteral("cannot read %1: %2").arg(m_path, file.errorString()));
    }
    QJsonParseError parse;
    const QJsonDocument doc = QJsonDocument::fromJson(file.readAll(), &parse);
    if (parse.error != QJsonParseError::NoError || !doc.isObject()) {
        return Status::failure(
            QStringLiteral("%1 is not a ScaleLab agent list (%2 at byte %3); fix or remove it")
                .arg(m_path,
                    parse.error != QJsonParseError::NoError ? parse.errorString()
                                                            : QStringLiteral("not a JSON object"))
                .arg(parse.offset));
    }
    const QJsonObject root = doc.object();
    if (root.value(QStringLiteral("version")).toInt(kFormatVersion) > kFormatVersion) {
        return Status::failure(
            QStringLiteral("%1 was written by a newer ScaleLab (format %2); this one reads format %3")
                .arg(m_path)
                .arg(root.value(QStringLiteral("version")).toInt())
                .arg(kFormatVersion));
    }
    for (const QJsonValue &v : root.value(QStringLiteral("agents")).toArray()) {
        const AgentConfig agent = fromJson(v.toObject());
        if (const auto p = problems(agent); !p.isEmpty())
            m_warnings << QStringLiteral("agent '%1': %2").arg(agent.name, joined(p));
        m_agents << agent;
    }
    return Status::success();
}

Status AgentRegistry::save() const
{
    const QFileInfo info(m_path);
    if (!QDir().mkpath(info.absolutePath())) {
        return Status::failure(QStringLiteral("cannot create the folder %1").arg(info.absolutePath()));
    }
    // An existing file wider than 0600 is tightened first: QSaveFile gives the new file
    // the old one's permissions.
    if (info.exists() && (QFile::permissions(m_path) & kOthers)
        && !QFile::setPermissions(m_path, kOwnerOnly)) {
        return Status::failure(QStringLiteral("cannot make %1 owner-only (chmod 600)").arg(m_path));
    }
    QSaveFile file(m_path);
    if (!file.open(QIODevice::WriteOnly)) {
        return Status::failure(QStringLiteral("cannot write %1: %2").arg(m_path, file.errorString()));
    }
    // Owner-only before any token is written (a new file starts as 0666 & ~umask).
    if (!file.setPermissions(kOwnerOnly)) {
        file.cancelWriting();
        return Status::failure(QStringLiteral("cannot make %1 owner-only (chmod 600)").arg(m_path));
    }
    QJsonArray list;
    for (const auto &a : m_agents)
        list << toJson(a);
    const QJsonObject root { { QStringLiteral("version"), kFormatVersion },
        { QStringLiteral("agents"), list } };
    file.write(QJsonDocument(root).toJson(QJsonDocument::Indented));
    if (!file.commit()) {
        return Status::failure(QStringLiteral("cannot write %1: %2").arg(m_path, file.errorString()));
    }
    return Status::success();
}

} // namespace scalelab::core
