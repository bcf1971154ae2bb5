// The node agent as a process, the files it moves: checkpoints read from one agent and written
// to another (and the writes it refuses), a study copying checkpoints from an agent with its own
// CA, CIFAR-10 fetched from a mirror (or said to be unreachable), and clients that open
// checkpoint streams and never read. After every test no process it started is left.
#include "agent_client.h"
#include "agent_fixture.h"
#include "agent_grpc.h"
#include "agent_test_bench.h"
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
using test::lastStateName;
using test::runRequest;
using test::watchRun;
using test::withSyn;
using test::writeFile;

namespace {

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

} // namespace

class TestAgentFiles : public QObject, public test::AgentBench {
    Q_OBJECT
private Q_SLOTS:
    void initTestCase() { setUpBench(/*withCertificates=*/true); }

    void cleanup() { checkNothingLeft(); }

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

QTEST_GUILESS_MAIN(TestAgentFiles)
#include "tst_agent_files.moc"
