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
// start() again after stop() is a restart: a new agent on the same folders (the same
// state), with the options given then. AgentFixture(parent) makes the folder inside a
// test's own, so that the test's own "no process left" check covers this agent too.
//
// Links scalelab_core (LocalAgent, AgentClient) and scalelab_cifar (the synthetic set).
// Test-thread only.
#pragma once

#include "agent_client.h"
#include "agent_endpoint.h"
#include "local_agent.h"
#include "test_support.h"

#include "cifar10.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>
#include <QTest>

#include <memory>

namespace scalelab::test {

struct AgentFixtureOptions {
    QString syntheticSet; // a synthetic CIFAR-format set of this name in the data folder
                          // (unless it is there already); empty: none
    int trainImages = 200;
    int testImages = 50;
    int seed = 1;
    QStringList extraArguments; // for scalelab-agent (--tls-cert, ...)
    QString stateName = QStringLiteral("state"); // the agent's state folder, in the fixture's folder
    QString logFile; // the agent's log; empty: local-agent.log in its state folder
    QString listen = QStringLiteral("127.0.0.1"); // --listen
    bool withToken = true; // false: no token at all (the agent allows that on loopback only)
    QString token; // with withToken: this token instead of a fresh random one
};

// A small run on the fixture's synthetic set "syn": batch 25, one thread per rank, at most
// 40 test images, no augmentation; attempt 1.
inline v1::StartWorkersRequest runRequest(
    const std::string &id, int epochs, int worldSize = 1, const std::vector<int> &ranks = { 0 })
{
    v1::StartWorkersRequest r;
    r.set_run_id(id);
    r.set_attempt(1);
    r.set_world_size(worldSize);
    for (int rank : ranks)
        r.add_ranks(rank);
    auto *spec = r.mutable_spec();
    spec->set_dataset("syn");
    spec->set_batch_size(25);
    spec->set_epochs(epochs);
    spec->set_threads_per_worker(1);
    spec->set_max_test_images(40);
    spec->set_no_augment(true);
    return r;
}

class AgentFixture {
public:
    AgentFixture() = default;
    // The fixture's folder inside `parent`, a folder of the test's own.
    explicit AgentFixture(const QString &parent)
        : m_tmp(parent + QStringLiteral("/agent-XXXXXX"))
    { }

    // Makes the folders (and the set) and starts the agent; on failure says why (and
    // agent().refusedConfiguration() whether the agent refused its configuration).
    core::Status start(const AgentFixtureOptions &options = {})
    {
        if (!m_tmp.isValid())
            return core::Status::failure(QStringLiteral("no temporary folder: ") + m_tmp.errorString());
        if (!QDir().mkpath(dataDir()))
            return core::Status::failure(QStringLiteral("cannot create ") + dataDir());
        const QString set = dataDir() + QLatin1Char('/') + options.syntheticSet;
        if (!options.syntheticSet.isEmpty() && !QFileInfo::exists(set)) {
            if (const common::Status written = trainer::cifar::writeSyntheticDataset(
                    set.toStdString(), options.trainImages, options.testImages, options.seed);
                !written)
                return core::Status::failure(QString::fromStdString(written.error()));
        }
        m_stateName = options.stateName;
        core::LocalAgentOptions agentOptions;
        agentOptions.agentBinary = binary("scalelab-agent");
        agentOptions.dataDir = dataDir();
        agentOptions.stateDir = stateDir();
        agentOptions.logFile = options.logFile;
        agentOptions.listen = options.listen;
        agentOptions.withToken = options.withToken;
        agentOptions.token = options.token;
        agentOptions.extraArguments = options.extraArguments;
        m_client.reset();
        if (core::Status started = m_agent.start(agentOptions); !started)
            return started;
        m_client = std::make_unique<core::AgentClient>(m_agent.endpoint(), m_agent.token());
        return core::Status::success();
    }

    // Stops the agent (SIGTERM, SIGKILL after 8 s) and keeps its folders.
    void stop()
    {
        m_client.reset();
        m_agent.stop();
    }

    // Checks that the running agent has reaped every worker that exited (no zombie child:
    // a zombie has no command line, and once its parent is gone init reaps it, so this is
    // the moment to look), then stops the agent and waits until no process names the
    // fixture's folder.
    core::Status stopAndCheckNothingLeft(int timeoutMs = 15'000)
    {
        const qint64 agentPid = m_agent.processId(); // 0 when it is not running
        const auto unreaped = [agentPid] {
            QStringList zombies;
            if (agentPid > 0)
                for (const QString &child : childProcesses(agentPid))
                    if (child.endsWith(QLatin1String(": Z")))
                        zombies << child;
            return zombies;
        };
        // A worker that has just exited is reaped within the agent's next poll.
        if (!QTest::qWaitFor([&] { return unreaped().isEmpty(); }, timeLimit(5'000))) {
            const QStringList zombies = unreaped();
            stop();
            return core::Status::failure(
                QStringLiteral("the agent left exited workers unreaped (zombies):\n") + zombies.join('\n'));
        }
        stop();
        const auto left = [this] { return processesMentioning(m_tmp.path()); };
        if (!QTest::qWaitFor([&] { return left().isEmpty(); }, timeLimit(timeoutMs)))
            return core::Status::failure(QStringLiteral("processes left behind:\n") + left().join('\n'));
        return core::Status::success();
    }

    QString path(const QString &name) const { return m_tmp.filePath(name); }
    QString folder() const { return m_tmp.path(); }
    QString dataDir() const { return path(QStringLiteral("data")); }
    QString stateDir() const { return path(m_stateName); }
    // What the agent wrote to its log so far (all its starts).
    QString log() const
    {
        QFile file(m_agent.logFile());
        return file.open(QIODevice::ReadOnly) ? QString::fromLocal8Bit(file.readAll()) : QString();
    }
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
    QString m_stateName = QStringLiteral("state");
    core::LocalAgent m_agent;
    std::unique_ptr<core::AgentClient> m_client;
};

} // namespace scalelab::test
