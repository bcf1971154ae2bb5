// `scalelab-cli describe`, `runs` and `gc`: one agent's node, data sets and runs, the runs
// it has recorded, and freeing its disk (and the console's copies) by retention rules.
#include "agent_connection.h"
#include "cli_common.h"
#include "journal.h"
#include "run_record.h"
#include "study_state.h"

#include <QDateTime>
#include <QDir>
#include <QDirIterator>
#include <QFileInfo>

using namespace scalelab;
using namespace scalelab::core;

namespace {

QString megabytes(qint64 bytes)
{
    return bytes >= 10'000'000'000 ? QStringLiteral("%1 GB").arg(double(bytes) / 1e9, 0, 'f', 1)
                                   : QStringLiteral("%1 MB").arg(double(bytes) / 1e6, 0, 'f', 1);
}

// The console's copies of checkpoints under `stateDir` that the runs of its journal's studies
// no longer need: removed unless `request` is a dry run.
Status tidyConsoleCopies(
    const QString &stateDir, const v1::CollectGarbageRequest &request, QStringList *removed, qint64 *bytes)
{
    if (!QFileInfo::exists(stateDir + QStringLiteral("/journal.sqlite")))
        return Status::success();
    Journal journal;
    if (const Status opened = journal.open(stateDir + QStringLiteral("/journal.sqlite")); !opened)
        return opened;
    for (const QString &studyId : journal.studyIds()) {
        const StudyState state = StudyState::replay(journal.events(studyId));
        for (const auto &run : state.runs()) {
            const bool done = run.phase == RunPhase::Succeeded
                || (request.include_failed()
                    && (run.phase == RunPhase::Failed || run.phase == RunPhase::Cancelled));
            const QString dir = stateDir + QStringLiteral("/checkpoints/") + run.planned.runId;
            if (!done || !QFileInfo::exists(dir))
                continue;
            QDirIterator it(dir, QDir::Files | QDir::Hidden, QDirIterator::Subdirectories);
            while (it.hasNext()) {
                it.next();
                *bytes += it.fileInfo().size();
            }
            *removed << dir;
            if (!request.dry_run())
                QDir(dir).removeRecursively();
        }
    }
    return Status::success();
}

} // namespace

// `gc`: frees an agent's disk by its retention rule or stricter ones, and the console's
// own copies of checkpoints that no run needs any more.
int scalelab::app::gcCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "Free disk space: unfinished checkpoint folders, checkpoints of finished runs by the agent's "
        "retention rule (or --finished), and with --include-failed those of FAILED and CANCELLED runs "
        "(a later retry of such a run then starts from epoch 0). Active runs are never touched."));
    parser.addHelpOption();
    addOneAgentOptions(parser);
    parser.addOption({ QStringLiteral("finished"),
        QStringLiteral("What SUCCEEDED runs keep: final (their last checkpoint) or none. Default: the "
                       "agent's rule (see describe)."),
        QStringLiteral("final|none") });
    parser.addOption({ QStringLiteral("older-than-days"),
        QStringLiteral("Only runs that ended at least this many days ago."), QStringLiteral("days") });
    parser.addOption({ QStringLiteral("include-failed"),
        QStringLiteral("Also remove the checkpoints of FAILED and CANCELLED runs.") });
    parser.addOption(
        { QStringLiteral("dry-run"), QStringLiteral("Say what would be removed; remove nothing.") });
    parser.addOption({ QStringLiteral("console-state-dir"),
        QStringLiteral("Also tidy the console's copies of checkpoints there: the folder of the study "
                       "journal (default: $SCALELAB_STATE_DIR or ~/.local/share/scalelab)."),
        QStringLiteral("dir") });
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Print what was removed as JSON.") });
    if (!parser.parse(arguments))
        return badInput(parser.errorText());
    if (parser.isSet(QStringLiteral("help"))) {
        out() << commandHelp(parser, arguments) << environmentHelp();
        return Ok;
    }
    v1::CollectGarbageRequest request;
    const QString finished = parser.value(QStringLiteral("finished"));
    if (!finished.isEmpty() && finished != QLatin1String("final") && finished != QLatin1String("none"))
        return badInput(QStringLiteral("--finished must be final or none (got '%1')").arg(finished));
    request.set_finished_runs(finished.toStdString());
    if (parser.isSet(QStringLiteral("older-than-days"))) {
        bool ok = false;
        const double days = parser.value(QStringLiteral("older-than-days")).toDouble(&ok);
        if (!ok || !std::isfinite(days) || days < 0 || days > 36500)
            return badInput(QStringLiteral("--older-than-days must be a number from 0 to 36500 (got '%1')")
                                .arg(parser.value(QStringLiteral("older-than-days"))));
        request.set_older_than_days(days);
    }
    request.set_include_failed(parser.isSet(QStringLiteral("include-failed")));
    request.set_dry_run(parser.isSet(QStringLiteral("dry-run")));
    AgentConnection agent;
    if (int rc = connectAgent(parser, &agent); rc != Ok)
        return rc;
    v1::CollectGarbageResponse response;
    const auto result = agent.client->collectGarbage(request, &response);
    if (!result.ok()) {
        err() << "scalelab-cli: " << result.error() << "\n";
        return AgentError;
    }
    // The console's copies: runs of studies in this journal that SUCCEEDED keep none (the
    // runner removes them as they end; leftovers of a crash go here), and with
    // --include-failed FAILED and CANCELLED runs' copies go too.
    const QString stateDir = parser.isSet(QStringLiteral("console-state-dir"))
        ? parser.value(QStringLiteral("console-state-dir"))
        : defaultStateDir();
    qint64 localBytes = 0;
    QStringList localRemoved;
    if (const Status tidied = tidyConsoleCopies(stateDir, request, &localRemoved, &localBytes); !tidied)
        return badInput(tidied.error());
    if (parser.isSet(QStringLiteral("json"))) {
        out() << protoJson(response) << "\n";
        return Ok;
    }
    const char *verb = request.dry_run() ? "would remove" : "removed";
    for (const auto &r : response.removed())
        out() << verb << " " << QString::fromStdString(r.path()) << " (" << megabytes(r.bytes())
              << "): " << QString::fromStdString(r.why()) << "\n";
    for (const QString &dir : localRemoved)
        out() << verb << " " << dir << " (the console's copy of a finished run's checkpoint)\n";
    out() << "agent " << agent.client->endpoint() << ": " << verb << " " << response.removed_size()
          << " folder(s), " << megabytes(response.bytes_freed()) << "; "
          << megabytes(response.storage().free_bytes()) << " free now\n";
    if (!localRemoved.isEmpty())
        out() << "console state " << stateDir << ": " << verb << " " << localRemoved.size() << " folder(s), "
              << megabytes(localBytes) << "\n";
    return Ok;
}

