// The node agent as a process (issue 4): a run whose ranks sit on two agents, resuming a
// stream mid-run, an agent killed with SIGKILL and started again, token and TLS
// (mutual too) refusals, the bad-input matrix, exit classification through real
// processes, utilization samples, fetching CIFAR-10 from a mirror, and checkpoints sent
// from one agent to another (and the writes an agent refuses). The agent's pure rules are
// tst_agent_rules'. After every test no process it started is left, and no agent held an
// exited worker unreaped.
#include "agent_client.h"
#include "agent_fixture.h"
#include "agent_grpc.h"
#include "checkpoint_copy.h"
#include "cifar10.h"
#include "study_runner.h"
#include "test_support.h"
#include "verify_ok.h"
#include "worker_channel.h"

#include <QCryptographicHash>
#include <QElapsedTimer>
#include <QProcess>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include <grpcpp/grpcpp.h>

#include <csignal>
#include <set>
#include <sys/wait.h>
#include <thread>

using namespace scalelab;
using namespace scalelab::core;

namespace {

struct Watched {
    std::vector<v1::RunEvent> events; // heartbeats left out
    grpc::Status status;
};

// Reads a run's stream from `from`; stops early (cancelling) once `stopAfter` events
// arrived, when it is > 0.
Watched watchRun(AgentClient &client, const std::string &runId, qint64 from, std::size_t stopAfter = 0)
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

using test::runRequest;
using test::writeFile;

// One file of a hand-made checkpoint: its name, contents, and the sum announced for it.
struct FakeFile {
    std::string name;
    QByteArray bytes;
    std::string sha256; // empty = the true sum
};

// A WriteCheckpoint stream for `files`: the manifest first, then 1 MiB chunks.
std::vector<v1::CheckpointChunk> checkpointChunks(
    const std::string &runId, int epoch, const std::vector<FakeFile> &files)
{
    std::vector<v1::CheckpointChunk> chunks(1);
    auto *manifest = chunks[0].mutable_manifest();
    manifest->set_run_id(runId);
    manifest->set_epoch(epoch);
    for (const auto &f : files) {
        auto *entry = manifest->add_files();
        entry->set_name(f.name);
        entry->set_size(f.bytes.size());
        entry->set_sha256(f.sha256.empty()
                ? QCryptographicHash::hash(f.bytes, QCryptographicHash::Sha256).toHex().toStdString()
                : f.sha256);
        for (qsizetype offset = 0; offset < f.bytes.size(); offset += 1 << 20) {
            v1::CheckpointChunk chunk;
            chunk.set_file(f.name);
            chunk.set_offset(offset);
            const QByteArray piece = f.bytes.mid(offset, 1 << 20);
            chunk.set_data(piece.constData(), std::size_t(piece.size()));
            chunks.push_back(chunk);
        }
    }
    return chunks;
}

grpc::Status writeCheckpoint(AgentClient &client, const std::vector<v1::CheckpointChunk> &chunks,
    v1::WriteCheckpointResponse *response = nullptr)
{
    grpc::ClientContext context;
    client.connection().prepare(&context, 30'000);
    v1::WriteCheckpointResponse ignored;
    auto writer = client.connection().stub->WriteCheckpoint(&context, response ? response : &ignored);
    for (const auto &chunk : chunks)
        if (!writer->Write(chunk))
            break; // the agent already answered
    writer->WritesDone();
    return writer->Finish();
}

// Every file of a committed checkpoint folder and its sha256, MANIFEST included.
QMap<QString, QByteArray> folderSums(const QString &dir)
{
    QMap<QString, QByteArray> sums;
    for (const QString &name : QDir(dir).entryList(QDir::Files | QDir::Hidden)) {
        QFile f(dir + u'/' + name);
        if (f.open(QIODevice::ReadOnly))
            sums.insert(name, QCryptographicHash::hash(f.readAll(), QCryptographicHash::Sha256).toHex());
    }
    return sums;
}

QString lastStateName(const std::vector<v1::RunEvent> &events)
{
    for (auto it = events.rbegin(); it != events.rend(); ++it)
        if (it->has_state())
            return QString::fromStdString(v1::RunState_Name(it->state().state()));
    return {};
}

} // namespace

class TestAgent : public QObject {
    Q_OBJECT
private:
    QTemporaryDir m_tmp; // the TLS material, and every agent's folder (test::AgentFixture(m_tmp.path()))

    QString path(const QString &name) const { return m_tmp.filePath(name); }

    // An agent with the synthetic set "syn" in its data folder and `extra` on its command line.
    static test::AgentFixtureOptions withSyn(const QStringList &extra = {})
    {
        test::AgentFixtureOptions options;
        options.syntheticSet = QStringLiteral("syn");
        options.trainImages = 200;
        options.testImages = 40;
        options.seed = 7;
        options.extraArguments = extra;
        return options;
    }

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_tmp.isValid());

