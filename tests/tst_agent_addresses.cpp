// The three ways to say where agents are (core/agent_addresses.h): HOST:PORT, an agents
// file (as the Slurm launcher writes it) and dns:NAME:PORT.
#include "agent_addresses.h"
#include "verify_ok.h"

#include <QFile>
#include <QTemporaryDir>
#include <QTest>

using namespace scalelab::core;

class TestAgentAddresses : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void fileWithCommentsAndBlankLines()
    {
        const AgentAddresses got = parseAgentsFile("# job 42\n"
                                                   "node1:7450\n"
                                                   "\n"
                                                   "  node2:7450   # rank 1's host\n"
                                                   "10.0.0.3:7451\r\n"
                                                   "node1:7450\n",
            QStringLiteral("agents.txt"));
        VERIFY_OK(got);
        QCOMPARE(*got,
            QStringList({ QStringLiteral("node1:7450"), QStringLiteral("node2:7450"),
                QStringLiteral("10.0.0.3:7451") }));
    }

    void fileProblemsNameTheLine()
    {
        AgentAddresses got = parseAgentsFile("node1:7450\nnode2\n", QStringLiteral("a.txt"));
        QVERIFY(!got.ok());
        QVERIFY2(got.error().startsWith(QLatin1String("a.txt:2: ")), qPrintable(got.error()));
        QVERIFY2(got.error().contains(QLatin1String("HOST:PORT")), qPrintable(got.error()));

        got = parseAgentsFile("node1:99999\n", QStringLiteral("a.txt"));
        QVERIFY2(
            got.error().startsWith(QLatin1String("a.txt:1: ")) && got.error().contains(QLatin1String("port")),
            qPrintable(got.error()));

        got = parseAgentsFile("node1:7450 node2:7450\n", QStringLiteral("a.txt"));
        QVERIFY2(got.error().contains(QLatin1String("one agent address per line")), qPrintable(got.error()));

        got = parseAgentsFile("# nothing yet\n\n", QStringLiteral("a.txt"));
        QVERIFY(!got.ok());
        QVERIFY2(got.error().contains(QLatin1String("no agent address")), qPrintable(got.error()));
    }

    void readsFilesAndSaysWhyNot()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("agents"));
        AgentAddresses got = readAgentsFile(path);
        QVERIFY2(got.error().contains(QLatin1String("cannot read agents file")) && got.error().contains(path),
            qPrintable(got.error()));
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("h1:7450\nh2:7450\n");
        f.close();
        got = readAgentsFile(path);
        VERIFY_OK(got);
        QCOMPARE(got->size(), 2);
    }

    void dnsResolvesEveryAddressSorted()
    {
        // localhost is in every /etc/hosts: no DNS server is needed.
        const AgentAddresses got = resolveAgentsDns(QStringLiteral("dns:localhost:7450"));
        VERIFY_OK(got);
        QVERIFY2(got->contains(QStringLiteral("127.0.0.1:7450")), qPrintable(got->join(',')));
        for (const QString &a : *got)
            QVERIFY2(a == QLatin1String("127.0.0.1:7450") || a == QLatin1String("[::1]:7450"), qPrintable(a));
        QCOMPARE(got->first(), QStringLiteral("127.0.0.1:7450")); // IPv4 first
    }

    void dnsSpecProblems_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::newRow("no prefix") << "localhost:7450";
        QTest::newRow("no port") << "dns:localhost";
        QTest::newRow("bad port") << "dns:localhost:0";
        QTest::newRow("no name") << "dns::7450";
        QTest::newRow("port not a number") << "dns:localhost:http";
    }
    void dnsSpecProblems()
    {
        QFETCH(QString, spec);
        const AgentAddresses got = resolveAgentsDns(spec);
        QVERIFY(!got.ok());
        QVERIFY2(got.error().contains(QLatin1String("dns:NAME:PORT")), qPrintable(got.error()));
    }

    void gatherKeepsOrderAndDropsDuplicates()
    {
        QTemporaryDir dir;
        const QString path = dir.filePath(QStringLiteral("agents"));
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("h2:7450\n127.0.0.1:7450\nh3:7450\n");
        f.close();
        AgentAddresses got = gatherAgentAddresses({ QStringLiteral("h1:7450"), QStringLiteral("h2:7450") },
            { path }, { QStringLiteral("dns:localhost:7450") });
        VERIFY_OK(got);
        QCOMPARE(got->mid(0, 4),
            QStringList({ QStringLiteral("h1:7450"), QStringLiteral("h2:7450"),
                QStringLiteral("127.0.0.1:7450"), QStringLiteral("h3:7450") }));

        got = gatherAgentAddresses({ QStringLiteral("h1") }, {}, {});
        QVERIFY2(got.error().contains(QLatin1String("HOST:PORT")), qPrintable(got.error()));
        got = gatherAgentAddresses({}, { dir.filePath(QStringLiteral("missing")) }, {});
        QVERIFY2(got.error().contains(QLatin1String("cannot read agents file")), qPrintable(got.error()));
        got = gatherAgentAddresses({}, {}, {});
        VERIFY_OK(got);
        QVERIFY(got->isEmpty());
    }

    // One string per source, as a plan's "agents" and the console's Agents tab take them.
    void specFormsAreCheckedWithoutIo_data()
    {
        QTest::addColumn<QString>("spec");
        QTest::addColumn<QString>("problem"); // empty: well formed
        QTest::newRow("address") << "node1:7450"
                                 << "";
        QTest::newRow("ipv6 address") << "[::1]:7450"
                                      << "";
        QTest::newRow("file") << "file:agents.txt"
                              << "";
        QTest::newRow("file that does not exist yet") << "file:/nowhere/agents.txt"
                                                      << "";
        QTest::newRow("dns") << "dns:scalelab-agents.ns.svc:7450"
                             << "";
        QTest::newRow("no port") << "node1"
                                 << "not HOST:PORT";
        QTest::newRow("says the other forms") << "node1"
                                              << "file:PATH or dns:NAME:PORT";
        QTest::newRow("empty file") << "file:"
                                    << "names no file";
        QTest::newRow("dns without port") << "dns:scalelab-agents"
                                          << "dns:NAME:PORT";
        QTest::newRow("dns port 0") << "dns:scalelab-agents:0"
                                    << "valid port";
    }
    void specFormsAreCheckedWithoutIo()
    {
        QFETCH(QString, spec);
        QFETCH(QString, problem);
        const QString got = checkAgentSpec(spec).error();
        if (problem.isEmpty())
            QVERIFY2(got.isEmpty(), qPrintable(got));
        else
            QVERIFY2(got.contains(problem), qPrintable(got));
    }

    void specsMixFormsAndReadFilesFromTheBaseFolder()
    {
        QTemporaryDir dir;
        QFile f(dir.filePath(QStringLiteral("agents.txt")));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("n2:7450\nn3:7450\n");
        f.close();
        const QStringList specs { QStringLiteral("n1:7450"), QStringLiteral(" file:agents.txt "),
            QStringLiteral("dns:localhost:7450"), QStringLiteral("n2:7450") };
        AgentAddresses got = resolveAgentSpecs(specs, dir.path());
        VERIFY_OK(got);
        QCOMPARE(got->mid(0, 4),
            QStringList({ QStringLiteral("n1:7450"), QStringLiteral("n2:7450"), QStringLiteral("n3:7450"),
                QStringLiteral("127.0.0.1:7450") }));
        QCOMPARE(got->count(QStringLiteral("n2:7450")), 1);
        // An absolute path is not moved; a relative one without a base folder is the
        // working directory's (where the file is not).
        got = resolveAgentSpecs({ QStringLiteral("file:") + f.fileName() });
        VERIFY_OK(got);
        got = resolveAgentSpecs({ QStringLiteral("file:agents.txt"), QStringLiteral("n9:7450") },
            dir.filePath(QStringLiteral("elsewhere")));
        QVERIFY(!got.ok());
        QVERIFY2(got.error().contains(QLatin1String("cannot read agents file"))
                && got.error().contains(QLatin1String("elsewhere/agents.txt")),
            qPrintable(got.error()));
        got = resolveAgentSpecs({ QStringLiteral("n1") });
        QVERIFY2(got.error().contains(QLatin1String("HOST:PORT")), qPrintable(got.error()));
        // --agents takes every form too.
        got = gatherAgentAddresses(
            {}, {}, { QStringLiteral("n5:7450"), QStringLiteral("file:") + f.fileName() });
        VERIFY_OK(got);
        QCOMPARE(*got,
            QStringList({ QStringLiteral("n5:7450"), QStringLiteral("n2:7450"), QStringLiteral("n3:7450") }));
    }
};

QTEST_GUILESS_MAIN(TestAgentAddresses)
#include "tst_agent_addresses.moc"