int scalelab::app::describeCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral("Show an agent's inventory: node, data sets, runs."));
    parser.addHelpOption();
    addOneAgentOptions(parser);
    parser.addOption({ QStringLiteral("json"), QStringLiteral("Print the inventory as JSON.") });
    if (!parser.parse(arguments))
        return badInput(parser.errorText());
    if (parser.isSet(QStringLiteral("help"))) {
        out() << commandHelp(parser, arguments) << environmentHelp();
        return Ok;
    }
    AgentConnection agent;
    if (int rc = connectAgent(parser, &agent); rc != Ok)
        return rc;
    v1::DescribeResponse inventory;
    const auto result = agent.client->describe(&inventory);
    if (!result.ok()) {
        err() << "scalelab-cli: " << result.error() << "\n";
        return AgentError;
    }
    if (parser.isSet(QStringLiteral("json"))) {
        out() << protoJson(inventory) << "\n";
        return Ok;
    }
    out() << "agent " << agent.client->endpoint() << ": " << QString::fromStdString(inventory.hostname())
          << ", scalelab-agent " << QString::fromStdString(inventory.agent_version()) << ", "
          << inventory.cpu_cores() << " CPU cores, "
          << QString::number(double(inventory.memory_bytes()) / (1 << 30), 'f', 1) << " GiB, "
          << inventory.gpus_size() << " GPU(s)\n";
    if (!inventory.advertise_address().empty())
        out() << "ranks reached at " << QString::fromStdString(inventory.advertise_address())
              << (inventory.network_interface().empty()
                         ? QString()
                         : QStringLiteral(" on ") + QString::fromStdString(inventory.network_interface()))
              << " (" << QString::fromStdString(inventory.network_note()) << ")\n";
    if (!inventory.network_warning().empty())
        out() << "warning: " << QString::fromStdString(inventory.network_warning()) << "\n";
    if (!inventory.cpu_model().empty())
        out() << "cpu: " << QString::fromStdString(inventory.cpu_model()) << "\n";
    for (const auto &[component, version] : inventory.software())
        out() << component.c_str() << ": " << QString::fromStdString(version) << "\n";
    out() << "data sets in " << QString::fromStdString(inventory.data_dir()) << ":\n";
    if (inventory.datasets().empty())
        out() << "  none (create one with: scalelab-cli run --synthetic, or extract "
                 "cifar-10-binary.tar.gz there)\n";
    for (const auto &d : inventory.datasets()) {
        out() << "  " << QString::fromStdString(d.name()) << ": " << d.train_images() << " train / "
              << d.test_images() << " test images"
              << (d.synthetic()
                         ? QStringLiteral(" [SYNTHETIC, %1]").arg(QString::fromStdString(d.synthetic_kind()))
                         : QString())
              << "\n";
        if (d.channel_mean_size() == 3 && d.channel_std_size() == 3)
            out() << "    normalisation mean " << d.channel_mean(0) << " " << d.channel_mean(1) << " "
                  << d.channel_mean(2) << ", std " << d.channel_std(0) << " " << d.channel_std(1) << " "
                  << d.channel_std(2) << "; sha256 " << QString::fromStdString(d.content_sha256()) << "\n";
    }
    if (inventory.has_storage()) {
        const auto &st = inventory.storage();
        out() << "disk: " << QString::fromStdString(st.state_dir()) << ": " << megabytes(st.free_bytes())
              << " free of " << megabytes(st.total_bytes()) << "; checkpoints "
              << megabytes(st.checkpoint_bytes()) << " (" << st.runs_with_checkpoints()
              << " runs), unfinished " << megabytes(st.temporary_bytes()) << ", records "
              << megabytes(st.record_bytes()) << "\n"
              << "retention: " << QString::fromStdString(st.retention())
              << " (free space now: scalelab-cli gc)\n";
    }
    out() << "runs: " << inventory.runs_recorded() << " recorded";
    if (inventory.runs_recorded() > inventory.runs_size())
        out() << "; active and latest finished (every run: scalelab-cli runs)";
    out() << "\n";
    for (const auto &r : inventory.runs())
        out() << "  " << QString::fromStdString(r.run_id()) << " attempt " << r.attempt() << " "
              << RunRecord::stateName(r.state()) << "\n";
    return Ok;
}

