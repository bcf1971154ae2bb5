// Soak: keeps one agent busy with short runs for a long time while watchers connect,
// read a little and go away (and some never read at all), and prints the agent's
// resident memory, threads and open files once a minute. Flat is the goal.
//
//   scalelab-bench-soak [--minutes 30] [--watchers 8] [--agent-state DIR]
//
// It starts its own agent (loopback, a token) on a synthetic data set and stops it at
// the end. Output: one line per minute, "minute runs watches rss_mb threads fds", and
// how long listing every recorded run took (ListRuns, page by page) and how many it got.
#include "agent_client.h"
#include "agent_grpc.h"
#include "local_agent.h"

#include <QCoreApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QTemporaryDir>
#include <QThread>

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

using namespace scalelab;
using namespace scalelab::core;

namespace {

struct ProcessFigures {
    double rssMb = 0;
    double anonMb = 0; // of which: the heap and other private memory (RssAnon)
    double fileMb = 0; // and mapped files, the program and its libraries (RssFile)
    int threads = 0;
    int fds = 0;
};

ProcessFigures figuresOf(qint64 pid)
{
    ProcessFigures f;
    QFile status(QStringLiteral("/proc/%1/status").arg(pid));
    if (status.open(QIODevice::ReadOnly))
        for (const QByteArray &line : status.readAll().split('\n')) {
            if (line.startsWith("VmRSS:"))
                f.rssMb = line.mid(6).trimmed().split(' ').first().toDouble() / 1024.0;
            if (line.startsWith("RssAnon:"))
                f.anonMb = line.mid(8).trimmed().split(' ').first().toDouble() / 1024.0;
            if (line.startsWith("RssFile:"))
                f.fileMb = line.mid(8).trimmed().split(' ').first().toDouble() / 1024.0;
            if (line.startsWith("Threads:"))
                f.threads = line.mid(8).trimmed().toInt();
        }
    f.fds = int(QDir(QStringLiteral("/proc/%1/fd").arg(pid))
                    .entryList(QDir::NoDotAndDotDot | QDir::AllEntries)
                    .size());
    return f;
}

int option(const QStringList &args, const QString &name, int fallback)
{
    const int i = args.indexOf(name);
    return i >= 0 && i + 1 < args.size() ? args[i + 1].toInt() : fallback;
}

} // namespace

int main(int argc, char **argv)
{
    QCoreApplication app(argc, argv);
    const QStringList args = app.arguments();
    const int minutes = option(args, QStringLiteral("--minutes"), 30);
    const int watchers = option(args, QStringLiteral("--watchers"), 8);
    QTemporaryDir tmp;
    const QString data = tmp.filePath(QStringLiteral("data"));
    QDir().mkpath(data);

    LocalAgent agent;
    LocalAgentOptions options;
    options.dataDir = data;
    options.stateDir = tmp.filePath(QStringLiteral("agent"));
    options.extraArguments = { QStringLiteral("--stream-stall-s"), QStringLiteral("10") };
    if (const core::Status started = agent.start(options); !started) {
        std::fprintf(stderr, "soak: cannot start the agent: %s\n", qPrintable(started.error()));
        return 1;
    }
    AgentClient client(agent.endpoint(), agent.token());
    v1::CreateSyntheticDatasetRequest create;
    create.set_name("soak");
    create.set_train_images(128);
    create.set_test_images(32);
    v1::Dataset dataset;
    if (auto r = client.createSyntheticDataset(create, &dataset); !r.ok()) {
        std::fprintf(stderr, "soak: %s\n", qPrintable(r.error()));
        return 1;
    }

    std::atomic<bool> stop = false;
    std::atomic<long> runs = 0, watches = 0;
    std::atomic<int> latestRun = 0;
    // Short runs, one after the other (1 epoch, 128 images, 1 thread).
    std::thread runner([&] {
        for (int n = 1; !stop; ++n) {
            v1::StartWorkersRequest request;
            request.set_run_id("soak-" + std::to_string(n));
            request.set_attempt(1);
            request.set_world_size(1);
            request.add_ranks(0);
            auto *spec = request.mutable_spec();
            spec->set_dataset("soak");
            spec->set_batch_size(32);
            spec->set_epochs(1);
            spec->set_threads_per_worker(1);
            v1::StartWorkersResponse response;
            if (!client.startWorkers(request, &response).ok()) {
                QThread::msleep(500);
                continue;
            }
            latestRun = n;
            for (;;) {
                // As a console does: Describe lists every active run.
                v1::DescribeResponse inventory;
                QThread::msleep(300);
                if (stop || !client.describe(&inventory).ok())
                    break;
                bool active = false;
                for (const auto &r : inventory.runs())
                    active = active
                        || (r.run_id() == request.run_id() && r.state() != v1::SUCCEEDED
                            && r.state() != v1::FAILED && r.state() != v1::CANCELLED);
                if (!active)
                    break;
            }
            ++runs;
        }
    });
    // Watchers: read a few events of a recent run from the start, then hang up; every
    // fourth never reads (the agent cancels it after its stall limit), and every fourth
    // watches any earlier run (the agent reads it back from disk).
    std::vector<std::thread> watching;
    for (int w = 0; w < watchers; ++w)
        watching.emplace_back([&, w] {
            std::mt19937 random(w);
            AgentClient own(agent.endpoint(), agent.token());
            while (!stop) {
                const int n = latestRun.load();
                if (n == 0) {
                    QThread::msleep(200);
                    continue;
                }
                grpc::ClientContext context;
                own.connection().prepareStream(&context);
                context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
                v1::WatchRunRequest request;
                const int which = w % 4 == 2 ? 1 + int(random() % n) : std::max(1, n - int(random() % 3));
                request.set_run_id("soak-" + std::to_string(which));
                auto reader = own.connection().stub->WatchRun(&context, request);
                v1::RunEvent event;
                if (w % 4 == 3) {
                    QThread::msleep(2000 + random() % 3000); // connected, reading nothing
                } else {
                    for (int k = 0, want = 1 + int(random() % 40); k < want && reader->Read(&event); ++k) { }
                }
                context.TryCancel();
                reader->Finish();
                ++watches;
            }
        });

    std::printf("minute runs watches rss_mb (anon file) threads open_files list_all_ms (runs)\n");
    QElapsedTimer clock;
    clock.start();
    for (int minute = 0; minute <= minutes; ++minute) {
        while (clock.elapsed() < qint64(minute) * 60'000)
            QThread::msleep(200);
        const ProcessFigures f = figuresOf(agent.processId());
        // Every run the agent has recorded, page by page, as `scalelab-cli runs` lists them.
        QElapsedTimer listing;
        listing.start();
        QList<v1::RunInfo> all;
        const bool listed = client.listAllRuns(&all).ok();
        const qint64 listMs = listing.elapsed();
        std::printf("%6d %5ld %7ld %6.1f (%4.1f %4.1f) %7d %10d %11s\n", minute, runs.load(), watches.load(),
            f.rssMb, f.anonMb, f.fileMb, f.threads, f.fds,
            listed ? qPrintable(QStringLiteral("%1 (%2)").arg(listMs).arg(all.size())) : "failed");
        std::fflush(stdout);
    }
    stop = true;
    runner.join();
    for (auto &t : watching)
        t.join();
    agent.stop();
    return 0;
}
