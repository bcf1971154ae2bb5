// The node agent as a process, its runs (issue 4): ranks on two agents in one c10d group, a
// StartWorkers repeated, a stream resumed mid-run and a RunWatch cancelled as it starts, an agent killed with
// SIGKILL and started again on its state, a shutdown, finished runs read back from disk, exits classified
// through real processes, and utilization samples. After every test no process it started is left, and no
// agent held an exited worker unreaped.
#include "agent_client.h"
#include "agent_fixture.h"
#include "agent_grpc.h"
#include "agent_test_bench.h"
#include "checkpoint_copy.h"
#include "cifar10.h"
#include "run_watch.h"
#include "study_runner.h"
#include "test_support.h"
#include "verify_ok.h"
#include "worker_channel.h"

#include <QCryptographicHash>
#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

#include <grpcpp/grpcpp.h>

#include <csignal>
#include <functional>
#include <set>
#include <sys/wait.h>
#include <thread>

using namespace scalelab;
using namespace scalelab::core;
using test::lastStateName;
using test::runRequest;
using test::watchRun;
using test::withSyn;
using test::writeFile;

class TestAgentRuns : public QObject, public test::AgentBench {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { setUpBench(/*withCertificates=*/false); }

    void cleanup() { checkNothingLeft(); }

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