        // TLS material for this run only: a CA, a server certificate for localhost and
        // 127.0.0.1, a client certificate, and a second CA nobody trusts.
        const QString problem
            = test::makeTestCertificates(m_tmp.path(), { QStringLiteral("ca"), QStringLiteral("other-ca") },
                { QStringLiteral("server"), QStringLiteral("client") });
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
    }

    void cleanup()
    {
        // No process of this test is left by command line (each test's agents are checked
        // for unreaped workers too, by stopAndCheckNothingLeft()).
        QTRY_VERIFY_WITH_TIMEOUT(test::processesMentioning(m_tmp.path()).isEmpty(), 15000);
        QVERIFY2(test::processesMentioning(m_tmp.path()).isEmpty(),
            qPrintable(test::processesMentioning(m_tmp.path()).join(QLatin1Char('\n'))));
    }

    // Ranks 0-1 on one agent, 2-3 on another, one c10d group over loopback.
    void runAcrossTwoAgentsSucceeds()
    {
        QElapsedTimer timer;
        timer.start();
        test::AgentFixture first(m_tmp.path()), second(m_tmp.path());
        VERIFY_OK(first.start(withSyn()));
        VERIFY_OK(second.start(withSyn()));
        QVERIFY(first.agent().processId() > 0 && second.agent().processId() > 0);
        AgentClient &a = first.client();
        AgentClient &b = second.client();

        v1::StartWorkersResponse onA, onB, again;
        auto r = a.startWorkers(runRequest("multi-1", 1, 4, { 0, 1 }), &onA);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        // Rank 0's agent picked the rendezvous; the other agent is told it.
        QCOMPARE(onA.rendezvous().host(), std::string("127.0.0.1"));
        QVERIFY(onA.rendezvous().port() > 0);
        auto second_request = runRequest("multi-1", 1, 4, { 2, 3 });
        *second_request.mutable_rendezvous() = onA.rendezvous();
        r = b.startWorkers(second_request, &onB);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(!onB.already_running());
        r = b.startWorkers(second_request, &again);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(again.already_running()); // idempotent on (run_id, attempt)
        QCOMPARE(onB.run().placements_size(), 2);
        QVERIFY(onB.run().placements(0).pid() > 0);

        for (auto *client : { &a, &b }) {
            const auto watched = watchRun(*client, "multi-1", 1);
            QVERIFY2(watched.status.ok(), watched.status.error_message().c_str());
            QCOMPARE(lastStateName(watched.events), QStringLiteral("SUCCEEDED"));
            std::set<int> exited;
            int worldSize = 0;
            bool running = false;
            for (const auto &e : watched.events) {
                if (e.has_started())
                    worldSize = e.started().world_size();
                running = running || (e.has_state() && e.state().state() == v1::RUNNING);
                if (e.has_rank_exited()) {
                    QCOMPARE(e.rank_exited().kind(), v1::EXIT_SUCCEEDED);
                    exited.insert(e.rank_exited().rank());
                }
            }
            QVERIFY(running);
            QCOMPARE(worldSize, client == &a ? 4 : 0); // rank 0 reports for the run
            QCOMPARE(exited, client == &a ? (std::set<int> { 0, 1 }) : (std::set<int> { 2, 3 }));
        }
        VERIFY_OK(first.stopAndCheckNothingLeft());
        VERIFY_OK(second.stopAndCheckNothingLeft());
        qInfo("two agents, four ranks: %.1f s", timer.elapsed() / 1000.0);
    }

    void reconnectMidRunIsGapFreeAndDuplicateFree()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        AgentClient &client = agent.client();
        v1::StartWorkersResponse started;
        auto request = runRequest("resume-1", 3, 1, { 0 });
        request.mutable_spec()->set_batch_size(10); // 20 steps per epoch
        auto r = client.startWorkers(request, &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));

        // A console reads a few events, loses the connection mid-run, and comes back
        // asking for the event after the last one it saw.
        const auto before = watchRun(client, "resume-1", 1, 8);
        QCOMPARE(before.status.error_code(), grpc::StatusCode::CANCELLED);
        QCOMPARE(before.events.size(), std::size_t(8));
        QVERIFY2(lastStateName(before.events) != QStringLiteral("SUCCEEDED"),
            "the run ended before the reconnect");
        const auto after = watchRun(client, "resume-1", before.events.back().seq() + 1);
        QVERIFY2(after.status.ok(), after.status.error_message().c_str());
        std::vector<v1::RunEvent> joined = before.events;
        joined.insert(joined.end(), after.events.begin(), after.events.end());
        for (std::size_t i = 0; i < joined.size(); ++i)
            QCOMPARE(joined[i].seq(), qint64(i + 1)); // no gap, no duplicate
        QCOMPARE(lastStateName(joined), QStringLiteral("SUCCEEDED"));
        // The same as a full replay from disk.
        const auto replay = watchRun(client, "resume-1", 0);
        QCOMPARE(replay.events.size(), joined.size());
        QCOMPARE(replay.events.back().seq(), joined.back().seq());
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void killedAgentRestartsWithRunHistory()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        const qint64 pid = agent.agent().processId();
        {
            AgentClient client(agent.address(), agent.token());
            v1::StartWorkersResponse started;
            auto r = client.startWorkers(runRequest("done-1", 1, 1, { 0 }), &started);
            QVERIFY2(r.ok(), qPrintable(r.error()));
            QCOMPARE(lastStateName(watchRun(client, "done-1", 1).events), QStringLiteral("SUCCEEDED"));

            auto request = runRequest("long-1", 1000, 1, { 0 });
            request.mutable_spec()->set_max_train_images(50);
            r = client.startWorkers(request, &started);
            QVERIFY2(r.ok(), qPrintable(r.error()));
            // Read until a checkpoint is committed.
            bool checkpointed = false;
            for (int tries = 0; tries < 60 && !checkpointed; ++tries) {
                const auto watched = watchRun(client, "long-1", 1, std::size_t(10 + tries * 5));
                for (const auto &e : watched.events)
                    checkpointed = checkpointed || e.has_checkpoint();
            }
            QVERIFY(checkpointed);
        }
        // Killed by hand, not stopped by the fixture: a death without shutdown is the test.
        QCOMPARE(::kill(pid_t(pid), SIGKILL), 0);
        // The workers die with their agent (PR_SET_PDEATHSIG), even on SIGKILL.
        QTRY_VERIFY_WITH_TIMEOUT(
            test::processesMentioning(QStringLiteral("scalelab-worker train --data-dir ") + agent.dataDir())
                .isEmpty(),
            10000);
        VERIFY_OK(agent.stopAndCheckNothingLeft()); // reaps the killed agent

        VERIFY_OK(agent.start(withSyn())); // again, on the same state
        AgentClient client(agent.address(), agent.token());
        v1::ListRunsResponse list;
        auto r = client.listRuns({}, &list);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QCOMPARE(list.runs_size(), 2);
        for (const auto &run : list.runs()) {
            if (run.run_id() == "done-1") {
                QCOMPARE(run.state(), v1::SUCCEEDED);
                QVERIFY(!run.interrupted());
            } else {
                QCOMPARE(run.run_id(), std::string("long-1"));
                QCOMPARE(run.state(), v1::FAILED);
                QVERIFY(run.interrupted());
                QVERIFY2(QString::fromStdString(run.message()).contains(QStringLiteral("interrupted")),
                    run.message().c_str());
            }
        }
        // The log is served on: gap-free, ending with the interruption.
        const auto watched = watchRun(client, "long-1", 1);
        QVERIFY2(watched.status.ok(), watched.status.error_message().c_str());
        for (std::size_t i = 0; i < watched.events.size(); ++i)
            QCOMPARE(watched.events[i].seq(), qint64(i + 1));
        QVERIFY(watched.events.back().has_state());
        QVERIFY(watched.events.back().state().interrupted());
        // Checkpoints intact: every file matches its sha256 in the manifest.
        const QDir checkpoints(agent.stateDir() + QStringLiteral("/runs/long-1/checkpoints"));
        const auto committed = checkpoints.entryList({ QStringLiteral("epoch-*") }, QDir::Dirs);
        QVERIFY(!committed.isEmpty());
        QFile manifest(checkpoints.filePath(committed.last() + QStringLiteral("/MANIFEST")));
        QVERIFY(manifest.open(QIODevice::ReadOnly));
        int verified = 0;
        for (const QByteArray &line : manifest.readAll().split('\n')) {
            if (line.isEmpty())
                continue;
            const QByteArray sum = line.left(64);
            QFile file(checkpoints.filePath(committed.last() + u'/' + QString::fromUtf8(line.mid(66))));
            QVERIFY(file.open(QIODevice::ReadOnly));
            QCOMPARE(QCryptographicHash::hash(file.readAll(), QCryptographicHash::Sha256).toHex(), sum);
            ++verified;
        }
        QVERIFY(verified >= 3);
        // The describe call agrees, and the killed agent's first start is gone for good.
        // (It keeps in memory only the run it closed; the finished one is read back from disk.)
        v1::DescribeResponse inventory;
        QVERIFY(client.describe(&inventory).ok());
        QCOMPARE(inventory.runs_recorded(), qint64(2));
        QCOMPARE(inventory.runs_size(), 1);
        QCOMPARE(inventory.runs(0).run_id(), std::string("long-1"));
        QVERIFY(!QFileInfo::exists(QStringLiteral("/proc/%1").arg(pid)));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
        // Closing it wrote its outcome: the next start reads that, not the log, and the
        // run is what it was (FAILED, interrupted), not "interrupted" a second time.
        QVERIFY(QFileInfo::exists(agent.stateDir() + QStringLiteral("/runs/long-1/1/outcome.json")));
        VERIFY_OK(agent.start(withSyn()));
        AgentClient thirdClient(agent.address(), agent.token());
        QVERIFY(thirdClient.describe(&inventory).ok());
        QCOMPARE(inventory.runs_size(), 0);
        QCOMPARE(inventory.runs_recorded(), qint64(2));
        QList<v1::RunInfo> listed;
        QVERIFY(thirdClient.listAllRuns(&listed).ok());
        QCOMPARE(listed.size(), 2);
        QCOMPARE(listed.at(0).run_id(), std::string("done-1"));
        QCOMPARE(listed.at(1).state(), v1::FAILED);
        QVERIFY(listed.at(1).interrupted());
        QCOMPARE(listed.at(1).last_seq(), watched.events.back().seq());
        QVERIFY2(agent.log().contains(QLatin1String("; 0 closed as FAILED (interrupted")),
            qPrintable(agent.log().right(600)));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void shutdownMarksActiveRunsInterrupted()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        {
            AgentClient client(agent.address(), agent.token());
            v1::StartWorkersResponse started;
            auto r = client.startWorkers(runRequest("cut-1", 1000, 1, { 0 }), &started);
            QVERIFY2(r.ok(), qPrintable(r.error()));
            QTRY_VERIFY_WITH_TIMEOUT(
                [&] {
                    v1::ListRunsResponse list;
                    return client.listRuns({}, &list).ok() && list.runs(0).state() == v1::RUNNING;
                }(),
                20000);
        }
        VERIFY_OK(agent.stopAndCheckNothingLeft()); // SIGTERM: the agent stops its runs before it exits
        VERIFY_OK(agent.start(withSyn()));
        AgentClient client(agent.address(), agent.token());
        v1::ListRunsResponse list;
        QVERIFY(client.listRuns({}, &list).ok());
        QCOMPARE(list.runs_size(), 1);
        QCOMPARE(list.runs(0).state(), v1::FAILED);
        QVERIFY(list.runs(0).interrupted());
        QVERIFY2(QString::fromStdString(list.runs(0).message()).contains(QStringLiteral("agent shut down")),
            list.runs(0).message().c_str());
        QCOMPARE(list.runs(0).placements(0).exit().kind(), v1::EXIT_STOPPED);
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // An agent keeps only its active runs and the finished ones used last in memory
    // (--finished-runs-in-memory): every other run is on disk and read back when asked
    // for, by ListRuns (a page at a time, in run id order), WatchRun (the whole log) and
    // StartWorkers (a repeated start is still recognised), before and after a restart.
    void finishedRunsAreReadBackFromDisk()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--finished-runs-in-memory"), QStringLiteral("2") })));
        QVERIFY(agent.agent().processId() > 0);
        AgentClient client(agent.address(), agent.token());
        const std::vector<std::string> ids { "p-1", "p-2", "p-3", "p-4", "p-5" };
        for (const auto &id : ids) {
            v1::StartWorkersResponse started;
            auto r = client.startWorkers(runRequest(id, 1, 1, { 0 }), &started);
            QVERIFY2(r.ok(), qPrintable(r.error()));
            QCOMPARE(lastStateName(watchRun(client, id, 1).events), QStringLiteral("SUCCEEDED"));
        }
        v1::DescribeResponse inventory;
        QVERIFY(client.describe(&inventory).ok());
        QCOMPARE(inventory.runs_recorded(), qint64(5));
        QVERIFY2(inventory.runs_size() <= 2, qPrintable(QString::number(inventory.runs_size())));
        // The BLAS kernel the workers trained with: the agent loads no BLAS of its own.
        QVERIFY(inventory.software().count("blas"));
        QVERIFY2(
            QString::fromStdString(inventory.software().at("blas")).contains(QStringLiteral("; kernel ")),
            inventory.software().at("blas").c_str());

        const auto listAll = [&](int pageSize, int *pages) {
            std::vector<v1::RunInfo> all;
            v1::ListRunsRequest request;
            request.set_page_size(pageSize);
            *pages = 0;
            for (;;) {
                v1::ListRunsResponse page;
                if (auto r = client.listRuns(request, &page); !r.ok()) {
                    qWarning("ListRuns: %s", qPrintable(r.error()));
                    return std::vector<v1::RunInfo> {};
                }
                ++*pages;
                if (page.total() != 5)
                    qWarning("ListRuns said total %lld", qlonglong(page.total()));
                all.insert(all.end(), page.runs().begin(), page.runs().end());
                if (page.next_page_token().empty())
                    return all;
                request.set_page_token(page.next_page_token());
            }
        };
        int pages = 0;
        auto all = listAll(2, &pages);
        QCOMPARE(pages, 3); // 2 + 2 + 1
        QCOMPARE(int(all.size()), 5);
        for (std::size_t i = 0; i < ids.size(); ++i) {
            QCOMPARE(all[i].run_id(), ids[i]);
            QCOMPARE(all[i].state(), v1::SUCCEEDED);
            QVERIFY(all[i].ended_unix_ms() >= all[i].started_unix_ms() && all[i].started_unix_ms() > 0);
            QVERIFY(QFileInfo::exists(agent.stateDir()
                + QStringLiteral("/runs/%1/1/outcome.json").arg(QString::fromStdString(ids[i]))));
        }
        // The first run left memory long ago: its whole log is served from disk.
        const auto replay = watchRun(client, "p-1", 1);
        QVERIFY2(replay.status.ok(), replay.status.error_message().c_str());
        QCOMPARE(lastStateName(replay.events), QStringLiteral("SUCCEEDED"));
        for (std::size_t i = 0; i < replay.events.size(); ++i)
            QCOMPARE(replay.events[i].seq(), qint64(i + 1));
        // A repeated start of a run read back is recognised, a changed one refused.
        v1::StartWorkersResponse again;
        QVERIFY(client.startWorkers(runRequest("p-2", 1, 1, { 0 }), &again).ok());
        QVERIFY(again.already_running());
        QCOMPARE(again.run().state(), v1::SUCCEEDED);
        QCOMPARE(
            client.startWorkers(runRequest("p-3", 2, 1, { 0 }), &again).code(), Status::Code::AlreadyExists);
        // Paging input is checked by name.
        v1::ListRunsRequest bad;
        bad.set_page_size(5000);
        v1::ListRunsResponse page;
        auto r = client.listRuns(bad, &page);
        QCOMPARE(r.code(), Status::Code::InvalidArgument);
        QVERIFY2(r.error().contains(QLatin1String("page_size")), qPrintable(r.error()));
        bad.set_page_size(0);
        bad.set_page_token("../etc");
        r = client.listRuns(bad, &page);
        QCOMPARE(r.code(), Status::Code::InvalidArgument);
        QVERIFY2(r.error().contains(QLatin1String("page_token")), qPrintable(r.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());

        // A restarted agent reads the outcomes, not the logs, and lists the same runs.
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--finished-runs-in-memory"), QStringLiteral("2") })));
        AgentClient second(agent.address(), agent.token());
        QVERIFY(second.describe(&inventory).ok());
        QCOMPARE(inventory.runs_recorded(), qint64(5));
        QCOMPARE(inventory.runs_size(), 0);
        QList<v1::RunInfo> listed;
        QVERIFY(second.listAllRuns(&listed).ok());
        QCOMPARE(listed.size(), 5);
        for (const auto &run : listed)
            QCOMPARE(run.state(), v1::SUCCEEDED);
        QCOMPARE(lastStateName(watchRun(second, "p-5", 1).events), QStringLiteral("SUCCEEDED"));
        // What a user sees: `scalelab-cli runs`, every run, and where a limited listing stops.
        QProcess cli;
        QProcessEnvironment environment = QProcessEnvironment::systemEnvironment();
        environment.insert(QStringLiteral("SCALELAB_TOKEN"), agent.token());
        cli.setProcessEnvironment(environment);
        cli.start(test::binary("scalelab-cli"),
            { QStringLiteral("runs"), QStringLiteral("--agent"), agent.address() });
        QVERIFY(cli.waitForFinished(30'000));
        const QString listing = QString::fromLocal8Bit(cli.readAllStandardOutput());
        QCOMPARE(cli.exitCode(), 0);
        QVERIFY2(listing.contains(QLatin1String("p-1  attempt 1  SUCCEEDED")), qPrintable(listing));
        QVERIFY2(listing.contains(QLatin1String("5 of 5 run(s) recorded")), qPrintable(listing));
        cli.start(test::binary("scalelab-cli"),
            { QStringLiteral("runs"), QStringLiteral("--agent"), agent.address(), QStringLiteral("--after"),
                QStringLiteral("p-3"), QStringLiteral("--limit"), QStringLiteral("1"),
                QStringLiteral("--json") });
        QVERIFY(cli.waitForFinished(30'000));
        const QString json = QString::fromLocal8Bit(cli.readAllStandardOutput());
        QVERIFY2(json.contains(QLatin1String("\"runId\":\"p-4\"")) && !json.contains(QLatin1String("\"p-5\""))
                && json.contains(QLatin1String("\"nextPageToken\":\"p-4\"")),
            qPrintable(json));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // The trainer's checkpoint read from the agent that wrote it, kept by the console,
    // and written to another agent: the same bytes everywhere, and an attempt started on
    // the second agent resumes from it.
    void checkpointTravelsBetweenAgents()
    {
        // ckpt-a keeps every checkpoint of a finished run (not only the final one) to serve both.
        test::AgentFixture first(m_tmp.path()), second(m_tmp.path());
        VERIFY_OK(first.start(withSyn({ QStringLiteral("--finished-checkpoints"), QStringLiteral("all") })));
        VERIFY_OK(second.start(withSyn()));
        AgentClient &a = first.client();
        AgentClient &b = second.client();
        v1::StartWorkersResponse started;
        auto r = a.startWorkers(runRequest("travel-1", 2, 1, { 0 }), &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QCOMPARE(lastStateName(watchRun(a, "travel-1", 1).events), QStringLiteral("SUCCEEDED"));
        const QString onA = first.stateDir() + QStringLiteral("/runs/travel-1/checkpoints/epoch-0002");
        QCOMPARE(folderSums(onA).size(), 4); // model, optimizer, state, MANIFEST

        // Read: the newest (epoch 0) and one by number, verified and committed.
        CheckpointTransfer fromA(&a);
        CheckpointCopy newest, older;
        r = fromA.download(QStringLiteral("travel-1"), 0, path(QStringLiteral("ckpt-copies")), 2, &newest);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QCOMPARE(newest.epoch, 2);
        QCOMPARE(newest.dir, path(QStringLiteral("ckpt-copies/travel-1/epoch-0002")));
        QCOMPARE(folderSums(newest.dir), folderSums(onA)); // MANIFEST included, byte for byte
        QVERIFY(newest.bytes > 10'000'000); // the seed CNN's weights and momentum
        r = fromA.download(QStringLiteral("travel-1"), 1, path(QStringLiteral("ckpt-copies")), 2, &older);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QCOMPARE(older.epoch, 1);
        QCOMPARE(QDir(path(QStringLiteral("ckpt-copies/travel-1")))
                     .entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
            QStringList({ QStringLiteral("epoch-0001"), QStringLiteral("epoch-0002") })); // no temporary left
        r = fromA.download(QStringLiteral("travel-1"), 7, path(QStringLiteral("ckpt-copies")), 2, &older);
        QCOMPARE(r.code(), Status::Code::NotFound);
        QVERIFY2(r.error().contains(QLatin1String("epochs held here: 1, 2")), qPrintable(r.error()));

        // Write to the other agent, which never ran travel-1.
        CheckpointTransfer toB(&b);
        v1::WriteCheckpointResponse written;
        r = toB.upload(QStringLiteral("travel-1"), newest.dir, &written);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        const QString onB = second.stateDir() + QStringLiteral("/runs/travel-1/checkpoints/epoch-0002");
        QCOMPARE(QString::fromStdString(written.path()), onB);
        QCOMPARE(written.epoch(), 2);
        QCOMPARE(written.bytes(), newest.bytes);
        QCOMPARE(folderSums(onB), folderSums(onA));
        QCOMPARE(QDir(second.stateDir() + QStringLiteral("/runs/travel-1/checkpoints"))
                     .entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
            QStringList({ QStringLiteral("epoch-0002") }));
        // Read back from there: the round trip changes nothing.
        CheckpointTransfer fromB(&b);
        CheckpointCopy back;
        r = fromB.download(QStringLiteral("travel-1"), 0, path(QStringLiteral("ckpt-back")), 1, &back);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QCOMPARE(folderSums(back.dir), folderSums(onA));

        // Attempt 2 there resumes after epoch 2 and trains only epoch 3.
        auto again = runRequest("travel-1", 3, 1, { 0 });
        again.set_attempt(2);
        r = b.startWorkers(again, &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        const auto watched = watchRun(b, "travel-1", 1);
        QCOMPARE(lastStateName(watched.events), QStringLiteral("SUCCEEDED"));
        int resumedFrom = -1;
        std::set<int> epochs;
        for (const auto &e : watched.events) {
            if (e.has_started())
                resumedFrom = e.started().resumed_from_epoch();
            if (e.has_epoch())
                epochs.insert(e.epoch().epoch());
        }
        QCOMPARE(resumedFrom, 2);
        QCOMPARE(epochs, std::set<int> { 3 });
        VERIFY_OK(first.stopAndCheckNothingLeft());
        VERIFY_OK(second.stopAndCheckNothingLeft());
    }

    // What WriteCheckpoint must refuse, each with a status that says why, leaving
    // nothing behind; and what ReadCheckpoint answers for a checkpoint it does not have.
    void checkpointWritesAreRefusedSafely()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        AgentClient &client = agent.client();
        const QString runs = agent.stateDir() + QStringLiteral("/runs");
        QByteArray big(3 * (1 << 20) + 17, '\0'); // several chunks
        for (qsizetype i = 0; i < big.size(); ++i)
            big[i] = char(i * 7 % 251);
        const std::vector<FakeFile> good
            = { { "model.pt", big, {} }, { "empty.pt", {}, {} }, { "state.pt", "state", {} } };

        // A good one is accepted and reads back the same, in chunks of at most 1 MiB.
        v1::WriteCheckpointResponse written;
        auto status = writeCheckpoint(client, checkpointChunks("fresh-1", 3, good), &written);
        QVERIFY2(status.ok(), status.error_message().c_str());
        QCOMPARE(written.bytes(), qint64(big.size() + 5));
        {
            grpc::ClientContext context;
            client.connection().prepare(&context, 30'000);
            v1::ReadCheckpointRequest request;
            request.set_run_id("fresh-1");
            auto reader = client.connection().stub->ReadCheckpoint(&context, request);
            v1::CheckpointChunk chunk;
            QMap<QString, QByteArray> received;
            int messages = 0;
            while (reader->Read(&chunk)) {
                if (messages++ == 0) {
                    QCOMPARE(chunk.manifest().epoch(), 3);
                    QCOMPARE(chunk.manifest().files_size(), 3);
                }
                QVERIFY(chunk.data().size() <= std::size_t(1 << 20));
                received[QString::fromStdString(chunk.file())].append(
                    chunk.data().data(), chunk.data().size());
            }
            QVERIFY(reader->Finish().ok());
            QCOMPARE(received.value(QStringLiteral("model.pt")), big);
            QCOMPARE(received.value(QStringLiteral("state.pt")), QByteArray("state"));
            QCOMPARE(messages, 1 + 4 + 1); // manifest, model.pt in 4 chunks, state.pt
        }

        struct Refusal {
            const char *what;
            std::vector<v1::CheckpointChunk> chunks;
            grpc::StatusCode code;
            const char *says;
        };
        std::vector<Refusal> refusals;
        std::vector<FakeFile> wrongSum = good;
        wrongSum[0].sha256 = std::string(64, 'a');
        refusals.push_back({ "wrong sum", checkpointChunks("fresh-1", 4, wrongSum),
            grpc::StatusCode::DATA_LOSS, "does not match its sha256" });
        refusals.push_back(
            { "'..' as a file name", checkpointChunks("fresh-1", 4, { { "../../escaped", "x", {} } }),
                grpc::StatusCode::INVALID_ARGUMENT, "'../../escaped'" });
        refusals.push_back({ "'..' alone", checkpointChunks("fresh-1", 4, { { "..", "x", {} } }),
            grpc::StatusCode::INVALID_ARGUMENT, "not starting with '.'" });
        refusals.push_back(
            { "MANIFEST sent as a file", checkpointChunks("fresh-1", 4, { { "MANIFEST", "x", {} } }),
                grpc::StatusCode::INVALID_ARGUMENT, "not MANIFEST" });
        refusals.push_back({ "'..' in the run id", checkpointChunks("../fresh-1", 4, good),
            grpc::StatusCode::INVALID_ARGUMENT, "manifest.run_id" });
        refusals.push_back({ "epoch 0", checkpointChunks("fresh-1", 0, good),
            grpc::StatusCode::INVALID_ARGUMENT, "manifest.epoch" });
        auto truncated = checkpointChunks("fresh-1", 4, good);
        truncated.erase(truncated.begin() + 2); // the second chunk of model.pt
        refusals.push_back({ "a chunk missing", truncated, grpc::StatusCode::INVALID_ARGUMENT, "offset" });
        auto cut = checkpointChunks("fresh-1", 4, good);
        cut.pop_back(); // state.pt never arrives
        refusals.push_back({ "a file missing", cut, grpc::StatusCode::INVALID_ARGUMENT, "incomplete" });
        auto stranger = checkpointChunks("fresh-1", 4, good);
        stranger.back().set_file("other.pt");
        refusals.push_back({ "a file not in the manifest", stranger, grpc::StatusCode::INVALID_ARGUMENT,
            "not in the manifest" });
        auto noManifest = checkpointChunks("fresh-1", 4, good);
        noManifest.erase(noManifest.begin());
        refusals.push_back({ "no manifest", noManifest, grpc::StatusCode::INVALID_ARGUMENT, "manifest" });
        for (const auto &refusal : refusals) {
            status = writeCheckpoint(client, refusal.chunks);
            QVERIFY2(status.error_code() == refusal.code,
                qPrintable(QStringLiteral("%1: %2 %3")
                               .arg(QLatin1String(refusal.what))
                               .arg(status.error_code())
                               .arg(QString::fromStdString(status.error_message()))));
            QVERIFY2(QString::fromStdString(status.error_message()).contains(QLatin1String(refusal.says)),
                qPrintable(QLatin1String(refusal.what) + QStringLiteral(": ")
                    + QString::fromStdString(status.error_message())));
        }
        // Nothing of them was kept: no epoch 4, no temporary folder, nothing outside.
        QCOMPARE(QDir(runs + QStringLiteral("/fresh-1/checkpoints"))
                     .entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
            QStringList({ QStringLiteral("epoch-0003") }));
        QCOMPARE(QDir(runs).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
            QStringList({ QStringLiteral("fresh-1") }));
        QVERIFY(!QFileInfo::exists(agent.stateDir() + QStringLiteral("/escaped")));

        // Without the token: refused like every other call.
        AgentClient stranger2(agent.address(), QString());
        status = writeCheckpoint(stranger2, checkpointChunks("fresh-1", 5, good));
        QCOMPARE(status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
        CheckpointCopy copy;
        auto r = CheckpointTransfer(&stranger2)
                     .download(QStringLiteral("fresh-1"), 0, path(QStringLiteral("ckpt-refused")), 2, &copy);
        QCOMPARE(r.code(), Status::Code::Unauthenticated);
        QVERIFY(!QFileInfo::exists(path(QStringLiteral("ckpt-refused/fresh-1/epoch-0003"))));
        r = CheckpointTransfer(&client).download(
            QStringLiteral("never-ran"), 0, path(QStringLiteral("ckpt-refused")), 2, &copy);
        QCOMPARE(r.code(), Status::Code::NotFound);

        // Into a run that is active here: refused until it has stopped; reading is fine.
        auto request = runRequest("busy-1", 1000, 1, { 0 });
        request.mutable_spec()->set_max_train_images(50);
        v1::StartWorkersResponse started;
        r = client.startWorkers(request, &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        status = writeCheckpoint(client, checkpointChunks("busy-1", 1, good));
        QCOMPARE(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
        QVERIFY2(
            QString::fromStdString(status.error_message()).contains(QLatin1String("is active on this agent")),
            status.error_message().c_str());
        QTRY_VERIFY_WITH_TIMEOUT(
            CheckpointTransfer(&client)
                .download(QStringLiteral("busy-1"), 0, path(QStringLiteral("ckpt-busy")), 2, &copy)
                .ok(),
            60'000);
        QVERIFY(copy.epoch >= 1);
        v1::StopRunResponse stopped;
        QVERIFY(client.stopRun(QStringLiteral("busy-1"), &stopped).ok());
        QCOMPARE(lastStateName(watchRun(client, "busy-1", 1).events), QStringLiteral("CANCELLED"));
        status = writeCheckpoint(client, checkpointChunks("busy-1", 999, good));
        QVERIFY2(status.ok(), status.error_message().c_str());
        QVERIFY(QFileInfo::exists(runs + QStringLiteral("/busy-1/checkpoints/epoch-0999/MANIFEST")));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void refusesNetworkAddressWithoutTokenAndTls_data()
    {
        QTest::addColumn<bool>("token");
        QTest::addColumn<bool>("tls");
        QTest::addColumn<QString>("message");
        QTest::newRow("neither") << false << false << "without a token and TLS";
        QTest::newRow("token only") << true << false << "without TLS";
        QTest::newRow("TLS only") << false << true << "without a token";
    }
    void refusesNetworkAddressWithoutTokenAndTls()
    {
        QFETCH(bool, token);
        QFETCH(bool, tls);
        QFETCH(QString, message);
        test::AgentFixture agent(m_tmp.path());
        test::AgentFixtureOptions options = withSyn();
        options.listen = QStringLiteral("0.0.0.0");
        options.withToken = token;
        if (tls)
            options.extraArguments = { QStringLiteral("--tls-cert"), path(QStringLiteral("server.pem")),
                QStringLiteral("--tls-key"), path(QStringLiteral("server.key")) };
        const Status started = agent.start(options);
        QVERIFY(!started);
        QVERIFY(agent.agent().refusedConfiguration());
        QVERIFY2(started.error().contains(message), qPrintable(started.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void tlsWithTokenOffLoopback()
    {
        test::AgentFixture agent(m_tmp.path());
        test::AgentFixtureOptions options
            = withSyn({ QStringLiteral("--tls-cert"), path(QStringLiteral("server.pem")),
                QStringLiteral("--tls-key"), path(QStringLiteral("server.key")) });
        options.listen = QStringLiteral("0.0.0.0");
        VERIFY_OK(agent.start(options));
        const QString endpoint = QStringLiteral("127.0.0.1:") + agent.address().section(u':', -1);
        const AgentTls trusted { path(QStringLiteral("ca.pem")), {}, {}, {} };

        AgentClient good(endpoint, agent.token(), trusted);
        v1::DescribeResponse inventory;
        auto r = good.describe(&inventory);
        QVERIFY2(r.ok(), qPrintable(r.error()));

        AgentClient wrongToken(endpoint, QStringLiteral("guess"), trusted);
        QCOMPARE(wrongToken.describe(&inventory).code(), Status::Code::Unauthenticated);
        AgentClient noToken(endpoint, QString(), trusted);
        QCOMPARE(noToken.describe(&inventory).code(), Status::Code::Unauthenticated);
        QTRY_VERIFY_WITH_TIMEOUT(agent.log().contains(QStringLiteral("wrong token")), 5000);
        QVERIFY(agent.log().contains(QStringLiteral("no token")));

        AgentClient plaintext(endpoint, agent.token(), AgentTls {});
        QCOMPARE(plaintext.describe(&inventory, 3000).code(), Status::Code::Unavailable);
        AgentClient untrusted(
            endpoint, agent.token(), AgentTls { path(QStringLiteral("other-ca.pem")), {}, {}, {} });
        QCOMPARE(untrusted.describe(&inventory, 3000).code(), Status::Code::Unavailable);
        AgentClient missingCa(
            endpoint, agent.token(), AgentTls { path(QStringLiteral("nope.pem")), {}, {}, {} });
        QVERIFY(missingCa.setup().error().contains(QStringLiteral("nope.pem")));
        QCOMPARE(missingCa.describe(&inventory).code(), Status::Code::FailedPrecondition);
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void mutualTlsNeedsClientCertificate()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--tls-cert"), path(QStringLiteral("server.pem")),
            QStringLiteral("--tls-key"), path(QStringLiteral("server.key")),
            QStringLiteral("--tls-client-ca"), path(QStringLiteral("ca.pem")) })));
        v1::DescribeResponse inventory;
        AgentClient anonymous(
            agent.address(), agent.token(), AgentTls { path(QStringLiteral("ca.pem")), {}, {}, {} });
        QCOMPARE(anonymous.describe(&inventory, 3000).code(), Status::Code::Unavailable);
        AgentClient known(agent.address(), agent.token(),
            AgentTls { path(QStringLiteral("ca.pem")), path(QStringLiteral("client.pem")),
                path(QStringLiteral("client.key")), {} });
        const auto r = known.describe(&inventory);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // The runner copies each committed checkpoint to the console over a channel of its
    // own; it must use the agent's own TLS settings (here a CA given for this agent alone,
    // none in the environment), not SCALELAB_TLS_* (issue 22's bug).
    void studyCopiesCheckpointsFromAnAgentWithItsOwnCa()
    {
        qunsetenv("SCALELAB_TLS_CA");
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--tls-cert"), path(QStringLiteral("server.pem")),
            QStringLiteral("--tls-key"), path(QStringLiteral("server.key")) })));
        const AgentEndpoint endpoint { QStringLiteral("tls-agent"), agent.address(), agent.token(),
            AgentTls { path(QStringLiteral("ca.pem")), {}, {}, {} } };

        v1::StudyPlan plan;
        plan.set_name("own-ca");
        plan.set_dataset("syn");
        plan.mutable_baseline()->set_skip(true);
        plan.mutable_grid()->add_workers(1);
        plan.mutable_grid()->add_batch_size(50);
        plan.mutable_grid()->add_epochs(3);
        plan.mutable_grid()->add_threads_per_worker(1);
        Journal journal;
        VERIFY_OK(journal.open(path(QStringLiteral("own-ca-study/journal.sqlite"))));
        StudyRunner runner(&journal);
        runner.setAgents({ endpoint });
        runner.setTickInterval(100);
        const auto createdStudy = runner.createStudy(plan);
        VERIFY_OK(createdStudy);
        const QString studyId = createdStudy.value();
        QSignalSpy finished(&runner, &StudyRunner::finished);
        QStringList messages;
        const QString copy = path(QStringLiteral("own-ca-study/checkpoints/%1-r01/epoch-0001").arg(studyId));
        QString copyProblem = QStringLiteral("never copied");
        v1::CheckpointManifest manifest;
        connect(&runner, &StudyRunner::message, this, [&](const QString &m) {
            messages << m;
            // Checked when it lands: a finished run's copies are removed.
            if (m.contains(QLatin1String("checkpoint of epoch 1 copied from agent tls-agent")))
                copyProblem = CheckpointTransfer::verifyCopy(copy, &manifest).error();
        });
        VERIFY_OK(runner.drive(studyId));
        QVERIFY2(QTest::qWaitFor([&] { return !finished.isEmpty(); }, test::endsWithin()),
            qPrintable(messages.join('\n')));
        QCOMPARE(finished.first().first().toString(), QStringLiteral("SUCCEEDED"));
        // The checkpoint of epoch 1 reached the console, verified, while epoch 2 trained.
        QCOMPARE(copyProblem, QString());
        QCOMPARE(manifest.epoch(), 1);
        QCOMPARE(manifest.files_size(), 3);
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void configFileAndEnvironmentAreRead()
    {
        // A value from the config file is used, checked, and its origin named.
        QVERIFY(
            writeFile(path(QStringLiteral("agent.conf")), "# test\nlog-level = debug\nheartbeat-ms = 5\n"));
        test::AgentFixture agent(m_tmp.path()); // started four times on the same state
        Status started
            = agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("agent.conf")) }));
        QVERIFY(!started);
        QVERIFY2(started.error().contains(QStringLiteral("--heartbeat-ms must be a whole number from 100"))
                && started.error().contains(QStringLiteral("agent.conf:3")),
            qPrintable(started.error()));
        // The command line wins over the file.
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("agent.conf")),
            QStringLiteral("--heartbeat-ms"), QStringLiteral("500") })));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
        // An unknown key names the file and line.
        QVERIFY(writeFile(path(QStringLiteral("bad.conf")), "port = 0\nlisen = 0.0.0.0\n"));
        started = agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("bad.conf")) }));
        QVERIFY(!started);
        QVERIFY2(started.error().contains(QStringLiteral("bad.conf:2: unknown option 'lisen'")),
            qPrintable(started.error()));
        // The environment wins over the file, and is named too.
        QVERIFY(writeFile(path(QStringLiteral("good.conf")), "heartbeat-ms = 1000\n"));
        qputenv("SCALELAB_AGENT_HEARTBEAT_MS", "5");
        started = agent.start(withSyn({ QStringLiteral("--config"), path(QStringLiteral("good.conf")) }));
        qunsetenv("SCALELAB_AGENT_HEARTBEAT_MS");
        QVERIFY(!started);
        QVERIFY2(started.error().contains(QStringLiteral("from SCALELAB_AGENT_HEARTBEAT_MS")),
            qPrintable(started.error()));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void badInputIsRefusedNamingTheField()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        AgentClient &client = agent.client();
        const auto invalid = Status::Code::InvalidArgument;
        const auto precondition = Status::Code::FailedPrecondition;
        struct Case {
            const char *name;
            Status::Code code;
            QString mention;
            std::function<void(v1::StartWorkersRequest &)> change;
        };
        const std::vector<Case> starts = {
            { "world size 0", invalid, QStringLiteral("world_size"), [](auto &r) { r.set_world_size(0); } },
            { "no ranks", invalid, QStringLiteral("ranks"), [](auto &r) { r.clear_ranks(); } },
            { "negative rank", invalid, QStringLiteral("ranks"), [](auto &r) { r.set_ranks(0, -1); } },
            { "rank twice", invalid, QStringLiteral("ranks"),
                [](auto &r) { r.set_world_size(2), r.add_ranks(0); } },
            { "path-like run id", invalid, QStringLiteral("run_id"), [](auto &r) { r.set_run_id("../x"); } },
            { "absolute run id", invalid, QStringLiteral("run_id"), [](auto &r) { r.set_run_id("/tmp/x"); } },
            { "negative batch", invalid, QStringLiteral("spec.batch_size"),
                [](auto &r) { r.mutable_spec()->set_batch_size(-4); } },
            { "negative threads", invalid, QStringLiteral("spec.threads_per_worker"),
                [](auto &r) { r.mutable_spec()->set_threads_per_worker(-1); } },
            { "negative max images", invalid, QStringLiteral("spec.max_train_images"),
                [](auto &r) { r.mutable_spec()->set_max_train_images(-10); } },
            { "more GPUs than the node has", precondition, QStringLiteral("spec.gpus_per_worker"),
                [](auto &r) { r.mutable_spec()->set_gpus_per_worker(2); } },
            { "fraction of GPUs above one", invalid, QStringLiteral("spec.gpus_per_worker"),
                [](auto &r) { r.mutable_spec()->set_gpus_per_worker(1.5); } },
            { "unknown data set", precondition, QStringLiteral("spec.dataset"),
                [](auto &r) { r.mutable_spec()->set_dataset("imagenet"); } },
            { "path-like data set", invalid, QStringLiteral("spec.dataset"),
                [](auto &r) { r.mutable_spec()->set_dataset("../../etc"); } },
            { "unknown schedule", invalid, QStringLiteral("spec.schedule"),
                [](auto &r) { r.mutable_spec()->set_schedule("random"); } },
            // NaN, infinities, out-of-range numbers and unknown enum values: the plan's rules.
            { "NaN learning rate", invalid,
                QStringLiteral("spec.learning_rate: must be a number in (0, 10] (got NaN)"),
                [](auto &r) { r.mutable_spec()->set_learning_rate(std::nan("")); } },
            { "infinite learning rate", invalid, QStringLiteral("spec.learning_rate"),
                [](auto &r) { r.mutable_spec()->set_learning_rate(HUGE_VAL); } },
            { "zero learning rate", invalid, QStringLiteral("spec.learning_rate"),
                [](auto &r) { r.mutable_spec()->set_learning_rate(0); } },
            { "momentum 1", invalid, QStringLiteral("spec.momentum"),
                [](auto &r) { r.mutable_spec()->set_momentum(1); } },
            { "NaN weight decay", invalid, QStringLiteral("spec.weight_decay"),
                [](auto &r) { r.mutable_spec()->set_weight_decay(std::nan("")); } },
            { "unknown precision", invalid,
                QStringLiteral("spec.precision: must be FP32 or BF16 (got the unknown value 99)"),
                [](auto &r) { r.mutable_spec()->set_precision(v1::Precision(99)); } },
            { "a billion epochs", invalid, QStringLiteral("spec.epochs: must be between 1 and 10000"),
                [](auto &r) { r.mutable_spec()->set_epochs(1'000'000'000); } },
            { "warm-up longer than the run", invalid, QStringLiteral("spec.warmup_epochs"),
                [](auto &r) { r.mutable_spec()->set_warmup_epochs(5); } },
            { "world of 100000", invalid, QStringLiteral("world_size must be at most 1024"),
                [](auto &r) { r.set_world_size(100000); } },
            { "rendezvous host like an option", invalid, QStringLiteral("rendezvous.host"),
                [](auto &r) {
                    r.set_world_size(2);
                    r.mutable_rendezvous()->set_host("--evil");
                    r.mutable_rendezvous()->set_port(4000);
                } },
            { "rendezvous port only", invalid, QStringLiteral("rendezvous"),
                [](auto &r) {
                    r.set_world_size(2);
                    r.mutable_rendezvous()->set_port(4000);
                } },
            { "no rendezvous and no rank 0", invalid, QStringLiteral("rendezvous"),
                [](auto &r) {
                    r.set_world_size(2);
                    r.set_ranks(0, 1);
                } },
        };
        for (const auto &c : starts) {
            auto request = runRequest("bad-input", 1, 1, { 0 });
            c.change(request);
            v1::StartWorkersResponse response;
            const auto r = client.startWorkers(request, &response);
            QVERIFY2(r.code() == c.code,
                qPrintable(QStringLiteral("%1: %2").arg(QLatin1String(c.name), r.error())));
            QVERIFY2(r.error().contains(c.mention),
                qPrintable(QStringLiteral("%1: %2").arg(QLatin1String(c.name), r.error())));
        }
        // The other calls.
        const auto expect = [](const char *name, const Status &r, Status::Code code, const QString &mention) {
            QVERIFY2(r.code() == code && r.error().contains(mention),
                qPrintable(QStringLiteral("%1: [%2] %3")
                               .arg(QLatin1String(name))
                               .arg(int(r.code()))
                               .arg(r.error())));
        };
        {
            // The same (run, attempt) again: idempotent when identical, refused when not.
            auto first = runRequest("same-attempt", 1, 1, { 0 });
            first.mutable_spec()->set_max_train_images(32);
            v1::StartWorkersResponse response;
            QVERIFY(client.startWorkers(first, &response).ok());
            QVERIFY(client.startWorkers(first, &response).ok());
            QVERIFY(response.already_running());
            auto changed = first;
            changed.mutable_spec()->set_momentum(0);
            expect("StartWorkers, same attempt, other spec", client.startWorkers(changed, &response),
                Status::Code::AlreadyExists, QStringLiteral("different spec"));
            v1::StopRunResponse ignored;
            QVERIFY(client.stopRun(QStringLiteral("same-attempt"), &ignored).ok());
        }
        {
            v1::FindLearningRateRequest find;
            find.mutable_spec()->set_dataset("syn");
            find.mutable_spec()->set_batch_size(0);
            expect("FindLearningRate batch 0", client.findLearningRate(find, {}, nullptr), invalid,
                QStringLiteral("spec.batch_size"));
            find.mutable_spec()->set_batch_size(16);
            find.set_steps(5);
            expect("FindLearningRate 5 steps", client.findLearningRate(find, {}, nullptr), invalid,
                QStringLiteral("steps"));
        }
        v1::StopRunResponse stopped;
        expect("StopRun path-like id", client.stopRun(QStringLiteral("../x"), &stopped), invalid,
            QStringLiteral("run_id"));
        {
            grpc::ClientContext context;
            client.connection().prepareStream(&context);
            v1::StopRunRequest request;
            request.set_run_id("x");
            request.set_grace_ms(-1);
            v1::StopRunResponse response;
            expect("StopRun negative grace",
                statusFromGrpc(client.connection().stub->StopRun(&context, request, &response), {}), invalid,
                QStringLiteral("grace_ms"));
        }
        auto watched = watchRun(client, "../x", 1);
        expect(
            "WatchRun path-like id", statusFromGrpc(watched.status, {}), invalid, QStringLiteral("run_id"));
        watched = watchRun(client, "x", -3);
        expect("WatchRun negative from_seq", statusFromGrpc(watched.status, {}), invalid,
            QStringLiteral("from_seq"));
        v1::CreateSyntheticDatasetRequest synthetic;
        synthetic.set_name("../x");
        synthetic.set_train_images(10);
        synthetic.set_test_images(10);
        v1::Dataset dataset;
        expect("synthetic path-like name", client.createSyntheticDataset(synthetic, &dataset), invalid,
            QStringLiteral("name"));
        synthetic.set_name("zero");
        synthetic.set_train_images(0);
        expect("synthetic zero images", client.createSyntheticDataset(synthetic, &dataset), invalid,
            QStringLiteral("train_images"));
        expect("WatchNode interval too short", client.watchNode(5, [](const auto &) { return false; }),
            invalid, QStringLiteral("interval_ms"));
        expect("FetchDataset unknown name", client.fetchDataset(QStringLiteral("../../etc"), {}, &dataset),
            invalid, QStringLiteral("name"));
        // Nothing was written outside the agent's folders.
        for (const QString &name : { agent.path(QStringLiteral("x")), agent.stateDir() + QStringLiteral("/x"),
                 agent.stateDir() + QStringLiteral("/runs/x"),
                 agent.stateDir() + QStringLiteral("/runs/bad-input"),
                 agent.dataDir() + QStringLiteral("/zero"), agent.path(QStringLiteral("etc")),
                 path(QStringLiteral("x")), path(QStringLiteral("etc")) })
            QVERIFY2(!QFileInfo::exists(name), qPrintable(name));
        QVERIFY(!QFileInfo::exists(QStringLiteral("/tmp/x/1")));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // Exits through real processes: a worker that reports an error and fails, one that
    // is killed by a signal, and one that ignores SIGTERM until StopRun's SIGKILL.
    void exitsAreClassified_data()
    {
        QTest::addColumn<QString>("script");
        QTest::addColumn<int>("kind");
        QTest::addColumn<QString>("state");
        QTest::addColumn<QString>("message");
        // Event lines as the worker writes them, from worker.proto's generated code.
        const auto line = [](const v1::WorkerEvent &event) {
            return QString::fromStdString(worker::eventLine(event)).trimmed();
        };
        v1::WorkerEvent error;
        error.mutable_error()->set_message("disk on fire");
        QTest::newRow("failed") << "echo '" + line(error) + "' >&3; exit 3" << int(v1::EXIT_FAILED)
                                << "FAILED"
                                << "exited with code 3: disk on fire";
        error.mutable_error()->set_message("std::bad_alloc");
        QTest::newRow("out of memory")
            << "echo '" + line(error) + "' >&3; exit 1" << int(v1::EXIT_OUT_OF_MEMORY) << "FAILED"
            << "ran out of memory";
        v1::WorkerEvent started;
        started.mutable_started()->set_world_size(1);
        QTest::newRow("killed") << "kill -SEGV $$" << int(v1::EXIT_KILLED) << "FAILED"
                                << "killed by signal 11";
        QTest::newRow("stopped") << "trap '' TERM; echo '" + line(started)
                + "' >&3; while :; do sleep 1; done"
                                 << int(v1::EXIT_STOPPED) << "CANCELLED"
                                 << "stopped on request";
    }
    void exitsAreClassified()
    {
        QFETCH(QString, script);
        QFETCH(int, kind);
        QFETCH(QString, state);
        QFETCH(QString, message);
        const QString worker
            = path(QStringLiteral("fake-worker-%1.sh").arg(QTest::currentDataTag()).replace(u' ', u'-'));
        QVERIFY(writeFile(worker, "#!/bin/sh\n" + script.toUtf8() + "\n",
            QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--worker"), worker })));
        AgentClient &client = agent.client();
        v1::StartWorkersResponse started;
        const std::string id = "exit-" + QByteArray(QTest::currentDataTag()).replace(' ', '-').toStdString();
        auto r = client.startWorkers(runRequest(id, 1, 1, { 0 }), &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        if (kind == v1::EXIT_STOPPED) {
            QTRY_VERIFY_WITH_TIMEOUT(
                [&] {
                    v1::ListRunsResponse list;
                    return client.listRuns({}, &list).ok() && list.runs(0).state() == v1::RUNNING;
                }(),
                10000);
            grpc::ClientContext context;
            client.connection().prepareStream(&context);
            v1::StopRunRequest stop;
            stop.set_run_id(id);
            stop.set_grace_ms(300);
            v1::StopRunResponse response;
            QVERIFY(client.connection().stub->StopRun(&context, stop, &response).ok());
        }
        QElapsedTimer timer;
        timer.start();
        const auto watched = watchRun(client, id, 1);
        QVERIFY(watched.status.ok());
        QVERIFY(timer.elapsed() < 5000); // SIGKILL follows SIGTERM after the grace
        QCOMPARE(lastStateName(watched.events), state);
        const auto exited = std::find_if(
            watched.events.begin(), watched.events.end(), [](const auto &e) { return e.has_rank_exited(); });
        QVERIFY(exited != watched.events.end());
        QCOMPARE(int(exited->rank_exited().kind()), kind);
        const auto &summary = watched.events[watched.events.size() - 2];
        QVERIFY(summary.has_summary());
        QCOMPARE(int(summary.summary().exit_kind()), kind);
        QVERIFY2(QString::fromStdString(summary.summary().message()).contains(message),
            summary.summary().message().c_str());
        if (kind == v1::EXIT_STOPPED)
            QCOMPARE(exited->rank_exited().signal(), int(SIGKILL)); // it ignored SIGTERM
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // One failing rank stops the others, and the run is FAILED (not CANCELLED) with the
    // failing rank's reason, though the agent itself had to stop the rest.
    void oneFailingRankFailsTheRun()
    {
        const QString worker = path(QStringLiteral("fake-worker-rank1.sh"));
        QVERIFY(writeFile(worker,
            "#!/bin/sh\ncase \"$*\" in *'--rank 1 '*) sleep 1; exit 3;; esac\n"
            "trap 'exit 143' TERM\nwhile :; do sleep 0.2; done\n",
            QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner));
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--worker"), worker })));
        AgentClient &client = agent.client();
        v1::StartWorkersResponse started;
        auto r = client.startWorkers(runRequest("pair-1", 1, 2, { 0, 1 }), &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        const auto watched = watchRun(client, "pair-1", 1);
        QVERIFY(watched.status.ok());
        QCOMPARE(lastStateName(watched.events), QStringLiteral("FAILED"));
        std::map<int, v1::ExitKind> kinds;
        for (const auto &e : watched.events)
            if (e.has_rank_exited())
                kinds[e.rank_exited().rank()] = e.rank_exited().kind();
        QCOMPARE(kinds[1], v1::EXIT_FAILED);
        QCOMPARE(kinds[0], v1::EXIT_STOPPED);
        const auto &summary = watched.events[watched.events.size() - 2].summary();
        QVERIFY2(
            QString::fromStdString(summary.message()).startsWith(QStringLiteral("rank 1 exited with code 3")),
            summary.message().c_str());
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void watchNodeSamplesUtilization()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        AgentClient &client = agent.client();
        v1::DescribeResponse inventory;
        QVERIFY(client.describe(&inventory).ok());
        QVERIFY(inventory.gpus().empty()); // no NVIDIA driver on the test machine...
        QVERIFY2(QString::fromStdString(inventory.gpu_status()).contains(QStringLiteral("NVML")),
            inventory.gpu_status().c_str()); // ...and Describe says why
        v1::StartWorkersResponse started;
        auto r = client.startWorkers(runRequest("busy-1", 1000, 1, { 0 }), &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        std::vector<v1::NodeSample> samples;
        bool sawRank = false;
        r = client.watchNode(200, [&](const v1::NodeSample &s) {
            samples.push_back(s);
            for (const auto &p : s.processes())
                if (p.run_id() == "busy-1" && p.pid() == started.run().placements(0).pid()
                    && p.cpu_percent() > 1 && p.rss_bytes() > 20 * 1024 * 1024)
                    sawRank = true;
            return !(sawRank && samples.size() >= 3) && samples.size() < 100;
        });
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(sawRank);
        QVERIFY(samples.size() >= 2);
        for (std::size_t i = 0; i < samples.size(); ++i) {
            const auto &s = samples[i];
            QVERIFY(s.cpu_percent() >= 0 && s.cpu_percent() <= 100);
            QVERIFY(s.memory_total_bytes() > 0 && s.memory_used_bytes() > 0);
            QVERIFY(s.memory_used_bytes() <= s.memory_total_bytes());
            QVERIFY(s.cpu_cores() > 0);
            if (i > 0) {
                const auto gap = s.unix_ms() - samples[i - 1].unix_ms();
                QVERIFY2(gap >= 150 && gap < 2000, qPrintable(QString::number(gap)));
            }
        }
        v1::StopRunResponse stopped;
        QVERIFY(client.stopRun(QStringLiteral("busy-1"), &stopped).ok());
        QCOMPARE(lastStateName(watchRun(client, "busy-1", 1).events), QStringLiteral("CANCELLED"));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void fetchWithoutNetworkFailsFastSayingWhatToDo()
    {
        // An address nothing listens on stands for "no network" whatever the machine.
        test::AgentFixture agent(m_tmp.path());
        test::AgentFixtureOptions options; // an empty data folder
        options.extraArguments
            = { QStringLiteral("--cifar-url"), QStringLiteral("http://127.0.0.1:1/cifar-10-binary.tar.gz") };
        VERIFY_OK(agent.start(options));
        const QString data = agent.dataDir();
        AgentClient &client = agent.client();
        QElapsedTimer timer;
        timer.start();
        v1::Dataset dataset;
        const auto r = client.fetchDataset(QStringLiteral("cifar-10"), {}, &dataset);
        QCOMPARE(r.code(), Status::Code::Unavailable);
        QVERIFY(timer.elapsed() < 10000);
        for (const QString &needle :
            { QStringLiteral("cannot download"), QStringLiteral("c32a1d4ab5d03f1284b67883e8d87530"),
                data + QStringLiteral("/cifar-10"), QStringLiteral("cifar-10-batches-bin") })
            QVERIFY2(r.error().contains(needle), qPrintable(r.error()));
        QVERIFY(QDir(data).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).isEmpty());
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    void fetchFromMirrorChecksUnpacksAndReports()
    {
        // A tarball in the official layout, served as a file:// mirror.
        const QString source = path(QStringLiteral("mirror-src"));
        VERIFY_OK(trainer::cifar::writeSyntheticDataset(
            (source + QStringLiteral("/cifar-10-batches-bin")).toStdString(), 60, 20, 5));
        const QString tarball = path(QStringLiteral("cifar-10-binary.tar.gz"));
        const QString problem = test::runTool(QStringLiteral("tar"),
            { QStringLiteral("-czf"), tarball, QStringLiteral("-C"), source,
                QStringLiteral("cifar-10-batches-bin") });
        QVERIFY2(problem.isEmpty(), qPrintable(problem));
        QFile file(tarball);
        QVERIFY(file.open(QIODevice::ReadOnly));
        const QString md5
            = QString::fromLatin1(QCryptographicHash::hash(file.readAll(), QCryptographicHash::Md5).toHex());
        const QString url = QStringLiteral("file://") + tarball;

        // Wrong checksum: refused, nothing left behind.
        test::AgentFixture agent(m_tmp.path());
        test::AgentFixtureOptions options; // an empty data folder
        options.extraArguments
            = { QStringLiteral("--cifar-url"), url, QStringLiteral("--cifar-md5"), QString(32, u'0') };
        VERIFY_OK(agent.start(options));
        const QString data = agent.dataDir();
        {
            AgentClient client(agent.address(), agent.token());
            v1::Dataset dataset;
            const auto r = client.fetchDataset(QStringLiteral("cifar-10"), {}, &dataset);
            QCOMPARE(r.code(), Status::Code::DataLoss);
            QVERIFY2(r.error().contains(md5), qPrintable(r.error()));
            QVERIFY(QDir(data).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot).isEmpty());
        }
        VERIFY_OK(agent.stopAndCheckNothingLeft());

        // Started again with the right one, on the same folders.
        options.extraArguments = { QStringLiteral("--cifar-url"), url, QStringLiteral("--cifar-md5"), md5 };
        VERIFY_OK(agent.start(options));
        AgentClient client(agent.address(), agent.token());
        std::vector<v1::FetchProgress::Phase> phases;
        v1::Dataset dataset;
        auto r = client.fetchDataset(
            QStringLiteral("cifar-10"),
            [&](const v1::FetchProgress &p) {
                if (phases.empty() || phases.back() != p.phase())
                    phases.push_back(p.phase());
            },
            &dataset);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(std::find(phases.begin(), phases.end(), v1::FetchProgress::VERIFYING) != phases.end());
        QVERIFY(std::find(phases.begin(), phases.end(), v1::FetchProgress::UNPACKING) != phases.end());
        QCOMPARE(phases.back(), v1::FetchProgress::DONE);
        QCOMPARE(dataset.name(), std::string("cifar-10"));
        QCOMPARE(dataset.train_images(), 60);
        QCOMPARE(dataset.test_images(), 20);
        QVERIFY(dataset.synthetic()); // the fixture carries the SYNTHETIC marker, and says so
        v1::DescribeResponse inventory;
        QVERIFY(client.describe(&inventory).ok());
        QVERIFY(std::any_of(inventory.datasets().begin(), inventory.datasets().end(),
            [](const auto &d) { return d.name() == "cifar-10" && d.train_images() == 60; }));
        // Fetching again finds it there.
        phases.clear();
        r = client.fetchDataset(
            QStringLiteral("cifar-10"), [&](const auto &p) { phases.push_back(p.phase()); }, &dataset);
        QVERIFY(r.ok());
        QCOMPARE(phases, std::vector<v1::FetchProgress::Phase> { v1::FetchProgress::DONE });
        // No leftovers of the download.
        QCOMPARE(QDir(data).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot),
            QStringList { QStringLiteral("cifar-10") });
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // A field far over its limit is refused by name, with a short prefix of the value, not
    // echoed whole (which overflowed the client's metadata limit: RESOURCE_EXHAUSTED).
    void oversizedFieldsAreRefusedByName()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        QVERIFY(agent.agent().processId() > 0);
        AgentClient &client = agent.client();
        v1::StartWorkersRequest big = runRequest(std::string(10'000, 'r'), 1, 1, { 0 });
        v1::StartWorkersResponse response;
        Status result = client.startWorkers(big, &response);
        QCOMPARE(result.code(), Status::Code::InvalidArgument);
        QVERIFY2(result.error().contains(QLatin1String("run_id is 10000 bytes; at most 64")),
            qPrintable(result.error()));
        QVERIFY2(result.error().size() < 400, qPrintable(result.error()));
        big = runRequest("fine", 1, 1, { 0 });
        big.mutable_spec()->set_schedule(std::string(100'000, 'c'));
        result = client.startWorkers(big, &response);
        QCOMPARE(result.code(), Status::Code::InvalidArgument);
        QVERIFY2(result.error().contains(
                     QLatin1String("spec.schedule is 100000 bytes; at most 4096 (it starts with 'ccc")),
            qPrintable(result.error()));
        QVERIFY2(result.error().size() < 400, qPrintable(result.error()));
        // The agent is fine afterwards.
        v1::DescribeResponse d;
        QVERIFY(client.describe(&d).ok());
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // Clients that open ReadCheckpoint streams and never read: each server Write blocks
    // once the connection's window is full, and after --stream-stall-s the agent cancels
    // the stream. Its threads go back to where they were; a client over the per-client
    // limit is refused, saying which limit.
    void clientsThatNeverReadDoNotHoldTheAgent()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--stream-stall-s"), QStringLiteral("8"),
            QStringLiteral("--max-streams-per-client"), QStringLiteral("12") })));
        QVERIFY(agent.agent().processId() > 0);
        AgentClient &client = agent.client();
        QByteArray bytes(32 << 20, Qt::Uninitialized); // 32 MiB: far more than gRPC buffers
        for (qsizetype i = 0; i < bytes.size(); ++i)
            bytes[i] = char(i * 13 % 251);
        auto status = writeCheckpoint(client,
            checkpointChunks("big-1", 1,
                { { "model.pt", bytes, {} }, { "optimizer.pt", "o", {} }, { "state.pt", "s", {} } }));
        QVERIFY2(status.ok(), status.error_message().c_str());

        const auto threads = [&] {
            QFile f(QStringLiteral("/proc/%1/status").arg(agent.agent().processId()));
            if (!f.open(QIODevice::ReadOnly))
                return -1;
            for (const QByteArray &line : f.readAll().split('\n'))
                if (line.startsWith("Threads:"))
                    return line.mid(8).trimmed().toInt();
            return -1;
        };
        const int before = threads();
        QVERIFY(before > 0);

        struct Stalled {
            std::unique_ptr<AgentClient> client; // a connection of its own
            grpc::ClientContext context;
            std::unique_ptr<grpc::ClientReader<v1::CheckpointChunk>> reader;
        };
        const auto openStalled = [&](int count, std::vector<std::unique_ptr<Stalled>> *into) {
            for (int i = 0; i < count; ++i) {
                auto s = std::make_unique<Stalled>();
                s->client = std::make_unique<AgentClient>(agent.address(), agent.token());
                s->client->connection().prepareStream(&s->context);
                v1::ReadCheckpointRequest request;
                request.set_run_id("big-1");
                s->reader = s->client->connection().stub->ReadCheckpoint(&s->context, request);
                into->push_back(std::move(s));
            }
        };
        std::vector<std::unique_ptr<Stalled>> stalled;
        openStalled(10, &stalled);
        // Their handlers block in Write: one thread each.
        QTRY_VERIFY2_WITH_TIMEOUT(threads() >= before + 8,
            qPrintable(QStringLiteral("%1 threads, %2 before").arg(threads()).arg(before)), 60'000);
        const int busy = threads();
        // Two more from this client are allowed, the next one is refused with the reason.
        std::vector<std::unique_ptr<Stalled>> more;
        openStalled(3, &more);
        v1::CheckpointChunk chunk;
        // The third one's first read ends its stream at once with RESOURCE_EXHAUSTED.
        while (more.back()->reader->Read(&chunk)) { }
        const grpc::Status refused = more.back()->reader->Finish();
        QCOMPARE(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
        QVERIFY2(QString::fromStdString(refused.error_message()).contains(QLatin1String("12 streams open")),
            refused.error_message().c_str());

        // After the stall limit the agent has cancelled them: its threads are back (8 s of
        // stall, then gRPC lets its threads go; 51 s once beside the suite's heaviest tests).
        QTRY_VERIFY_WITH_TIMEOUT(threads() <= before + 2, test::endsWithin());
        qInfo("agent threads: %d before, %d with 10 stalled readers, %d after they were cancelled", before,
            busy, threads());
        QTRY_VERIFY_WITH_TIMEOUT(
            agent.log().contains(QLatin1String("the client took no data for 8 s")), 10'000);
        // A stalled client that reads at last learns that its stream was cancelled. (A stream
        // whose whole checkpoint fitted in the connection's buffers never stalled: its handler
        // finished, and its client reads every byte.) At least the 8 whose handlers blocked.
        int cancelled = 0;
        for (auto &s : stalled) {
            qint64 received = 0;
            while (s->reader->Read(&chunk))
                received += qint64(chunk.data().size());
            const grpc::Status end = s->reader->Finish();
            if (end.error_code() == grpc::StatusCode::CANCELLED)
                ++cancelled;
            else
                QVERIFY2(end.ok() && received >= bytes.size() + 2,
                    qPrintable(QStringLiteral("%1 after %2 bytes: %3")
                                   .arg(int(end.error_code()))
                                   .arg(received)
                                   .arg(QString::fromStdString(end.error_message()))));
        }
        QVERIFY2(
            cancelled >= 8, qPrintable(QStringLiteral("%1 of 10 stalled streams cancelled").arg(cancelled)));
        // The agent still answers.
        v1::DescribeResponse d;
        QVERIFY(client.describe(&d).ok());
        for (auto &s : stalled)
            s->context.TryCancel();
        for (auto &s : more)
            s->context.TryCancel();
        more.clear();
        stalled.clear();
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }
};

QTEST_GUILESS_MAIN(TestAgent)
#include "tst_agent.moc"