// `runs`: every run an agent has recorded (ListRuns, a page at a time).
int scalelab::app::runsCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(QStringLiteral(
        "List every run an agent has recorded, active and finished, in run id order: attempt, state, "
        "when it ran, and why it failed."));
    parser.addHelpOption();
    addOneAgentOptions(parser);
    parser.addOption({ QStringLiteral("limit"), QStringLiteral("At most this many runs (default: all)."),
        QStringLiteral("n") });
    parser.addOption({ QStringLiteral("after"), QStringLiteral("Only runs whose id sorts after this one."),
        QStringLiteral("run-id") });
    parser.addOption(
        { QStringLiteral("json"), QStringLiteral("Print the runs as JSON (ListRunsResponse).") });
    if (!parser.parse(arguments))
        return badInput(parser.errorText());
    if (parser.isSet(QStringLiteral("help"))) {
        out() << commandHelp(parser, arguments) << environmentHelp();
        return Ok;
    }
    qint64 limit = std::numeric_limits<qint64>::max();
    if (parser.isSet(QStringLiteral("limit"))) {
        bool ok = false;
        limit = parser.value(QStringLiteral("limit")).toLongLong(&ok);
        if (!ok || limit < 1)
            return badInput(QStringLiteral("--limit must be a whole number of 1 or more (got '%1')")
                                .arg(parser.value(QStringLiteral("limit"))));
    }
    AgentConnection agent;
    if (int rc = connectAgent(parser, &agent); rc != Ok)
        return rc;
    v1::ListRunsRequest request;
    request.set_page_token(parser.value(QStringLiteral("after")).toStdString());
    v1::ListRunsResponse all;
    for (;;) {
        request.set_page_size(int(std::min<qint64>(1000, limit - all.runs_size())));
        v1::ListRunsResponse page;
        if (const auto result = agent.client->listRuns(request, &page); !result.ok()) {
            err() << "scalelab-cli: " << result.error() << "\n";
            return AgentError;
        }
        all.set_total(page.total());
        for (auto &run : *page.mutable_runs())
            *all.add_runs() = std::move(run);
        if (page.next_page_token().empty() || all.runs_size() >= limit) {
            all.set_next_page_token(page.next_page_token()); // where --after goes on
            break;
        }
        request.set_page_token(page.next_page_token());
    }
    if (parser.isSet(QStringLiteral("json"))) {
        out() << protoJson(all) << "\n";
        return Ok;
    }
    for (const auto &r : all.runs()) {
        const auto when = [](qint64 ms) {
            return ms > 0 ? QDateTime::fromMSecsSinceEpoch(ms).toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"))
                          : QStringLiteral("-");
        };
        out() << QString::fromStdString(r.run_id()) << "  attempt " << r.attempt() << "  "
              << RunRecord::stateName(r.state()) << "  " << when(r.started_unix_ms()) << " .. "
              << when(r.ended_unix_ms())
              << (r.message().empty() || r.state() == v1::SUCCEEDED
                         ? QString()
                         : QStringLiteral("  ") + QString::fromStdString(r.message()))
              << "\n";
    }
    out() << all.runs_size() << " of " << all.total() << " run(s) recorded on " << agent.client->endpoint()
          << "\n";
    return Ok;
}
