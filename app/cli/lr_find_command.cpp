// `scalelab-cli lr-find`: the learning-rate range test on an agent, drawn on the terminal
// (smoothed loss against a log-scale learning rate) with the rate it suggests.
#include "agent_connection.h"
#include "cli_common.h"
#include "interrupts.h"

#include <algorithm>
#include <cmath>

using namespace scalelab;
using namespace scalelab::core;

namespace {

// Smoothed loss against log(lr), in characters: what `lr-find` shows on a terminal.
QStringList asciiPlot(const QList<v1::LrFindPoint> &points, double suggested)
{
    constexpr int kWidth = 64, kHeight = 14;
    if (points.size() < 2)
        return {};
    double low = points.first().smoothed_loss(), high = low;
    for (const auto &p : points)
        if (std::isfinite(p.smoothed_loss())) {
            low = std::min(low, p.smoothed_loss());
            high = std::max(high, p.smoothed_loss());
        }
    high
        = std::min(high, low + 2.5 * (points.first().smoothed_loss() - low) + 1e-9); // keep the fall readable
    const double x0 = std::log10(points.first().learning_rate()),
                 x1 = std::log10(points.last().learning_rate());
    QList<QString> rows(kHeight, QString(kWidth, QLatin1Char(' ')));
    const auto column = [&](double lr) {
        return std::clamp(
            int(std::lround((std::log10(lr) - x0) / std::max(1e-12, x1 - x0) * (kWidth - 1))), 0, kWidth - 1);
    };
    for (const auto &p : points) {
        if (!std::isfinite(p.smoothed_loss()))
            continue;
        const double y = std::clamp((p.smoothed_loss() - low) / std::max(1e-12, high - low), 0.0, 1.0);
        rows[kHeight - 1 - int(std::lround(y * (kHeight - 1)))][column(p.learning_rate())] = QLatin1Char('*');
    }
    if (suggested > 0)
        for (auto &row : rows)
            if (row[column(suggested)] == QLatin1Char(' '))
                row[column(suggested)] = QLatin1Char('|');
    QStringList lines;
    for (int i = 0; i < kHeight; ++i) {
        const double value = high - (high - low) * i / (kHeight - 1);
        lines << QStringLiteral("%1 |%2").arg(QString::number(value, 'f', 3), 7).arg(rows[i]);
    }
    lines << QStringLiteral("        +%1").arg(QString(kWidth, QLatin1Char('-')));
    lines << QStringLiteral("         lr %1 … %2 (log scale); | = suggested")
                 .arg(QString::number(points.first().learning_rate(), 'g', 3),
                     QString::number(points.last().learning_rate(), 'g', 3));
    return lines;
}

void addLrFindOptions(QCommandLineParser &parser)
{
    parser.addOptions({
        { QStringLiteral("dataset"), QStringLiteral("Data set name on the agent (required)."),
            QStringLiteral("name") },
        { QStringLiteral("batch-size"), QStringLiteral("Images per step (the runs' global batch)."),
            QStringLiteral("n"), QStringLiteral("64") },
        { QStringLiteral("momentum"), QStringLiteral("SGD momentum (default: the trainer's)."),
            QStringLiteral("x") },
        { QStringLiteral("weight-decay"), QStringLiteral("Weight decay (default: the trainer's)."),
            QStringLiteral("x") },
        { QStringLiteral("seed"), QStringLiteral("Seed of the model and the batches."), QStringLiteral("n"),
            QStringLiteral("1") },
        { QStringLiteral("threads"), QStringLiteral("Threads (0 = all cores)."), QStringLiteral("n"),
            QStringLiteral("0") },
        { QStringLiteral("max-train-images"), QStringLiteral("Use only the first N training images."),
            QStringLiteral("n"), QStringLiteral("0") },
        { QStringLiteral("steps"), QStringLiteral("Steps of the test (10..100000)."), QStringLiteral("n"),
            QStringLiteral("200") },
        { QStringLiteral("min-lr"), QStringLiteral("First learning rate."), QStringLiteral("x"),
            QStringLiteral("1e-5") },
        { QStringLiteral("max-lr"), QStringLiteral("Last learning rate (at most 1000)."), QStringLiteral("x"),
            QStringLiteral("10") },
        { QStringLiteral("json"), QStringLiteral("Print every point and the result as JSON lines.") },
    });
}

// The request the options describe; empty, or what is wrong with them.
QString readRequest(const QCommandLineParser &parser, v1::FindLearningRateRequest *request)
{
    auto *spec = request->mutable_spec();
    spec->set_dataset(parser.value(QStringLiteral("dataset")).toStdString());
    QString bad;
    const auto number = [&](const char *name, double *value) {
        bool ok = true;
        *value = parser.value(QLatin1String(name)).toDouble(&ok);
        if (!ok)
            bad = QStringLiteral("--%1 expects a number (got '%2')")
                      .arg(QLatin1String(name), parser.value(QLatin1String(name)));
        return ok;
    };
    double v = 0;
    if (number("batch-size", &v))
        spec->set_batch_size(int(v));
    if (parser.isSet(QStringLiteral("momentum")) && number("momentum", &v))
        spec->set_momentum(v);
    if (parser.isSet(QStringLiteral("weight-decay")) && number("weight-decay", &v))
        spec->set_weight_decay(v);
    if (number("seed", &v))
        spec->set_seed(quint64(v));
    if (number("threads", &v))
        spec->set_threads_per_worker(int(v));
    if (number("max-train-images", &v))
        spec->set_max_train_images(qint64(v));
    if (number("steps", &v))
        request->set_steps(int(v));
    if (number("min-lr", &v))
        request->set_min_lr(v);
    if (number("max-lr", &v))
        request->set_max_lr(v);
    return bad;
}

// The curve on the terminal, the suggested rate and how to use it.
void printResult(const QList<v1::LrFindPoint> &points, const v1::LrFindResult &result)
{
    for (const QString &line : asciiPlot(points, result.suggested_learning_rate()))
        out() << line << "\n";
    out() << "lowest smoothed loss at lr " << QString::number(result.min_loss_learning_rate(), 'g', 4)
          << ", steepest fall at lr " << QString::number(result.steepest_learning_rate(), 'g', 4)
          << (result.stopped_early() ? ", stopped early (the loss diverged)" : "") << "\n"
          << "suggested learning rate: " << QString::number(result.suggested_learning_rate(), 'g', 4)
          << " for batch " << result.batch_size() << " (" << QString::fromStdString(result.rule()) << ")\n"
          << (result.conclusive()
                     ? QString()
                     : QStringLiteral("WARNING: %1\n").arg(QString::fromStdString(result.note())))
          << "use it: \"training\": { \"learningRate\": "
          << QString::number(result.suggested_learning_rate(), 'g', 4)
          << " } in a plan, or \"learningRate\": \"auto\" to have a study run this test first\n";
}

} // namespace

