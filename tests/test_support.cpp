// The shared test helpers that are compiled once (test_support.h says what each is for).
#include "test_support.h"

#include <QStandardPaths>
#include <QTcpServer>

namespace scalelab::test {

int freePort()
{
    QTcpServer probe;
    return probe.listen(QHostAddress::LocalHost, 0) ? probe.serverPort() : 0;
}

bool writeFile(const QString &path, const QByteArray &bytes, QFile::Permissions permissions)
{
    QFile f(path);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size())
        return false;
    f.close();
    return permissions == QFile::Permissions() || f.setPermissions(permissions);
}

QString makeTestCertificates(const QString &dir, const QStringList &selfSigned, const QStringList &signedByCa)
{
    if (QStandardPaths::findExecutable(QStringLiteral("openssl")).isEmpty())
        return QStringLiteral("openssl is needed to make test certificates (apt-get install openssl)");
    const auto path = [&](const QString &name) { return dir + QLatin1Char('/') + name; };
    const auto openssl = [](const QStringList &args) { return runTool(QStringLiteral("openssl"), args); };
    const auto newKey = [&](const QString &name) {
        return QStringList { QStringLiteral("-newkey"), QStringLiteral("ec"), QStringLiteral("-pkeyopt"),
            QStringLiteral("ec_paramgen_curve:prime256v1"), QStringLiteral("-nodes"),
            QStringLiteral("-keyout"), path(name + QStringLiteral(".key")) };
    };
    for (const QString &name : selfSigned) {
        if (QString problem
            = openssl(QStringList { QStringLiteral("req"), QStringLiteral("-x509") } + newKey(name)
                + QStringList { QStringLiteral("-out"), path(name + QStringLiteral(".pem")),
                    QStringLiteral("-days"), QStringLiteral("2"), QStringLiteral("-subj"),
                    QStringLiteral("/CN=ScaleLab test ") + name });
            !problem.isEmpty())
            return problem;
    }
    if (signedByCa.isEmpty())
        return {};
    if (!writeFile(path(QStringLiteral("san.ext")), "subjectAltName=DNS:localhost,IP:127.0.0.1\n"))
        return QStringLiteral("cannot write ") + path(QStringLiteral("san.ext"));
    for (const QString &name : signedByCa) {
        const QString subject = name == QLatin1String("server") ? QStringLiteral("localhost") : name;
        if (QString problem = openssl(QStringList { QStringLiteral("req") } + newKey(name)
                + QStringList { QStringLiteral("-out"), path(name + QStringLiteral(".csr")),
                    QStringLiteral("-subj"), QStringLiteral("/CN=") + subject });
            !problem.isEmpty())
            return problem;
        if (QString problem = openssl({ QStringLiteral("x509"), QStringLiteral("-req"), QStringLiteral("-in"),
                path(name + QStringLiteral(".csr")), QStringLiteral("-CA"), path(QStringLiteral("ca.pem")),
                QStringLiteral("-CAkey"), path(QStringLiteral("ca.key")), QStringLiteral("-CAcreateserial"),
                QStringLiteral("-out"), path(name + QStringLiteral(".pem")), QStringLiteral("-days"),
                QStringLiteral("2"), QStringLiteral("-extfile"), path(QStringLiteral("san.ext")) });
            !problem.isEmpty())
            return problem;
    }
    return {};
}

} // namespace scalelab::test
