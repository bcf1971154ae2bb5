// What the agent process tests (tst_agent_runs, tst_agent_files, tst_agent_access) share
// beside test::AgentFixture: the agents' synthetic set, their TLS material, a run's stream read
// to its end, and the check that a test left no process behind. Header-only: it needs the core
// library and the protobuf messages, which scalelab_test_support is built without.
#pragma once

#include "agent_client.h"
#include "agent_fixture.h"
#include "agent_grpc.h"
#include "test_support.h"

#include <QTemporaryDir>
#include <QTest>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <string>
#include <vector>

namespace scalelab::test {

// An agent with the synthetic set "syn" in its data folder and `extra` on its command line.
inline AgentFixtureOptions withSyn(const QStringList &extra = {})
{
    AgentFixtureOptions options;
    options.syntheticSet = QStringLiteral("syn");
    options.trainImages = 200;
    options.testImages = 40;
    options.seed = 7;
    options.extraArguments = extra;
    return options;
}

// TLS material for one test program in `dir`: a CA, a server certificate for localhost and
// 127.0.0.1, a client certificate, and a second CA nobody trusts. Empty, or what failed.
inline QString makeAgentTestCertificates(const QString &dir)
{
    return makeTestCertificates(dir, { QStringLiteral("ca"), QStringLiteral("other-ca") },
        { QStringLiteral("server"), QStringLiteral("client") });
}

// After each test: no process names the test's folder (each test's agents are checked for
// unreaped workers too, by AgentFixture::stopAndCheckNothingLeft()).
inline void verifyNothingLeft(const QString &dir)
{
    QTRY_VERIFY_WITH_TIMEOUT(processesMentioning(dir).isEmpty(), 15000);
    QVERIFY2(
        processesMentioning(dir).isEmpty(), qPrintable(processesMentioning(dir).join(QLatin1Char('\n'))));
}

// The folder of one agent test program (every agent's folder is made inside it, with
// AgentFixture(m_tmp.path())), with the TLS material when the program needs it.
class AgentBench {
protected:
    QTemporaryDir m_tmp;

    QString path(const QString &name) const { return m_tmp.filePath(name); }

    // For initTestCase().
    void setUpBench(bool withCertificates)
    {
        QVERIFY(m_tmp.isValid());
        if (withCertificates) {
            const QString problem = makeAgentTestCertificates(m_tmp.path());
            QVERIFY2(problem.isEmpty(), qPrintable(problem));
        }
    }

    // For cleanup().
    void checkNothingLeft() { verifyNothingLeft(m_tmp.path()); }
};

struct Watched {
    std::vector<v1::RunEvent> events; // heartbeats left out
    grpc::Status status;
};

// Reads a run's stream from `from`; stops early (cancelling) once `stopAfter` events
// arrived, when it is > 0.
inline Watched watchRun(
    core::AgentClient &client, const std::string &runId, qint64 from, std::size_t stopAfter = 0)
{
    grpc::ClientContext context;
    client.connection().prepareStream(&context);
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(180));
    v1::WatchRunRequest request;
    request.set_run_id(runId);
    request.set_from_seq(from);
    auto reader = client.connection().stub->WatchRun(&context, request);
    Watched watched;
    v1::RunEvent event;
    while (reader->Read(&event)) {
        if (event.has_heartbeat())
            continue;
        watched.events.push_back(event);
        if (stopAfter > 0 && watched.events.size() >= stopAfter) {
            context.TryCancel();
            break;
        }
    }
    watched.status = reader->Finish();
    return watched;
}

// The name of the last state a stream reported; empty when it reported none.
inline QString lastStateName(const std::vector<v1::RunEvent> &events)
{
    for (auto it = events.rbegin(); it != events.rend(); ++it)
        if (it->has_state())
            return QString::fromStdString(v1::RunState_Name(it->state().state()));
    return {};
}

} // namespace scalelab::test