int scalelab::app::lrFindCommand(QStringList arguments)
{
    QCommandLineParser parser;
    parser.setApplicationDescription(
        QStringLiteral(
            "Learning-rate range test: train a fresh model for a few hundred steps with the learning "
            "rate rising exponentially, and propose a value (the lr at the lowest smoothed loss / "
            "10). Pass the global batch of the runs the value is for as --batch-size.")
        + interruptHelp(QStringLiteral("stops the test and exits 1")));
    parser.addHelpOption();
    addOneAgentOptions(parser);
    addLrFindOptions(parser);
    if (!parser.parse(arguments))
        return badInput(parser.errorText() + QStringLiteral("; see 'scalelab-cli lr-find --help'"));
    if (parser.isSet(QStringLiteral("help"))) {
        out() << commandHelp(parser, arguments) << environmentHelp();
        return Ok;
    }
    if (!parser.isSet(QStringLiteral("dataset")))
        return badInput(
            QStringLiteral("--dataset is required: a data set on the agent (see scalelab-cli describe)"));
    v1::FindLearningRateRequest request;
    if (const QString bad = readRequest(parser, &request); !bad.isEmpty())
        return badInput(bad);
    InterruptGuard interrupts; // before the agent: a local one's stop stays within its reach
    AgentConnection agent;
    if (int rc = connectAgent(parser, &agent); rc != Ok)
        return rc;
    if (interrupts.requested()) {
        err() << "scalelab-cli: interrupted before the range test started\n";
        return RunFailed;
    }
    const bool json = parser.isSet(QStringLiteral("json"));
    QList<v1::LrFindPoint> points;
    err() << "range test on " << agent.client->endpoint() << ": batch " << request.spec().batch_size() << ", "
          << request.steps() << " steps, lr " << request.min_lr() << " to " << request.max_lr() << "\n";
    err().flush();
    v1::LrFindResult result;
    const Status call = agent.client->findLearningRate(
        request,
        [&](const v1::LrFindProgress &progress) {
            for (const auto &p : progress.points()) {
                points << p;
                if (json)
                    out() << protoJson(p) << "\n";
            }
            if (!json && !progress.points().empty()) {
                const auto &p = progress.points(progress.points_size() - 1);
                err() << "  step " << p.step() << ": lr " << QString::number(p.learning_rate(), 'g', 3)
                      << ", smoothed loss " << QString::number(p.smoothed_loss(), 'f', 3) << "\n";
                err().flush();
            }
            out().flush();
            return !interrupts.requested(); // false cancels the call, and the agent stops the test
        },
        &result);
    if (!call.ok() && interrupts.requested()) {
        err() << "scalelab-cli: interrupted: the range test was stopped\n";
        return RunFailed;
    }
    if (!call.ok()) {
        err() << "scalelab-cli: " << call.error() << "\n";
        return call.isInvalidArgument() || call.isFailedPrecondition() ? BadInput : AgentError;
    }
    if (json) {
        out() << protoJson(result) << "\n";
        return Ok;
    }
    printResult(points, result);
    return Ok;
}
