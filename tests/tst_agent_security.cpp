// The agent's security rules and the words of their failures (issue 20, parts 4 and 5):
// loopback is decided on the addresses the server binds, never on spelling; a bad TLS
// key pair, a port in use and an address not of this host are each said as such; a
// client that speaks TLS to a plaintext agent (or the reverse, or with the wrong CA) is
// told so rather than "unreachable"; request headers have an explicit limit; every
// --help names the environment it reads. Real agent processes, no worker needed.
#include "agent_client.h"
#include "agent_fixture.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "net_address.h"
#include "scalelab/v1/agent.grpc.pb.h"
#include "test_support.h"
#include "verify_ok.h"

#include <QProcess>
#include <QStandardPaths>
#include <QTcpServer>
#include <QTemporaryDir>
#include <QTest>

#include <grpcpp/grpcpp.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace scalelab;
using namespace scalelab::core;

namespace {

using test::writeFile;

// Whether this host can listen on ::1 (IPv6 may be off in a container).
bool haveIpv6Loopback()
{
    const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (fd < 0)
        return false;
    sockaddr_in6 address {};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_loopback;
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0;
    ::close(fd);
    return ok;
}

// What a program printed and how it ended. The agents that must refuse to start are run
// this way, by hand rather than with test::AgentFixture: their exit code and their words
// are what the tests check.
struct Outcome {
    int exitCode = -1;
    QString output; // stdout and stderr
};

Outcome run(
    const QString &program, const QStringList &args, const QProcessEnvironment &env, int timeoutMs = 20'000)
{
    QProcess p;
    p.setProcessChannelMode(QProcess::MergedChannels);
    p.setProcessEnvironment(env);
    p.start(program, args);
    if (!p.waitForFinished(timeoutMs)) {
        p.kill();
        p.waitForFinished(2000);
        return { -1, QStringLiteral("timed out: ") + QString::fromLocal8Bit(p.readAll()) };
    }
    return { p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1,
        QString::fromLocal8Bit(p.readAll()) };
}

} // namespace

class AgentSecurityTest : public QObject {
    Q_OBJECT

    QTemporaryDir m_tmp;
    QString m_worker; // any executable: these agents never start a worker

    QString path(const QString &name) const { return m_tmp.filePath(name); }

    // The agent's environment: no token, no TLS settings from whoever runs the test.
    QProcessEnvironment cleanEnvironment() const
    {
        QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
        for (const QString &name : env.keys())
            if (name.startsWith(QLatin1String("SCALELAB_AGENT_"))
                || name.startsWith(QLatin1String("SCALELAB_TLS_")))
                env.remove(name);
        return env;
    }

    QStringList agentArguments(
        const QString &name, const QString &listen, const QString &port = QStringLiteral("0")) const
    {
        return { QStringLiteral("--listen"), listen, QStringLiteral("--port"), port,
            QStringLiteral("--worker"), m_worker, QStringLiteral("--data-dir"), path(QStringLiteral("data")),
            QStringLiteral("--state-dir"), path(name) };
    }

    QStringList tlsArguments(const QString &cert, const QString &key) const
    {
        return { QStringLiteral("--tls-cert"), path(cert), QStringLiteral("--tls-key"), path(key) };
    }

    // An agent that must listen, for a test::AgentFixture(m_tmp.path()): its folder lies
    // in this test's, so cleanup() sees what it leaves.
    test::AgentFixtureOptions agentOptions(
        const QString &listen, bool withToken, const QStringList &extra = {}) const
    {
        test::AgentFixtureOptions options;
        options.listen = listen;
        options.withToken = withToken;
        options.extraArguments = QStringList { QStringLiteral("--worker"), m_worker } + extra;
        return options;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());
        QVERIFY(QDir().mkpath(path(QStringLiteral("data"))));
        m_worker = QStandardPaths::findExecutable(QStringLiteral("true"));
        QVERIFY(!m_worker.isEmpty());
        QVERIFY2(QFileInfo(test::binary("scalelab-agent")).isExecutable(), "build scalelab-agent first");
        // A CA, a server certificate it signed for localhost and 127.0.0.1, a CA that
        // signed nothing here, and two unrelated self-signed pairs.
        const QString problem = test::makeTestCertificates(m_tmp.path(),
            { QStringLiteral("ca"), QStringLiteral("other-ca"), QStringLiteral("one"),
                QStringLiteral("two") },
            { QStringLiteral("server") });
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
    }

