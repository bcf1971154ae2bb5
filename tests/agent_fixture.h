// A real scalelab-agent for a test: a temporary folder (named on every command line the
// test starts, so "no process left" is checkable), a data folder with an optional
// synthetic set, the agent on loopback with a fresh token, and a client for it.
//
//   test::AgentFixture agent;
//   test::AgentFixtureOptions options;
//   options.syntheticSet = QStringLiteral("syn");
//   VERIFY_OK(agent.start(options));
//   agent.client().describe(&inventory);
//   ...
//   VERIFY_OK(agent.stopAndCheckNothingLeft());
//
// Links scalelab_core (LocalAgent, AgentClient) and scalelab_cifar (the synthetic set).
// Test-thread only.
#pragma once

#include "agent_client.h"
#include "agent_endpoint.h"
#include "cifar10.h"
#include "local_agent.h"
#include "test_support.h"

#include <QDir>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

namespace scalelab::test {

struct AgentFixtureOptions {
    QString syntheticSet; // a synthetic CIFAR-format set of this name in the data folder; empty: none
    int trainImages = 200;
    int testImages = 50;
    int seed = 1;
    QStringList extraArguments; // for scalelab-agent (--tls-cert, ...)
    QString stateName = QStringLiteral("state"); // the agent's state folder, in the fixture's folder
};

class AgentFixture {
public:
    // Makes the folders (and the set) and starts the agent.
    core::Status start(const AgentFixtureOptions &options = {})
    {
        if (!m_tmp.isValid())
            return core::Status::failure(QStringLiteral("no temporary folder: ") + m_tmp.errorString());
        if (!QDir().mkpath(dataDir()))
            return core::Status::failure(QStringLiteral("cannot create ") + dataDir());
        if (!options.syntheticSet.isEmpty()) {
            if (const common::Status written
                = cifar::writeSyntheticDataset((dataDir() + QLatin1Char('/') + options.syntheticSet).toStdString(),
                    options.trainImages, options.testImages, options.seed);
                !written)
                return core::Status::failure(QString::fromStdString(written.error()));
        }
        core::LocalAgentOptions agentOptions;
        agentOptions.agentBinary = binary("scalelab-agent");
        agentOptions.dataDir = dataDir();
        agentOptions.stateDir = path(options.stateName);
        agentOptions.extraArguments = options.extraArguments;
        if (core::Status started = m_agent.start(agentOptions); !started)
            return started;
        m_client = std::make_unique<core::AgentClient>(m_agent.endpoint(), m_agent.token());
        return core::Status::success();
    }

    // Stops the agent and waits until no process names the fixture's folder.
    core::Status stopAndCheckNothingLeft(int timeoutMs = 15'000)
    {
        m_client.reset();
        m_agent.stop();
        if (QTest::qWaitFor([this] { return processesMentioning(m_tmp.path()).isEmpty(); }, timeLimit(timeoutMs)))
            return core::Status::success();
        return core::Status::failure(
            QStringLiteral("processes left behind:\n") + processesMentioning(m_tmp.path()).join('\n'));
    }

    QString path(const QString &name) const { return m_tmp.filePath(name); }
    QString folder() const { return m_tmp.path(); }
    QString dataDir() const { return path(QStringLiteral("data")); }
    core::LocalAgent &agent() { return m_agent; }
    core::AgentClient &client() { return *m_client; }
    QString address() const { return m_agent.endpoint(); }
    QString token() const { return m_agent.token(); }
    core::AgentEndpoint endpoint(const QString &name = QStringLiteral("local")) const
    {
        return { name, m_agent.endpoint(), m_agent.token() };
    }

private:
    QTemporaryDir m_tmp;
    core::LocalAgent m_agent;
    std::unique_ptr<core::AgentClient> m_client;
};

} // namespace scalelab::test
