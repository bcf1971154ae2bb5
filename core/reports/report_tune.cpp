#include "report_tune.h"

#include "report_content.h"
#include "study_plan.h"
#include "tune_plan.h"

#include <QSet>

#include <algorithm>
#include <cmath>
#include <limits>

namespace scalelab::core {

namespace {

bool isPromotion(const TrialDecision &d)
{
    return d.action == QLatin1String("promote");
}

QString numberText(double v)
{
    return QString::number(v, 'g', 4);
}

} // namespace

QString tuneMetricName(const QString &metric)
{
    if (metric == QLatin1String("test_loss"))
        return QStringLiteral("test loss");
    if (metric == QLatin1String("train_loss"))
        return QStringLiteral("training loss");
    return QStringLiteral("test accuracy");
}

bool tuneMetricIsFraction(const QString &metric)
{
    return metric != QLatin1String("test_loss") && metric != QLatin1String("train_loss");
}

QString tuneMetricCell(const QString &metric, double value)
{
    return std::isfinite(value) ? metricText(metric, value) : kDash;
}

QString paramValueText(const QJsonValue &value)
{
    if (value.isString())
        return value.toString();
    if (value.isDouble())
        return QString::number(value.toDouble(), 'g', 3);
    return {};
}

QString dimensionRangeText(const TuneDimension &d)
{
    if (d.choice()) {
        QStringList values;
        for (const QJsonValue &v : d.values)
            values << (v.isString() ? v.toString() : numberText(v.toDouble()));
        return values.join(QStringLiteral(", "));
    }
    return QStringLiteral("%1 – %2").arg(numberText(d.low), numberText(d.high));
}

double judgedValue(const RunResult &run, int epoch, bool *judged)
{
    if (judged)
        *judged = false;
    for (const TrialDecision &d : run.decisions) {
        if (isPromotion(d) || d.epoch != epoch)
            continue;
        if (judged)
            *judged = true;
        return d.value;
    }
    return kNotMeasured;
}

QStringList tuneParamNames(const StudySnapshot &snapshot, const TuneReport &tune)
{
    QStringList names;
    for (const TuneDimension &d : tune.space)
        names << d.name;
    QStringList others;
    for (const RunResult &run : snapshot.runs)
        for (auto it = run.params.constBegin(); it != run.params.constEnd(); ++it)
            if (!names.contains(it.key()) && !others.contains(it.key()))
                others << it.key();
    // Known names in their drawing order, unknown ones after them.
    for (const QString &name : tunableNames())
        if (others.removeAll(name) > 0)
            names << name;
    return names + others;
}

TuneReport tuneReport(const StudySnapshot &s)
{
    TuneReport t;
    t.metric = s.tuneMetric.isEmpty() ? QStringLiteral("test_accuracy") : s.tuneMetric;
    t.maximize = s.tuneMaximize;
    t.scheduler = s.tuneScheduler;

    std::optional<v1::StudyPlan> plan;
    if (auto parsed = parsePlanJson(s.planJson); !s.planJson.isEmpty() && parsed)
        plan = std::move(parsed).value();
    QSet<int> rungs;
    if (plan && plan->has_tune()) {
        t.planRead = true;
        const TuneSettings settings = tuneSettings(*plan);
        t.searcher = settings.searcher;
        t.samples = settings.samples;
        t.seed = settings.seed;
        t.trialEpochs = settings.trialEpochs;
        for (int b = 0; b < (settings.promotion() ? 1 : std::max(1, settings.brackets)); ++b) {
            const QList<int> targets = trialTargets(settings, b);
            for (int i = 0; i + 1 < targets.size(); ++i)
                rungs.insert(targets[i]);
        }
        const auto &space = plan->tune().space();
        for (const QString &name : tunableNames()) {
            const auto it = space.find(name.toStdString());
            if (it == space.end())
                continue;
            const v1::Distribution &d = it->second;
            TuneDimension dim;
            dim.name = name;
            dim.label = paramLabel(name);
            dim.kind = QString::fromStdString(d.kind());
            dim.logScale = drawnInLogSpace(*plan, name);
            if (dim.choice()) {
                for (const auto &v : d.values())
                    dim.values.append(v.has_string_value()
                            ? QJsonValue(QString::fromStdString(v.string_value()))
                            : QJsonValue(v.number_value()));
            } else {
                dim.low = d.low();
                dim.high = d.high();
                if (dim.kind.startsWith(QLatin1Char('q')))
                    dim.q = d.q();
            }
            t.space << dim;
        }
    }

    // Every epoch judged, and the rungs when the plan could not say.
    QSet<int> judged;
    for (const RunResult &run : s.runs) {
        if (!run.trial)
            continue;
        ++t.trials;
        for (const TrialDecision &d : run.decisions) {
            if (isPromotion(d) || d.epoch <= 0)
                continue;
            judged.insert(d.epoch);
            if (!t.planRead && d.action != QLatin1String("finish"))
                rungs.insert(d.epoch);
        }
    }
    judged.unite(rungs);
    if (t.planRead && t.trialEpochs > 0)
        judged.insert(t.trialEpochs); // the end, where a trial that trained all its epochs is judged
    t.rungEpochs = QList<int>(rungs.cbegin(), rungs.cend());
    std::sort(t.rungEpochs.begin(), t.rungEpochs.end());
    t.judgedEpochs = QList<int>(judged.cbegin(), judged.cend());
    std::sort(t.judgedEpochs.begin(), t.judgedEpochs.end());

    t.best = bestTrialIndex(s);
    if (t.best >= 0) {
        const RunResult &b = s.runs[t.best];
        t.bestValue = trialMetric(s, b.epochs.last());
        t.bestEpoch = b.epochs.last().epoch;
    }
    for (const RunResult &run : s.runs)
        t.finalMetric << (run.trial && !run.epochs.isEmpty() ? trialMetric(s, run.epochs.last())
                                                             : kNotMeasured);
    t.epochsSpent = epochsSpent(s);
    t.epochsWithoutStopping = epochsWithoutStopping(s);

    // The journal's order: every decision knows the event that recorded it.
    struct Keyed {
        TuneDecisionRef ref;
        qint64 eventId;
    };
    QList<Keyed> keyed;
    for (int r = 0; r < s.runs.size(); ++r)
        for (int i = 0; i < s.runs[r].decisions.size(); ++i)
            keyed.append({ { r, i }, s.runs[r].decisions[i].eventId });
    std::stable_sort(
        keyed.begin(), keyed.end(), [](const Keyed &a, const Keyed &b) { return a.eventId < b.eventId; });
    for (const Keyed &k : keyed)
        t.decisions << k.ref;
    return t;
}

} // namespace scalelab::core