    void cleanup()
    {
        // No agent of this test is left behind.
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 15000);
    }

    // The same rule in-process: numbers and names by what they resolve to.
    void loopbackIsDecidedOnAddresses()
    {
        for (const char *loopback : { "127.0.0.1", "127.1.2.3", "[::1]", "::ffff:127.0.0.1", "localhost" }) {
            const auto only = trainer::net::listensOnLoopbackOnly(loopback);
            VERIFY_OK(only);
            QVERIFY2(only.value(), loopback);
        }
        for (const char *reachable : { "0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1" }) {
            const auto only = trainer::net::listensOnLoopbackOnly(reachable);
            VERIFY_OK(only);
            QVERIFY2(!only.value(), reachable);
        }
        const auto unresolved = trainer::net::listensOnLoopbackOnly("127.evil");
        QVERIFY(!unresolved);
        QVERIFY2(QString::fromStdString(unresolved.error()).contains(QLatin1String("does not resolve")),
            unresolved.error().c_str());
        QVERIFY(!trainer::net::isLoopback("127.evil"));
    }

    // Names that only look like loopback, or do not resolve at all, are refused with
    // the reason; the agent never starts listening.
    void unresolvableNamesAreRefused_data()
    {
        QTest::addColumn<QString>("host");
        QTest::newRow("127.evil") << QStringLiteral("127.evil");
        QTest::newRow("127.0.0.1.invalid") << QStringLiteral("127.0.0.1.invalid");
    }
    void unresolvableNamesAreRefused()
    {
        QFETCH(QString, host);
        const Outcome o = run(test::binary("scalelab-agent"),
            agentArguments(QStringLiteral("unresolvable"), host), cleanEnvironment());
        QCOMPARE(o.exitCode, 2);
        QVERIFY2(o.output.contains(QStringLiteral("cannot listen on %1: '%1' does not resolve").arg(host)),
            qPrintable(o.output));
        QVERIFY2(!o.output.contains(QLatin1String("listening on")), qPrintable(o.output));
    }

    // Names that resolve off loopback, wholly or in part, need the token and TLS. The
    // names come from a hosts file of a private mount namespace (unshare), so that no
    // DNS is needed; where that is not possible the test says so and skips.
    void namesResolvingOffLoopbackNeedTokenAndTls_data()
    {
        QTest::addColumn<QString>("host");
        QTest::addColumn<QString>("addresses");
        QTest::newRow("all off loopback") << QStringLiteral("evil-node") << QStringLiteral("10.11.12.13");
        QTest::newRow("one of two off loopback")
            << QStringLiteral("mixed-node") << QStringLiteral("127.0.0.1, 10.11.12.13");
        QTest::newRow("spelled like loopback") << QStringLiteral("127.evil") << QStringLiteral("10.11.12.13");
    }
    void namesResolvingOffLoopbackNeedTokenAndTls()
    {
        QFETCH(QString, host);
        QFETCH(QString, addresses);
        const QString unshare = QStandardPaths::findExecutable(QStringLiteral("unshare"));
        if (unshare.isEmpty()
            || !test::runTool(unshare,
                { QStringLiteral("-rm"), QStringLiteral("mount"), QStringLiteral("--bind"),
                    QStringLiteral("/etc/hosts"), QStringLiteral("/etc/hosts") })
                    .isEmpty())
            QSKIP("needs unshare -rm (user and mount namespaces) to give the agent a hosts file of its own");
        QVERIFY(writeFile(path(QStringLiteral("hosts")),
            "127.0.0.1 localhost\n10.11.12.13 evil-node\n127.0.0.1 mixed-node\n10.11.12.13 mixed-node\n"
            "10.11.12.13 127.evil\n"));
        const QStringList args = QStringList { QStringLiteral("-rm"), QStringLiteral("sh"),
            QStringLiteral("-c"), QStringLiteral("mount --bind \"$0\" /etc/hosts && exec \"$@\""),
            path(QStringLiteral("hosts")), test::binary("scalelab-agent") }
            + agentArguments(QStringLiteral("names"), host);
        const Outcome o = run(unshare, args, cleanEnvironment());
        QCOMPARE(o.exitCode, 2);
        QVERIFY2(
            o.output.contains(
                QStringLiteral("refusing to listen on %1 (%2) without a token and TLS").arg(host, addresses)),
            qPrintable(o.output));
    }

    // Loopback by number or by name needs neither, and answers a client without a token.
    void loopbackNeedsNoToken_data()
    {
        QTest::addColumn<QString>("host");
        QTest::newRow("localhost") << QStringLiteral("localhost");
        QTest::newRow("127.0.0.1") << QStringLiteral("127.0.0.1");
        QTest::newRow("[::1]") << QStringLiteral("[::1]");
    }
    void loopbackNeedsNoToken()
    {
        QFETCH(QString, host);
        if (host.contains(QLatin1Char(':')) && !haveIpv6Loopback())
            QSKIP("this host cannot listen on ::1");
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(agentOptions(host, false)));
        QVERIFY2(agent.address().startsWith(host + QLatin1Char(':')), qPrintable(agent.address()));
        AgentClient client(agent.address(), QString(), AgentTls {});
        v1::DescribeResponse inventory;
        const Status r = client.describe(&inventory);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // A key that is not the certificate's is named as the problem (it used to be "is the
    // port in use?"), and so are files that are not what they should be.
    void badTlsFilesAreSaidAsSuch_data()
    {
        QTest::addColumn<QString>("cert");
        QTest::addColumn<QString>("key");
        QTest::addColumn<QString>("message");
        QTest::newRow("mismatched pair")
            << "one.pem"
            << "two.key"
            << QStringLiteral(
                   "--tls-key {key} is not the private key of the certificate in --tls-cert {cert}");
        QTest::newRow("key given as certificate")
            << "one.key"
            << "one.key" << QStringLiteral("--tls-cert {cert} holds no PEM certificate");
        QTest::newRow("certificate given as key")
            << "one.pem"
            << "one.pem" << QStringLiteral("--tls-key {key} holds no PEM private key");
        QTest::newRow("broken certificate")
            << "broken.pem"
            << "one.key" << QStringLiteral("--tls-cert {cert}: the certificate cannot be parsed");
    }
    void badTlsFilesAreSaidAsSuch()
    {
        QFETCH(QString, cert);
        QFETCH(QString, key);
        QFETCH(QString, message);
        QVERIFY(writeFile(path(QStringLiteral("broken.pem")),
            "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"));
        QProcessEnvironment env = cleanEnvironment();
        env.insert(QStringLiteral("SCALELAB_AGENT_TOKEN"), QStringLiteral("a-token"));
        const Outcome o = run(test::binary("scalelab-agent"),
            agentArguments(QStringLiteral("badtls"), QStringLiteral("0.0.0.0")) + tlsArguments(cert, key),
            env);
        QCOMPARE(o.exitCode, 2);
        message.replace(QLatin1String("{key}"), path(key)).replace(QLatin1String("{cert}"), path(cert));
        QVERIFY2(o.output.contains(message), qPrintable(o.output));
        QVERIFY2(!o.output.contains(QLatin1String("port in use")), qPrintable(o.output));
        // The good pair starts (so the refusal above was the pair's fault).
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(
            agent.start(agentOptions(QStringLiteral("127.0.0.1"), true, tlsArguments("one.pem", "one.key"))));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // A port another agent (or any program) holds is said to be in use; an address no
    // interface here holds is said to be not local.
    void bindFailuresSayTheirCause()
    {
        test::AgentFixture first(m_tmp.path());
        VERIFY_OK(first.start(agentOptions(QStringLiteral("127.0.0.1"), false)));
        const QString port = first.address().section(QLatin1Char(':'), -1);
        for (const QString &host : { QStringLiteral("127.0.0.1"), QStringLiteral("localhost") }) {
            const Outcome o = run(test::binary("scalelab-agent"),
                agentArguments(QStringLiteral("second"), host, port), cleanEnvironment());
            QCOMPARE(o.exitCode, 2);
            QVERIFY2(o.output.contains(QStringLiteral("port %1 of 127.0.0.1 is in use").arg(port)),
                qPrintable(o.output));
        }
        VERIFY_OK(first.stopAndCheckNothingLeft());

        // A port held by a program that is not an agent.
        QTcpServer other;
        QVERIFY(other.listen(QHostAddress::LocalHost));
        Outcome o = run(test::binary("scalelab-agent"),
            agentArguments(
                QStringLiteral("third"), QStringLiteral("127.0.0.1"), QString::number(other.serverPort())),
            cleanEnvironment());
        QCOMPARE(o.exitCode, 2);
        QVERIFY2(o.output.contains(QStringLiteral("port %1 of 127.0.0.1 is in use").arg(other.serverPort())),
            qPrintable(o.output));

        // 198.51.100.7 is TEST-NET-2: no host holds it.
        const std::string notLocal = "198.51.100.7";
        if (!trainer::net::interfaceOfAddress(notLocal).empty())
            QSKIP("this host holds 198.51.100.7");
        QProcessEnvironment env = cleanEnvironment();
        env.insert(QStringLiteral("SCALELAB_AGENT_TOKEN"), QStringLiteral("a-token"));
        for (const QString &p : { QStringLiteral("0"), QStringLiteral("7999") }) {
            o = run(test::binary("scalelab-agent"),
                agentArguments(QStringLiteral("notlocal"), QString::fromStdString(notLocal), p)
                    + tlsArguments("server.pem", "server.key"),
                env);
            QCOMPARE(o.exitCode, 2);
            QVERIFY2(o.output.contains(QLatin1String("198.51.100.7 is not an address of this host")),
                qPrintable(o.output));
        }
    }

    // TLS on one side only, or a CA that did not sign the agent's certificate, is said as
    // such; a refused connection keeps the plain "cannot reach".
    void tlsMismatchesAreSaidAsSuch()
    {
        test::AgentFixture tlsAgent(m_tmp.path());
        VERIFY_OK(tlsAgent.start(
            agentOptions(QStringLiteral("127.0.0.1"), true, tlsArguments("server.pem", "server.key"))));
        test::AgentFixture plainAgent(m_tmp.path());
        VERIFY_OK(plainAgent.start(agentOptions(QStringLiteral("127.0.0.1"), false)));
        const AgentTls trusted { path(QStringLiteral("ca.pem")), {}, {}, {} };
        v1::DescribeResponse inventory;

        AgentClient good(tlsAgent.address(), tlsAgent.token(), trusted);
        Status r = good.describe(&inventory);
        QVERIFY2(r.ok(), qPrintable(r.error()));

        AgentClient plaintext(tlsAgent.address(), tlsAgent.token(), AgentTls {});
        r = plaintext.describe(&inventory, 3000);
        QCOMPARE(r.code(), Status::Code::Unavailable);
        QVERIFY2(r.error().contains(
                     QStringLiteral("agent %1 most likely speaks TLS, but this client has no CA: set "
                                    "SCALELAB_TLS_CA")
                         .arg(tlsAgent.address())),
            qPrintable(r.error()));
        QVERIFY2(!r.error().contains(QLatin1String("cannot reach")), qPrintable(r.error()));

        AgentClient untrusted(tlsAgent.address(), tlsAgent.token(),
            AgentTls { path(QStringLiteral("other-ca.pem")), {}, {}, {} });
        r = untrusted.describe(&inventory, 3000);
        QCOMPARE(r.code(), Status::Code::Unavailable);
        QVERIFY2(r.error().contains(QStringLiteral("presented a certificate that %1 does not vouch for")
                                        .arg(path(QStringLiteral("other-ca.pem")))),
            qPrintable(r.error()));

        AgentClient tlsToPlain(plainAgent.address(), QString(), trusted);
        r = tlsToPlain.describe(&inventory, 3000);
        QCOMPARE(r.code(), Status::Code::Unavailable);
        QVERIFY2(r.error().contains(QStringLiteral("agent %1 does not speak TLS, but this client does")
                                        .arg(plainAgent.address())),
            qPrintable(r.error()));

        const QString gone
            = QStringLiteral("127.0.0.1:") + plainAgent.address().section(QLatin1Char(':'), -1);
        VERIFY_OK(plainAgent.stopAndCheckNothingLeft());
        AgentClient refused(gone, QString(), AgentTls {});
        r = refused.describe(&inventory, 3000);
        QCOMPARE(r.code(), Status::Code::Unavailable);
        QVERIFY2(r.error().startsWith(QStringLiteral("cannot reach the agent at %1").arg(gone)),
            qPrintable(r.error()));
        VERIFY_OK(tlsAgent.stopAndCheckNothingLeft());
    }

    // Request headers are limited explicitly (16 KiB, where gRPC's default is 8): a long
    // token still reaches the check, a longer one is refused with words.
    void requestHeadersHaveAnExplicitLimit()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(agentOptions(QStringLiteral("127.0.0.1"), true)));
        v1::DescribeResponse inventory;
        AgentClient longToken(agent.address(), QString(12'000, QLatin1Char('x')), AgentTls {});
        Status r = longToken.describe(&inventory);
        QCOMPARE(r.code(), Status::Code::Unauthenticated);
        AgentClient hugeToken(agent.address(), QString(20'000, QLatin1Char('x')), AgentTls {});
        r = hugeToken.describe(&inventory);
        QCOMPARE(r.code(), Status::Code::ResourceExhausted);
        QVERIFY2(r.error().contains(QLatin1String("refused the call's headers as too large")),
            qPrintable(r.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // Every --help names the environment it reads (and a command's, the command).
    void helpListsTheEnvironment_data()
    {
        QTest::addColumn<QString>("program");
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<QStringList>("names");
        const QStringList clientNames = { QStringLiteral("SCALELAB_TOKEN"), QStringLiteral("SCALELAB_TLS_CA"),
            QStringLiteral("SCALELAB_TLS_CERT"), QStringLiteral("SCALELAB_TLS_KEY"),
            QStringLiteral("SCALELAB_TLS_SERVER_NAME"), QStringLiteral("SCALELAB_STATE_DIR") };
        QTest::newRow("agent") << "scalelab-agent" << QStringList { QStringLiteral("--help") }
                               << QStringList { QStringLiteral("SCALELAB_AGENT_TOKEN"),
                                      QStringLiteral("SCALELAB_AGENT_TLS_CERT"),
                                      QStringLiteral("SCALELAB_TLS_CA"),
                                      QStringLiteral("SCALELAB_AGENT_MAX_STREAMS") };
        QTest::newRow("cli") << "scalelab-cli" << QStringList { QStringLiteral("--help") } << clientNames;
        QTest::newRow("cli run") << "scalelab-cli"
                                 << QStringList { QStringLiteral("run"), QStringLiteral("--help") }
                                 << clientNames;
        QTest::newRow("cli describe")
            << "scalelab-cli" << QStringList { QStringLiteral("describe"), QStringLiteral("--help") }
            << clientNames;
        QTest::newRow("cli runs") << "scalelab-cli"
                                  << QStringList { QStringLiteral("runs"), QStringLiteral("--help") }
                                  << clientNames;
        QTest::newRow("cli study run")
            << "scalelab-cli"
            << QStringList { QStringLiteral("study"), QStringLiteral("run"), QStringLiteral("--help") }
            << clientNames;
        QTest::newRow("console") << "scalelab" << QStringList { QStringLiteral("--help") } << clientNames;
    }
    // --health-port: a second, plaintext port with gRPC's health service and nothing else
    // (for Kubernetes' gRPC probes, which speak no TLS); the agent's own port still wants
    // its token.
    void healthPortServesOnlyHealth()
    {
        const int healthPort = test::freePort();
        QVERIFY2(healthPort > 0, "no free port on 127.0.0.1");
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(agentOptions(QStringLiteral("127.0.0.1"), true,
            { QStringLiteral("--health-port"), QString::number(healthPort) })));
        auto channel = grpc::CreateChannel(
            QStringLiteral("127.0.0.1:%1").arg(healthPort).toStdString(), grpc::InsecureChannelCredentials());
        auto health = grpc::health::v1::Health::NewStub(channel);
        grpc::health::v1::HealthCheckRequest request;
        grpc::health::v1::HealthCheckResponse response;
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        const grpc::Status status = health->Check(&context, request, &response);
        QVERIFY2(status.ok(), status.error_message().c_str());
        QCOMPARE(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);

        auto scalelabOnHealthPort = scalelab::v1::Agent::NewStub(channel);
        scalelab::v1::DescribeRequest describe;
        scalelab::v1::DescribeResponse inventory;
        grpc::ClientContext describeContext;
        describeContext.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        QCOMPARE(scalelabOnHealthPort->Describe(&describeContext, describe, &inventory).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

        // The same port again is refused with a reason, before anything is opened.
        const int port = test::freePort();
        QVERIFY2(port > 0, "no free port on 127.0.0.1");
        const QString samePort = QString::number(port);
        const Outcome same = run(test::binary("scalelab-agent"),
            agentArguments(QStringLiteral("health-same"), QStringLiteral("127.0.0.1"), samePort)
                + QStringList { QStringLiteral("--health-port"), samePort },
            cleanEnvironment());
        QCOMPARE(same.exitCode, 2);
        QVERIFY2(same.output.contains(QLatin1String("is the agent's own port")), qPrintable(same.output));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void helpListsTheEnvironment()
    {
        QFETCH(QString, program);
        QFETCH(QStringList, args);
        QFETCH(QStringList, names);
        const QString binary = test::binary(program.toLatin1().constData());
        if (program == QLatin1String("scalelab") && !QFileInfo(binary).isExecutable())
            QSKIP("the console is not built here");
        QProcessEnvironment env = cleanEnvironment();
        env.remove(QStringLiteral("DISPLAY"));
        const Outcome o = run(binary, args, env);
        QCOMPARE(o.exitCode, 0);
        for (const QString &name : names)
            QVERIFY2(
                o.output.contains(name), qPrintable(name + QStringLiteral(" missing from:\n") + o.output));
        // A command's usage line names it as typed, not the program's path.
        if (program == QLatin1String("scalelab-cli") && args.size() > 1) {
            const QString usage = QStringLiteral("Usage: scalelab-cli %1 [options]")
                                      .arg(args.mid(0, args.size() - 1).join(QLatin1Char(' ')));
            QVERIFY2(o.output.startsWith(usage), qPrintable(o.output.section(QLatin1Char('\n'), 0, 0)));
        }
    }
};

QTEST_GUILESS_MAIN(AgentSecurityTest)
#include "tst_agent_security.moc"
