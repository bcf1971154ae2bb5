// A study's runs as the scaling model's inputs (scaling_model.h): each succeeded run's
// measurements as a ScalingRun, grouped by model and batch per worker, and the label of a
// group.
#include "scaling_model.h"

#include <QMap>

#include <algorithm>
#include <cmath>

namespace scalelab::core {

ScalingRun scalingRunOf(const RunResult &run)
{
    ScalingRun r;
    r.runId = run.runId;
    r.workers = run.config.workers;
    r.batchPerWorker = run.config.batchSize;
    r.gradientBytes = run.gradientBytes;
    r.perStep = run.anatomy.perStep;
    r.network = run.network;
    r.coreShare = run.coreShare;
    r.threads = run.threads;
    for (const StepPoint &p : run.steps)
        if (p.times.measured())
            r.steps << p.times;
    return r;
}

QString scalingLabel(const StudyScaling &scaling, const QMap<QString, QString> &modelNames)
{
    const QString name = modelNames.value(scaling.model, scaling.model);
    return scaling.precision == QLatin1String("bf16") ? name + QStringLiteral(" · bf16") : name;
}

QList<StudyScaling> studyScaling(const StudySnapshot &snapshot)
{
    QList<StudyScaling> all;
    for (const RunResult &run : snapshot.runs) {
        if (run.state != QLatin1String("SUCCEEDED") || !run.anatomy.measured())
            continue;
        // bf16 and fp32 compute at different speeds: a fit each.
        auto it = std::find_if(all.begin(), all.end(), [&](const StudyScaling &s) {
            return s.model == run.config.model && s.precision == run.config.precision;
        });
        if (it == all.end()) {
            all.append(StudyScaling { run.config.model, run.config.precision, {}, {}, {}, {}, 0 });
            it = all.end() - 1;
        }
        it->runs << scalingRunOf(run);
    }
    for (StudyScaling &s : all) {
        s.fit = fitScalingModel(s.runs);
        s.heldOut = leaveOneOut(s.runs);
        QMap<int, int> counts;
        for (const ScalingRun &r : s.runs)
            ++counts[r.batchPerWorker];
        for (auto it = counts.cbegin(); it != counts.cend(); ++it)
            if (s.batchPerWorker == 0 || it.value() > counts.value(s.batchPerWorker))
                s.batchPerWorker = it.key();
        // Consecutive worker counts at each batch: the mean run of each count.
        for (auto b = counts.cbegin(); b != counts.cend(); ++b) {
            QMap<int, QList<const ScalingRun *>> byWorkers;
            for (const ScalingRun &r : s.runs)
                if (r.batchPerWorker == b.key())
                    byWorkers[r.workers] << &r;
            const auto mean = [](const QList<const ScalingRun *> &runs) {
                ScalingRun m = *runs.first();
                StepTimes sum = StepTimes::zero();
                for (const ScalingRun *r : runs)
                    sum += r->perStep;
                m.perStep = sum.dividedBy(double(runs.size()));
                return m;
            };
            const QList<int> workerCounts = byWorkers.keys();
            for (int i = 1; i < workerCounts.size(); ++i) {
                const QString text = efficiencyLossText(
                    mean(byWorkers[workerCounts[i - 1]]), mean(byWorkers[workerCounts[i]]), s.fit);
                if (!text.isEmpty())
                    s.losses << text;
            }
        }
    }
    return all;
}

} // namespace scalelab::core