    // A StartWorkers asked again (its answer lost: the console timed out and retried) is
    // answered 'already running' with the rendezvous, which the other agents' ranks need; it
    // came back empty before bf8f0cc.
    void repeatedStartWorkersGetsTheRendezvousBack()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        AgentClient &client = agent.client();
        const v1::StartWorkersRequest request = runRequest("again-1", 1, 2, { 0, 1 });
        v1::StartWorkersResponse first, again;
        auto r = client.startWorkers(request, &first);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(!first.already_running());
        QCOMPARE(first.rendezvous().host(), std::string("127.0.0.1"));
        QVERIFY(first.rendezvous().port() > 0);
        r = client.startWorkers(request, &again);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QVERIFY(again.already_running());
        QCOMPARE(again.rendezvous().host(), first.rendezvous().host());
        QCOMPARE(again.rendezvous().port(), first.rendezvous().port());
        QCOMPARE(lastStateName(watchRun(client, "again-1", 1).events), QStringLiteral("SUCCEEDED"));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // A RunWatch cancelled just as its stream starts ends all the same. Before bf8f0cc,
    // cancel() could run after loop() had checked for it and before the stream's context was
    // published, and reached nothing: the stream went on, heartbeats and all, until the run
    // ended. That window is a few instructions wide, so each watch here is cancelled at
    // another delay after start(), 0 to 300 us, over and over; a lost cancel never finishes.
    void watchCancelledAsItStartsEnds()
    {
        test::AgentFixture agent(m_tmp.path());
        // Short heartbeats and a high stream limit: the agent lets each cancelled stream go
        // within 100 ms, and never refuses the next one for the many still closing.
        VERIFY_OK(agent.start(withSyn({ QStringLiteral("--heartbeat-ms"), QStringLiteral("100"),
            QStringLiteral("--max-streams-per-client"), QStringLiteral("5000") })));
        AgentClient &client = agent.client();
        v1::StartWorkersResponse response;
        auto r = client.startWorkers(runRequest("watched-1", 1000), &response); // stopped below
        QVERIFY2(r.ok(), qPrintable(r.error()));
        for (int i = 0; i < 1500; ++i) {
            RunWatch watch(&client, QStringLiteral("watched-1"));
            QSignalSpy finished(&watch, &RunWatch::finished);
            watch.start();
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(i % 300);
            while (std::chrono::steady_clock::now() < until) { }
            watch.cancel();
            QVERIFY2(finished.wait(test::timeLimit(30'000)),
                qPrintable(QStringLiteral("watch %1, cancelled %2 us after it started, went on")
                               .arg(i)
                               .arg(i % 300)));
            QCOMPARE(finished.first().first().toString(), QString());
        }
        v1::StopRunResponse stopped;
        r = client.stopRun(QStringLiteral("watched-1"), &stopped);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        QCOMPARE(lastStateName(watchRun(client, "watched-1", 1).events), QStringLiteral("CANCELLED"));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
    }

    // A stall and its end are logged in that order, and never after the run's terminal
    // events: rank 1 is stopped (SIGSTOP) until rank 0, waiting for it, is called stalled,
    // then let go. bf8f0cc fixed races of a few instructions between the stall watch, rank 0's
    // reader and finish() (each wrote its event outside the supervisor's lock). Nothing lets a
    // test hold a thread inside that window, so this one did not fail before the fix: it keeps
    // the order that consumers (the study runner, the console) rely on.
    void stallAndItsEndAreLoggedInOrder()
    {
        test::AgentFixture agent(m_tmp.path());
        VERIFY_OK(agent.start(withSyn()));
        AgentClient &client = agent.client();
        v1::StartWorkersRequest request = runRequest("stall-1", 5, 2, { 0, 1 });
        request.mutable_spec()->set_stall_seconds(1);
        v1::StartWorkersResponse started;
        auto r = client.startWorkers(request, &started);
        QVERIFY2(r.ok(), qPrintable(r.error()));
        qint64 rank1 = 0;
        for (const auto &p : started.run().placements())
            if (p.rank() == 1)
                rank1 = p.pid();
        QVERIFY(rank1 > 0);
        // Reads the stream from `from` until an event satisfies `until`; its seq, or 0.
        const auto readUntil = [&](qint64 from, const std::function<bool(const v1::RunEvent &)> &until) {
            grpc::ClientContext context;
            client.connection().prepareStream(&context);
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(180));
            v1::WatchRunRequest watch;
            watch.set_run_id("stall-1");
            watch.set_from_seq(from);
            auto reader = client.connection().stub->WatchRun(&context, watch);
            v1::RunEvent event;
            qint64 seq = 0;
            while (seq == 0 && reader->Read(&event))
                if (!event.has_heartbeat() && until(event))
                    seq = event.seq();
            context.TryCancel();
            (void)reader->Finish(); // cancelled by us, or the run ended first: `seq` says which
            return seq;
        };
        const qint64 stepped = readUntil(1, [](const v1::RunEvent &e) { return e.has_step(); });
        QVERIFY(stepped > 0);
        QCOMPARE(::kill(pid_t(rank1), SIGSTOP), 0);
        const qint64 stalled = readUntil(
            stepped + 1, [](const v1::RunEvent &e) { return e.has_stall() && e.stall().stalled(); });
        QCOMPARE(::kill(pid_t(rank1), SIGCONT), 0);
        QVERIFY2(stalled > 0, "rank 0 was never called stalled");

        const auto watched = watchRun(client, "stall-1", 1);
        QVERIFY2(watched.status.ok(), watched.status.error_message().c_str());
        QCOMPARE(lastStateName(watched.events), QStringLiteral("SUCCEEDED"));
        // In the log's order: each stall, then its end, then the terminal state and nothing after
        // it. (A loaded machine may add stalls of its own, the last one perhaps unended when the
        // run ends; they keep that order too.)
        QStringList order;
        for (const auto &e : watched.events) {
            if (e.has_stall())
                order << (e.stall().stalled() ? QStringLiteral("stalled") : QStringLiteral("again"));
            if (e.has_state() && e.state().state() == v1::SUCCEEDED)
                order << QStringLiteral("END");
        }
        QVERIFY2(QRegularExpression(QStringLiteral("^(stalled again )+(stalled )?END$"))
                     .match(order.join(u' '))
                     .hasMatch(),
            qPrintable(order.join(u' ')));
        VERIFY_OK(agent.stopAndCheckNothingLeft());
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
};

QTEST_GUILESS_MAIN(TestAgentRuns)
#include "tst_agent_runs.moc"
